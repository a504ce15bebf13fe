// Happens-before edges that ThreadSanitizer cannot see, made visible.
//
// Debian builds gRPC without TSan: when our code hands an object to gRPC on one thread and gRPC
// gives it back on another (a call's state passed to UnaryCall and seen again in its completion
// callback), the ordering is made by libgrpc's uninstrumented locks and atomics, so TSan would
// report our own, correctly ordered, accesses on either side as a race. TsanRelease(p) before the
// hand-off and TsanAcquire(p) where it comes back tell TSan what libgrpc guarantees. Use them only
// where such a guarantee exists (say which in a comment); they compile to nothing outside TSan
// builds.
#ifndef PSFLOW_CORE_TSAN_ANNOTATIONS_H_
#define PSFLOW_CORE_TSAN_ANNOTATIONS_H_

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace psflow {

inline void TsanRelease([[maybe_unused]] const void* sync) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(sync));
#endif
}

inline void TsanAcquire([[maybe_unused]] const void* sync) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(sync));
#endif
}

}  // namespace psflow

#endif  // PSFLOW_CORE_TSAN_ANNOTATIONS_H_
