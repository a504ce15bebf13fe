// The CPU backend's matrix products: OpenBLAS, loaded by psflow at run time with kernels chosen
// from the CPU's features.
//
// OpenBLAS picks its kernels once, when the library initialises: from $OPENBLAS_CORETYPE, else
// from its own table of CPU models. Debian 12's 0.3.21 does not know recent CPUs (a Sapphire
// Rapids Xeon gets kernels ~1.7x slower than its SkylakeX ones, issue 15), so a program linked
// against it runs at the mercy of an environment variable. psflow does not link OpenBLAS:
// Load() reads CPUID, sets the core type the features call for (CoreTypeFor) and only then
// loads the library, so every process that builds a CPU backend gets the same kernels with or
// without the variable. A user's own $OPENBLAS_CORETYPE is respected. OpenBLAS runs every product
// on its caller's thread: the backend splits products over its own pool (gemm.h), and OpenBLAS's
// spinning threads beside that pool would take the cores it wakes on.
#ifndef PSFLOW_WORKER_BACKEND_CPU_BLAS_H_
#define PSFLOW_WORKER_BACKEND_CPU_BLAS_H_

#include <string>

#include "absl/status/status.h"

namespace psflow::cpu::blas {

// What CPUID (and XGETBV: the OS saves the registers) says about the vector units.
struct CpuFeatures {
  bool amd = false;
  bool avx2_fma = false;  // AVX2 and FMA3, with the YMM state enabled by the OS
  bool avx512 = false;    // AVX-512 F, CD, BW, DQ and VL, with the ZMM state enabled by the OS
};
CpuFeatures DetectCpu();

// The OpenBLAS core type for `cpu`: "SkylakeX" with AVX-512 (its AVX-512 sgemm is also the one
// for Cooper Lake and Sapphire Rapids), "Zen" (AMD) or "Haswell" (others) with AVX2 and FMA, ""
// otherwise (OpenBLAS's own choice: an older CPU it knows).
std::string CoreTypeFor(const CpuFeatures& cpu);

// Loads OpenBLAS (once per process; later calls return the first call's result), with
// `core_type` as its core type unless $OPENBLAS_CORETYPE is set; "" leaves the choice to
// OpenBLAS. INTERNAL, naming the library and the loader's reason, if it cannot be loaded.
// Thread-safe. The functions below load it as LoadForThisCpu does when nobody has; where it
// cannot be loaded they end the process with that one line on stderr (an installation fault).
absl::Status Load(const std::string& core_type);
// Load(CoreTypeFor(DetectCpu())).
absl::Status LoadForThisCpu();

// "OpenBLAS 0.3.21, Zen kernels (chosen from CPUID: AVX2+FMA)"; "(OPENBLAS_CORETYPE)" when the
// user set it, "(loaded before psflow could choose)" in a program linked against OpenBLAS (the
// library picked its kernels at start-up).
std::string Describe();
// The kernels OpenBLAS uses ("Zen", "SkylakeX", ...), as openblas_get_corename says.
std::string CoreName();

enum Op { kNoTrans, kTrans };

// C = alpha * op(A) * op(B) + beta * C on row-major matrices (cblas_sgemm's CblasRowMajor).
void Gemm(Op op_a, Op op_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc);
// y += alpha * x, n floats.
void Axpy(int n, float alpha, const float* x, float* y);

}  // namespace psflow::cpu::blas

#endif  // PSFLOW_WORKER_BACKEND_CPU_BLAS_H_
