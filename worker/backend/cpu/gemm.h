// Matrix products split over the CPU backend's thread pool: OpenBLAS runs single-threaded in
// each range (blas.h), so the backend has one set of threads for its products and
// its own loops. OpenBLAS's own pool would add a second set whose threads spin between calls
// and take the cores the pool's threads wake up on (mnist_cnn on 2 threads ran no faster than
// on 1 with both pools).
#ifndef PSFLOW_WORKER_BACKEND_CPU_GEMM_H_
#define PSFLOW_WORKER_BACKEND_CPU_GEMM_H_

#include "worker/backend/cpu/blas.h"
#include "worker/backend/cpu/thread_pool.h"

namespace psflow::cpu {

// blas::Gemm's C = alpha * op(A) * op(B) + beta * C (row-major), with C's rows (or, when it has
// more columns than rows, its columns) split into one block per thread of `pool`; one call on
// this thread when pool is null or the product is too small to be worth a wake-up. Every
// element of C is computed by one single-threaded sgemm over all of k either way.
void Gemm(ThreadPool* pool, blas::Op op_a, blas::Op op_b, int m, int n, int k, float alpha,
          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_GEMM_H_
