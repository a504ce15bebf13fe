#include "worker/backend/cpu/gemm.h"

#include <cstdint>

namespace psflow::cpu {
namespace {

// Below ~4 MFLOP (~60 us on one core) a product runs on one thread: waking another costs tens
// of microseconds.
constexpr int64_t kMinFlopsToSplit = int64_t{4} << 20;
// Blocks no thinner than this many rows or columns: sgemm kernels work in tiles of 8-16.
constexpr int64_t kMinBlock = 16;

}  // namespace

void Gemm(ThreadPool* pool, blas::Op op_a, blas::Op op_b, int m, int n, int k, float alpha,
          const float* a, int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  const int64_t flops = int64_t{2} * m * n * k;
  if (pool == nullptr || pool->threads() == 1 || flops < kMinFlopsToSplit) {
    blas::Gemm(op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (m >= n) {
    // Rows [begin, end) of C: rows of op(A), which are rows of A or columns of A^T.
    pool->For(m, kMinBlock, [&](int64_t begin, int64_t end) {
      const float* a_block = op_a == blas::kNoTrans ? a + begin * lda : a + begin;
      blas::Gemm(op_a, op_b, static_cast<int>(end - begin), n, k, alpha, a_block, lda, b, ldb, beta,
                 c + begin * ldc, ldc);
    });
    return;
  }
  // Columns [begin, end) of C: columns of op(B), which are columns of B or rows of B^T.
  pool->For(n, kMinBlock, [&](int64_t begin, int64_t end) {
    const float* b_block = op_b == blas::kNoTrans ? b + begin : b + begin * ldb;
    blas::Gemm(op_a, op_b, m, static_cast<int>(end - begin), k, alpha, a, lda, b_block, ldb, beta,
               c + begin, ldc);
  });
}

}  // namespace psflow::cpu
