// The psflow-worker of this build carries the GPU code its configuration promises (docs/gpu.md):
// with psflow's default CMAKE_CUDA_ARCHITECTURES, sm_80 and sm_90 machine code and PTX for newer
// GPUs in every fatbin (one per .cu file); with the user's choice, what they chose.
// $PSFLOW_WORKER_BINARY checks another psflow-worker instead (an older build, an image's).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/gpu_code/cuda_fatbin.h"

namespace psflow::testing {
namespace {

using ::testing::Contains;
using ::testing::Ge;
using ::testing::IsSupersetOf;

// CMAKE_CUDA_ARCHITECTURES with ',' for ';' ("80-real,90-real,90-virtual"), and whether the user
// chose it rather than cmake/cuda.cmake.
constexpr char kConfigured[] = PSFLOW_CUDA_ARCHITECTURES;
constexpr bool kUsersChoice = PSFLOW_CUDA_ARCHITECTURES_USER;

std::string WorkerPath() {
  const char* path = std::getenv("PSFLOW_WORKER_BINARY");
  return path != nullptr && *path != '\0' ? path : PSFLOW_WORKER_BINARY;
}

std::set<int> Archs(const Fatbin& fatbin, GpuCode::Kind kind) {
  std::set<int> archs;
  for (const GpuCode& code : fatbin.code) {
    if (code.kind == kind) archs.insert(code.arch);
  }
  return archs;
}

std::string Holds(const Fatbin& fatbin) {
  std::vector<std::string> names;
  for (const GpuCode& code : fatbin.code) names.push_back(Describe(code));
  return absl::StrCat("the fatbin at .nv_fatbin offset ", fatbin.offset, " of ", WorkerPath(),
                      " holds ", names.empty() ? "nothing" : absl::StrJoin(names, ", "));
}

std::vector<Fatbin> ReadWorkerFatbins() {
  absl::StatusOr<std::vector<Fatbin>> fatbins = ReadFatbins(WorkerPath());
  EXPECT_TRUE(fatbins.ok()) << fatbins.status();
  if (!fatbins.ok()) return {};
  EXPECT_FALSE(fatbins->empty()) << WorkerPath() << ": an empty .nv_fatbin section";
  return *std::move(fatbins);
}

TEST(WorkerGpuCode, EveryFatbinHoldsSm80AndSm90CodeAndPtxForNewerGpus) {
  if (kUsersChoice) {
    GTEST_SKIP() << "built for CMAKE_CUDA_ARCHITECTURES=" << kConfigured
                 << ", the user's choice (EveryFatbinHoldsTheConfiguredArchitectures checks it)";
  }
  for (const Fatbin& fatbin : ReadWorkerFatbins()) {
    EXPECT_THAT(Archs(fatbin, GpuCode::Kind::kSass), IsSupersetOf({80, 90}))
        << Holds(fatbin) << "; sm_80 (A100) and sm_90 (H100/H200) machine code is missing";
    EXPECT_THAT(Archs(fatbin, GpuCode::Kind::kPtx), Contains(Ge(90)))
        << Holds(fatbin) << "; PTX of compute_90 or newer, for newer GPUs, is missing";
  }
}

TEST(WorkerGpuCode, EveryFatbinHoldsTheConfiguredArchitectures) {
  std::set<int> sass, ptx;
  for (absl::string_view item : absl::StrSplit(kConfigured, ',', absl::SkipEmpty())) {
    const bool real_only = absl::ConsumeSuffix(&item, "-real");
    const bool virtual_only = !real_only && absl::ConsumeSuffix(&item, "-virtual");
    int arch = 0;
    if (!absl::SimpleAtoi(item, &arch)) {
      GTEST_SKIP() << "CMAKE_CUDA_ARCHITECTURES=" << kConfigured << ": \"" << item
                   << "\" names no single architecture";
    }
    if (!virtual_only) sass.insert(arch);
    if (!real_only) ptx.insert(arch);
  }
  for (const Fatbin& fatbin : ReadWorkerFatbins()) {
    EXPECT_THAT(Archs(fatbin, GpuCode::Kind::kSass), IsSupersetOf(sass))
        << Holds(fatbin) << "; built for CMAKE_CUDA_ARCHITECTURES=" << kConfigured;
    EXPECT_THAT(Archs(fatbin, GpuCode::Kind::kPtx), IsSupersetOf(ptx))
        << Holds(fatbin) << "; built for CMAKE_CUDA_ARCHITECTURES=" << kConfigured;
  }
}

}  // namespace
}  // namespace psflow::testing
