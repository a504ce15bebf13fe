// GPU utilization and memory through NVML, the NVIDIA driver's management library, loaded at run
// time with dlopen("libnvidia-ml.so.1"): the worker binary needs no NVIDIA driver to start, and
// a machine without one simply exports no GPU metrics.
//
// GpuMetricsExporter samples the GPUs a worker uses on a background thread and sets
//   psflow_worker_gpu_utilization_ratio      (0..1: the fraction of the last sample period in
//                                             which a kernel ran, NVML's "gpu" utilization)
//   psflow_worker_gpu_memory_used_bytes
//   psflow_worker_gpu_memory_total_bytes
// each labelled with the worker's labels and gpu="<CUDA device index>"; a GPU that cannot be
// read (NVML fails for it) has no series until it can be again, rather than a 0 or its last
// value, which dashboards would take for a measurement.
#ifndef PSFLOW_WORKER_GPU_MONITOR_H_
#define PSFLOW_WORKER_GPU_MONITOR_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "core/metrics.h"
#include "prometheus/registry.h"

namespace psflow {

struct GpuSample {
  double utilization_ratio = 0;  // 0..1
  uint64_t memory_used_bytes = 0;
  uint64_t memory_total_bytes = 0;
};

class GpuMonitor {
 public:
  // Loads `library` and initialises NVML. UNAVAILABLE, naming the library and the reason, when
  // it cannot be loaded (no NVIDIA driver here), lacks a function or NVML fails to start.
  static absl::StatusOr<std::unique_ptr<GpuMonitor>> Open(
      const std::string& library = "libnvidia-ml.so.1");
  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // The GPU at this PCI bus id, as cudaDeviceGetPCIBusId writes it ("0000:3b:00.0"): NVML's
  // own indexes ignore CUDA_VISIBLE_DEVICES, bus ids do not. NOT_FOUND when NVML has no such GPU.
  absl::StatusOr<GpuSample> Read(const std::string& pci_bus_id) const;

 private:
  struct Api;
  GpuMonitor(void* handle, std::unique_ptr<Api> api);
  void* handle_;
  std::unique_ptr<Api> api_;
};

// One GPU a worker uses: its CUDA index (the label) and PCI bus id (how NVML finds it).
struct MonitoredGpu {
  int index = 0;
  std::string pci_bus_id;
};

class GpuMetricsExporter {
 public:
  // Samples every `period` until destroyed (the first sample is taken before this returns).
  // `monitor` and `registry` must outlive the exporter.
  GpuMetricsExporter(const GpuMonitor& monitor, prometheus::Registry& registry,
                     const Labels& labels, std::vector<MonitoredGpu> gpus,
                     std::chrono::milliseconds period);
  ~GpuMetricsExporter();
  GpuMetricsExporter(const GpuMetricsExporter&) = delete;
  GpuMetricsExporter& operator=(const GpuMetricsExporter&) = delete;

 private:
  struct Gauges {
    MonitoredGpu gpu;
    LateGauge utilization;
    LateGauge memory_used;
    LateGauge memory_total;
    bool warned = false;  // a failed read is logged once, and again after a good one
  };
  void SampleOnce();
  void Run(std::chrono::milliseconds period);

  const GpuMonitor& monitor_;
  std::vector<std::unique_ptr<Gauges>> gauges_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_GPU_MONITOR_H_
