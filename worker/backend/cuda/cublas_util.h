// Row-major matrix products on cuBLAS, which is column-major.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_CUBLAS_UTIL_H_
#define PSFLOW_WORKER_BACKEND_CUDA_CUBLAS_UTIL_H_

#include <cublas_v2.h>

namespace psflow::cuda {

// Row-major C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C. In column-major a row-major
// matrix reads as its transpose, so this computes C^T = op(B)^T op(A)^T with the operands
// swapped. lda/ldb/ldc are row-major leading dimensions (elements per row as stored). All
// matrices are fp32; `compute` (Context::gemm_compute) says what the products' inputs are rounded
// to (exact fp32, TF32, bf16, fp16); accumulation is fp32 in every case.
inline cublasStatus_t RowMajorGemm(cublasHandle_t handle, cublasComputeType_t compute, bool trans_a,
                                   bool trans_b, int m, int n, int k, float alpha, const float* a,
                                   int lda, const float* b, int ldb, float beta, float* c,
                                   int ldc) {
  return cublasGemmEx(handle, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                      trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b, CUDA_R_32F, ldb, a,
                      CUDA_R_32F, lda, &beta, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT);
}

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_CUBLAS_UTIL_H_
