// Flush-to-zero for the current thread's floating point, for the duration of a scope.
//
// A value that decays geometrically (Adam's first moment, a momentum accumulator once a parameter's
// gradient stops, an activation's gradient through saturated units) eventually reaches the
// denormal range below 1.2e-38, where x86 CPUs take a microcode assist per operation: every update
// touching such values runs several times slower (bench_optimizer measures it). TensorFlow's CPU
// kernels run with denormals flushed for the same reason. Inside the scope, denormal results are
// written as zero (FTZ) and denormal inputs read as zero (DAZ) on x86-64; on AArch64 FPCR.FZ does
// both. Elsewhere the scope does nothing. The caller's mode is restored on exit, so the scope nests
// and leaves other code's arithmetic as it was.
#ifndef PSFLOW_CORE_FLUSH_DENORMALS_H_
#define PSFLOW_CORE_FLUSH_DENORMALS_H_

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace psflow {

class ScopedFlushDenormals {
 public:
  ScopedFlushDenormals() {
#if defined(__x86_64__) || defined(_M_X64)
    saved_ = _mm_getcsr();
    constexpr uint32_t kFlushToZero = 0x8000, kDenormalsAreZero = 0x0040;
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ __volatile__("mrs %0, fpcr" : "=r"(fpcr));
    saved_ = fpcr;
    constexpr uint64_t kFlushToZero = uint64_t{1} << 24;
    __asm__ __volatile__("msr fpcr, %0" : : "r"(fpcr | kFlushToZero));
#endif
  }
  ~ScopedFlushDenormals() {
#if defined(__x86_64__) || defined(_M_X64)
    _mm_setcsr(static_cast<uint32_t>(saved_));
#elif defined(__aarch64__)
    __asm__ __volatile__("msr fpcr, %0" : : "r"(saved_));
#endif
  }
  ScopedFlushDenormals(const ScopedFlushDenormals&) = delete;
  ScopedFlushDenormals& operator=(const ScopedFlushDenormals&) = delete;

 private:
  [[maybe_unused]] uint64_t saved_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_FLUSH_DENORMALS_H_
