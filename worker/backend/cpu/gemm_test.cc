#include "worker/backend/cpu/gemm.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace psflow::cpu {
namespace {

// Every transposition, C taller than wide and wider than tall, large enough to be split, with
// leading dimensions wider than the matrices: the split product equals the one-call product.
TEST(Gemm, SplitOverThePoolEqualsOneCall) {
  ASSERT_TRUE(blas::LoadForThisCpu().ok());
  ThreadPool pool(3);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  struct Shape {
    int m, n, k;
  };
  for (Shape s : {Shape{301, 67, 150}, Shape{37, 509, 160}}) {
    for (blas::Op op_a : {blas::kNoTrans, blas::kTrans}) {
      for (blas::Op op_b : {blas::kNoTrans, blas::kTrans}) {
        SCOPED_TRACE(testing::Message()
                     << s.m << "x" << s.n << "x" << s.k << " op_a " << op_a << " op_b " << op_b);
        // Stored shapes: A is m x k (k x m transposed), B is k x n (n x k transposed); +3 pads.
        const int lda = (op_a == blas::kNoTrans ? s.k : s.m) + 3;
        const int ldb = (op_b == blas::kNoTrans ? s.n : s.k) + 3;
        const int ldc = s.n + 3;
        std::vector<float> a(static_cast<size_t>((op_a == blas::kNoTrans ? s.m : s.k) * lda));
        std::vector<float> b(static_cast<size_t>((op_b == blas::kNoTrans ? s.k : s.n) * ldb));
        std::vector<float> c(static_cast<size_t>(s.m * ldc));
        for (auto* v : {&a, &b, &c}) {
          for (float& x : *v) x = uniform(rng);
        }
        std::vector<float> one_call = c, split = c;
        Gemm(nullptr, op_a, op_b, s.m, s.n, s.k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f,
             one_call.data(), ldc);
        Gemm(&pool, op_a, op_b, s.m, s.n, s.k, 0.5f, a.data(), lda, b.data(), ldb, 2.0f,
             split.data(), ldc);
        for (size_t i = 0; i < c.size(); ++i) {
          ASSERT_NEAR(split[i], one_call[i], 1e-4f) << "element " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace psflow::cpu
