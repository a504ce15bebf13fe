// OpenBLAS loaded with the kernels psflow chooses. Each load is once per process, so the cases
// that load run in a forked child (gtest's death-test machinery, here for exit codes and
// stderr), in a process that has not loaded OpenBLAS yet.
#include "worker/backend/cpu/blas.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace psflow::cpu::blas {
namespace {

// Loads with `core_type` ("" for this CPU's choice) in this (child) process and writes
// "<core name>|<Describe()>|<$OPENBLAS_CORETYPE after the load>" to stderr, then exits 0.
[[noreturn]] void LoadAndReport(const char* core_type) {
  const absl::Status s = core_type == nullptr ? LoadForThisCpu() : Load(core_type);
  if (!s.ok()) {
    std::fprintf(stderr, "load failed: %s\n", std::string(s.message()).c_str());
    _exit(1);
  }
  const char* left = getenv("OPENBLAS_CORETYPE");
  std::fprintf(stderr, "%s|%s|%s\n", CoreName().c_str(), Describe().c_str(),
               left == nullptr ? "(unset)" : left);
  _exit(0);
}

TEST(BlasDeathTest, LoadsTheCoreTypeItIsGiven) {
  // Haswell kernels run on any CPU with AVX2 and FMA, whatever OpenBLAS would pick itself.
  if (!DetectCpu().avx2_fma) GTEST_SKIP() << "this CPU has no AVX2+FMA";
  EXPECT_EXIT(
      {
        unsetenv("OPENBLAS_CORETYPE");
        LoadAndReport("Haswell");
      },
      testing::ExitedWithCode(0), "^Haswell\\|OpenBLAS [0-9.]+, Haswell kernels .*\\|\\(unset\\)");
}

TEST(BlasDeathTest, TheUsersOpenblasCoretypeWins) {
  EXPECT_EXIT(
      {
        setenv("OPENBLAS_CORETYPE", "Prescott", 1);
        LoadAndReport("SkylakeX");
      },
      testing::ExitedWithCode(0),
      "^Prescott\\|.*Prescott kernels \\(OPENBLAS_CORETYPE\\)\\|Prescott");
}

TEST(BlasDeathTest, ThisCpuGetsTheKernelsItsFeaturesCallFor) {
  const std::string expected = CoreTypeFor(DetectCpu());
  if (expected.empty()) GTEST_SKIP() << "no AVX2: OpenBLAS chooses for itself";
  EXPECT_EXIT(
      {
        unsetenv("OPENBLAS_CORETYPE");
        LoadAndReport(nullptr);
      },
      testing::ExitedWithCode(0), "^" + expected + "\\|.*chosen from CPUID");
}

TEST(Blas, CoreTypeForFeatures) {
  struct Row {
    CpuFeatures cpu;
    std::string core;
  } rows[] = {
      {{.amd = false, .avx2_fma = true, .avx512 = true}, "SkylakeX"},  // Sapphire Rapids
      {{.amd = true, .avx2_fma = true, .avx512 = true}, "SkylakeX"},   // Zen 4
      {{.amd = true, .avx2_fma = true, .avx512 = false}, "Zen"},       // Zen 3
      {{.amd = false, .avx2_fma = true, .avx512 = false}, "Haswell"},  // Alder Lake
      {{.amd = false, .avx2_fma = false, .avx512 = false}, ""},        // Sandy Bridge
      {{.amd = true, .avx2_fma = false, .avx512 = false}, ""},
  };
  for (const Row& r : rows) {
    EXPECT_EQ(CoreTypeFor(r.cpu), r.core) << r.cpu.amd << r.cpu.avx2_fma << r.cpu.avx512;
  }
}

TEST(Blas, DetectCpuAgreesWithProcCpuinfo) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  std::set<std::string> flags;
  std::string vendor;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("vendor_id", 0) == 0) vendor = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;) flags.insert(w);
    break;
  }
  if (flags.empty()) GTEST_SKIP() << "no flags in /proc/cpuinfo";
  const CpuFeatures cpu = DetectCpu();
  EXPECT_EQ(cpu.amd, vendor == "AuthenticAMD");
  EXPECT_EQ(cpu.avx2_fma, flags.contains("avx2") && flags.contains("fma"));
  EXPECT_EQ(cpu.avx512, cpu.avx2_fma && flags.contains("avx512f") && flags.contains("avx512bw") &&
                            flags.contains("avx512vl") && flags.contains("avx512dq") &&
                            flags.contains("avx512cd"));
}

TEST(Blas, GemmAndAxpyMatchTheDefinitions) {
  ASSERT_TRUE(LoadForThisCpu().ok());
  // A [2x3], B [3x2] row-major; op(A) op(B) for each transposition, and beta = 1 accumulating.
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8, 9, 10, 11, 12};
  std::vector<float> c = {1, 1, 1, 1};
  Gemm(kNoTrans, kNoTrans, 2, 2, 3, 1.0f, a.data(), 3, b.data(), 2, 1.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{59, 65, 140, 155}));
  // A^T [3x2] stored as A; B^T [2x3] stored as B: C = A^T * B^T is [3x3].
  std::vector<float> d(9, 0.0f);
  Gemm(kTrans, kTrans, 3, 3, 2, 2.0f, a.data(), 3, b.data(), 2, 0.0f, d.data(), 3);
  EXPECT_EQ(d, (std::vector<float>{78, 98, 118, 108, 136, 164, 138, 174, 210}));
  std::vector<float> y = {1, 2, 3};
  Axpy(3, -2.0f, a.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{-1, -2, -3}));
}

}  // namespace
}  // namespace psflow::cpu::blas
