// GpuMonitor against a stand-in NVML library (tests/fake_nvml: no NVIDIA driver runs here; on a
// GPU machine the same code loads the driver's libnvidia-ml.so.1), and its failure modes.
#include "worker/gpu_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "core/prometheus_text.h"
#include "prometheus/text_serializer.h"

#ifndef PSFLOW_FAKE_NVML_PATH
#error "the build passes the stand-in NVML library's path"
#endif

namespace psflow {
namespace {

using ::testing::HasSubstr;

TEST(GpuMonitor, MissingLibraryIsUnavailableNamingIt) {
  auto monitor = GpuMonitor::Open("libnvidia-ml-not-here.so.1");
  ASSERT_FALSE(monitor.ok());
  EXPECT_EQ(monitor.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(monitor.status().message(), HasSubstr("libnvidia-ml-not-here.so.1"));
}

TEST(GpuMonitor, LibraryWithoutNvmlIsUnavailableNamingTheFunction) {
  auto monitor = GpuMonitor::Open("libz.so.1");
  ASSERT_FALSE(monitor.ok());
  EXPECT_EQ(monitor.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(monitor.status().message(), HasSubstr("has no nvml"));
}

TEST(GpuMonitor, FakeNvmlReadsUtilizationAndMemoryByBusId) {
  setenv("FAKE_NVML_UTILIZATION", "42", 1);
  auto monitor = GpuMonitor::Open(PSFLOW_FAKE_NVML_PATH);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  auto sample = (*monitor)->Read("0000:3b:00.0");  // CUDA writes lower case, NVML upper
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_DOUBLE_EQ(sample->utilization_ratio, 0.42);
  EXPECT_EQ(sample->memory_used_bytes, 1ull << 30);
  EXPECT_EQ(sample->memory_total_bytes, 80ull << 30);

  auto absent = (*monitor)->Read("0000:99:00.0");
  ASSERT_FALSE(absent.ok());
  EXPECT_EQ(absent.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(absent.status().message(), HasSubstr("0000:99:00.0"));
}

TEST(GpuMetricsExporter, FakeNvmlGaugesCarryTheWorkerLabelsAndGpuIndex) {
  setenv("FAKE_NVML_UTILIZATION", "73", 1);
  auto monitor = GpuMonitor::Open(PSFLOW_FAKE_NVML_PATH);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  prometheus::Registry registry;
  GpuMetricsExporter exporter(**monitor, registry, {{"job", "j"}}, {{0, "0000:3B:00.0"}},
                              std::chrono::milliseconds(50));
  const std::string text = prometheus::TextSerializer().Serialize(registry.Collect());
  EXPECT_THAT(text, HasSubstr("psflow_worker_gpu_utilization_ratio{gpu=\"0\",job=\"j\"}"));
  EXPECT_EQ(SumSamples(text, "psflow_worker_gpu_utilization_ratio"), 0.73);
  EXPECT_EQ(SumSamples(text, "psflow_worker_gpu_memory_used_bytes"), 1073741824.0);
  EXPECT_EQ(SumSamples(text, "psflow_worker_gpu_memory_total_bytes"), 85899345920.0);
}

// A GPU NVML cannot read has no series (not a 0, not its last value), and gets them back once it
// can be read again.
TEST(GpuMetricsExporter, AGpuThatCannotBeReadHasNoSeriesUntilItCanAgain) {
  const std::string lost = ::testing::TempDir() + "/gpu_monitor_test_gpu_lost";
  std::ofstream(lost) << "";
  setenv("FAKE_NVML_GPU_LOST", lost.c_str(), 1);
  setenv("FAKE_NVML_UTILIZATION", "55", 1);
  auto monitor = GpuMonitor::Open(PSFLOW_FAKE_NVML_PATH);
  ASSERT_TRUE(monitor.ok()) << monitor.status();
  prometheus::Registry registry;
  const auto text = [&registry] {
    return prometheus::TextSerializer().Serialize(registry.Collect());
  };
  // The sampler's next look (all three series set, or all cleared), within 10 s.
  const auto await = [&](bool present) {
    for (int i = 0; i < 1000; ++i) {
      const std::string now = text();
      if (absl::c_all_of(std::vector<std::string>{"psflow_worker_gpu_utilization_ratio{",
                                                  "psflow_worker_gpu_memory_used_bytes{",
                                                  "psflow_worker_gpu_memory_total_bytes{"},
                         [&](const std::string& series) {
                           return absl::StrContains(now, series) == present;
                         })) {
        return true;
      }
      usleep(10000);
    }
    return false;
  };
  {
    GpuMetricsExporter exporter(**monitor, registry, {{"job", "j"}}, {{0, "0000:3B:00.0"}},
                                std::chrono::milliseconds(20));
    EXPECT_EQ(text(), "");  // no series (and so no family) until a read succeeds

    std::remove(lost.c_str());
    EXPECT_TRUE(await(true)) << text();
    EXPECT_EQ(SumSamples(text(), "psflow_worker_gpu_utilization_ratio"), 0.55);
    EXPECT_EQ(SumSamples(text(), "psflow_worker_gpu_memory_total_bytes"), 85899345920.0);

    std::ofstream(lost) << "";
    EXPECT_TRUE(await(false)) << text();
    EXPECT_FALSE(absl::StrContains(text(), "psflow_worker_gpu_memory_total_bytes{")) << text();
  }  // the sampler stopped: the environment is the test's again
  std::remove(lost.c_str());
  unsetenv("FAKE_NVML_GPU_LOST");
  unsetenv("FAKE_NVML_UTILIZATION");
}

}  // namespace
}  // namespace psflow
