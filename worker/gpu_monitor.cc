#include "worker/gpu_monitor.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"
#include "core/log.h"

namespace psflow {
namespace {

// NVML's C ABI, as nvml.h declares it (stable across driver versions for these entry points).
using NvmlReturn = int;  // nvmlReturn_t; 0 is NVML_SUCCESS
using NvmlDevice = struct NvmlDeviceOpaque*;
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlNotFound = 6;

}  // namespace

struct GpuMonitor::Api {
  NvmlReturn (*init)();
  NvmlReturn (*shutdown)();
  const char* (*error_string)(NvmlReturn);
  NvmlReturn (*by_pci_bus_id)(const char*, NvmlDevice*);
  NvmlReturn (*utilization)(NvmlDevice, NvmlUtilization*);
  NvmlReturn (*memory)(NvmlDevice, NvmlMemory*);
};

namespace {

template <class F>
bool Bind(void* handle, const char* name, F*& fn) {
  fn = reinterpret_cast<F*>(dlsym(handle, name));
  return fn != nullptr;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuMonitor>> GpuMonitor::Open(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::UnavailableError(absl::StrCat("NVML not available: cannot load ", library, ": ",
                                               why != nullptr ? why : "unknown error"));
  }
  auto api = std::make_unique<Api>();
  const char* missing = nullptr;
  if (!Bind(handle, "nvmlInit_v2", api->init)) missing = "nvmlInit_v2";
  if (!Bind(handle, "nvmlShutdown", api->shutdown)) missing = "nvmlShutdown";
  if (!Bind(handle, "nvmlErrorString", api->error_string)) missing = "nvmlErrorString";
  if (!Bind(handle, "nvmlDeviceGetHandleByPciBusId_v2", api->by_pci_bus_id)) {
    missing = "nvmlDeviceGetHandleByPciBusId_v2";
  }
  if (!Bind(handle, "nvmlDeviceGetUtilizationRates", api->utilization)) {
    missing = "nvmlDeviceGetUtilizationRates";
  }
  if (!Bind(handle, "nvmlDeviceGetMemoryInfo", api->memory)) missing = "nvmlDeviceGetMemoryInfo";
  if (missing != nullptr) {
    dlclose(handle);
    return absl::UnavailableError(
        absl::StrCat("NVML not available: ", library, " has no ", missing));
  }
  if (NvmlReturn r = api->init(); r != kNvmlSuccess) {
    const std::string why = api->error_string(r);
    dlclose(handle);
    return absl::UnavailableError(absl::StrCat("NVML not available: nvmlInit: ", why));
  }
  return std::unique_ptr<GpuMonitor>(new GpuMonitor(handle, std::move(api)));
}

GpuMonitor::GpuMonitor(void* handle, std::unique_ptr<Api> api)
    : handle_(handle), api_(std::move(api)) {}

GpuMonitor::~GpuMonitor() {
  api_->shutdown();
  dlclose(handle_);
}

absl::StatusOr<GpuSample> GpuMonitor::Read(const std::string& pci_bus_id) const {
  NvmlDevice device = nullptr;
  if (NvmlReturn r = api_->by_pci_bus_id(pci_bus_id.c_str(), &device); r != kNvmlSuccess) {
    const std::string message =
        absl::StrCat("NVML: GPU at PCI bus ", pci_bus_id, ": ", api_->error_string(r));
    return r == kNvmlNotFound ? absl::NotFoundError(message) : absl::UnavailableError(message);
  }
  NvmlUtilization utilization{};
  if (NvmlReturn r = api_->utilization(device, &utilization); r != kNvmlSuccess) {
    return absl::UnavailableError(
        absl::StrCat("NVML: utilization of GPU at ", pci_bus_id, ": ", api_->error_string(r)));
  }
  NvmlMemory memory{};
  if (NvmlReturn r = api_->memory(device, &memory); r != kNvmlSuccess) {
    return absl::UnavailableError(
        absl::StrCat("NVML: memory of GPU at ", pci_bus_id, ": ", api_->error_string(r)));
  }
  return GpuSample{utilization.gpu / 100.0, memory.used, memory.total};
}

GpuMetricsExporter::GpuMetricsExporter(const GpuMonitor& monitor, prometheus::Registry& registry,
                                       const Labels& labels, std::vector<MonitoredGpu> gpus,
                                       std::chrono::milliseconds period)
    : monitor_(monitor) {
  for (MonitoredGpu& gpu : gpus) {
    Labels l = labels;
    l["gpu"] = std::to_string(gpu.index);
    gauges_.push_back(std::unique_ptr<Gauges>(new Gauges{
        .gpu = std::move(gpu),
        .utilization = LateGauge(registry, "psflow_worker_gpu_utilization_ratio",
                                 "Fraction of the last sample period a kernel ran on the GPU.", l),
        .memory_used = LateGauge(registry, "psflow_worker_gpu_memory_used_bytes",
                                 "GPU memory in use (all processes).", l),
        .memory_total = LateGauge(registry, "psflow_worker_gpu_memory_total_bytes",
                                  "GPU memory in total.", l)}));
  }
  SampleOnce();
  thread_ = std::thread([this, period] { Run(period); });
}

GpuMetricsExporter::~GpuMetricsExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void GpuMetricsExporter::SampleOnce() {
  for (const std::unique_ptr<Gauges>& g : gauges_) {
    absl::StatusOr<GpuSample> s = monitor_.Read(g->gpu.pci_bus_id);
    if (!s.ok()) {
      if (!g->warned) {
        PSFLOW_LOG(WARNING) << s.status().message() << "; its GPU metrics are absent until it "
                            << "can be read again";
      }
      g->warned = true;
      g->utilization.Clear();
      g->memory_used.Clear();
      g->memory_total.Clear();
      continue;
    }
    g->warned = false;
    g->utilization.Set(s->utilization_ratio);
    g->memory_used.Set(static_cast<double>(s->memory_used_bytes));
    g->memory_total.Set(static_cast<double>(s->memory_total_bytes));
  }
}

void GpuMetricsExporter::Run(std::chrono::milliseconds period) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    SampleOnce();
    lock.lock();
  }
}

}  // namespace psflow
