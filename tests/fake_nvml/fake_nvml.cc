// A stand-in for the NVIDIA driver's libnvidia-ml.so.1 (no driver runs here): the six NVML entry
// points psflow's GpuMonitor loads, with the ABI nvml.h declares. It knows one GPU, at PCI bus
// 0000:3B:00.0 (matched case-insensitively, as NVML does); its utilization in percent is
// $FAKE_NVML_UTILIZATION (default 0) and its memory 1 GiB used of 80 GiB. While the file that
// $FAKE_NVML_GPU_LOST names exists, reading the GPU fails as NVML's does for a GPU that has
// fallen off the bus (NVML_ERROR_GPU_IS_LOST).
#include <strings.h>
#include <unistd.h>

#include <cstdlib>

namespace {

struct Device {
  int id;
};
Device g_gpu{0};
bool g_initialised = false;

struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};
struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kNotFound = 6;
constexpr int kGpuIsLost = 15;

bool GpuLost() {
  const char* file = std::getenv("FAKE_NVML_GPU_LOST");
  return file != nullptr && access(file, F_OK) == 0;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int nvmlInit_v2() {
  g_initialised = true;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlShutdown() {
  g_initialised = false;
  return kSuccess;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(int result) {
  switch (result) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kNotFound:
      return "Not Found";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id,
                                                                            Device** device) {
  if (!g_initialised) return kUninitialized;
  if (strcasecmp(bus_id, "0000:3B:00.0") != 0) return kNotFound;
  *device = &g_gpu;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetUtilizationRates(Device* device,
                                                                         Utilization* out) {
  if (!g_initialised || device != &g_gpu) return kUninitialized;
  if (GpuLost()) return kGpuIsLost;
  const char* env = std::getenv("FAKE_NVML_UTILIZATION");
  out->gpu = env != nullptr ? static_cast<unsigned int>(std::atoi(env)) : 0u;
  out->memory = 0;
  return kSuccess;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(Device* device, Memory* out) {
  if (!g_initialised || device != &g_gpu) return kUninitialized;
  if (GpuLost()) return kGpuIsLost;
  out->total = 80ull << 30;
  out->used = 1ull << 30;
  out->free = out->total - out->used;
  return kSuccess;
}

}  // extern "C"
