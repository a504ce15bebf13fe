// The arithmetic a backend's products (matrix multiplies, convolutions, RNN cells) run in. Storage
// is fp32 in every mode: parameters, gradients and activations stay fp32 on the device and the
// host, and the ps keeps fp32 master weights. Only the inputs of the products are rounded:
//   kFp32  exact fp32 (the CPU reference's results to ~1e-6);
//   kTf32  TF32 tensor cores (10-bit mantissa inputs, fp32 accumulation; ~1e-3 relative error);
//   kBf16  bf16 tensor cores for matrix products (8-bit mantissa, fp32's range, fp32
//          accumulation); convolutions and cuDNN's RNN in TF32 (cuDNN's legacy API converts fp32
//          only to fp16);
//   kFp16  fp16 tensor cores for matrix products, convolutions and cuDNN's RNN (11-bit mantissa,
//          range 6e-8..65504, fp32 accumulation): small gradients underflow unless the loss is
//          scaled (LossScaler).
// The CPU backend computes in fp32 only.
#ifndef PSFLOW_WORKER_NN_PRECISION_H_
#define PSFLOW_WORKER_NN_PRECISION_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::nn {

enum class Precision { kFp32, kTf32, kBf16, kFp16 };

// "fp32", "tf32", "bf16", "fp16".
absl::string_view PrecisionName(Precision p);
// The inverse of PrecisionName; INVALID_ARGUMENT ("must be fp32, ...": the caller names the flag)
// otherwise.
absl::StatusOr<Precision> ParsePrecision(absl::string_view name);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_PRECISION_H_
