// 2-D convolution on a GPU (tf.nn.conv2d, NHWC), as the CPU layer (worker/backend/cpu/conv2d.h):
// parameters `<name>/kernel` [k, k, c_in, filters] (TensorFlow's HWIO) and `<name>/bias`
// [filters], same initialisers; y = conv(x, kernel) + bias; Backward adds dW and db and writes dx.
//
// cuDNN's descriptor API (NHWC tensors) does the three convolutions. cuDNN has no HWIO filter
// format, so Forward transposes the kernel into a device copy in cuDNN's NHWC filter format
// (KRSC = [filters, k, k, c_in]) every call (the parameters change every step), Backward's data
// gradient reads that copy (Backward follows the Forward of its batch), and the filter gradient
// is computed into a KRSC scratch and transpose-added into the HWIO gradient. Bias and its
// gradient are psflow's kernels (the bias gradient deterministic).
//
// Padding: cuDNN pads symmetrically. TensorFlow's SAME puts the odd one of an odd total after
// (bottom/right); then the layer copies x into a scratch with one zero row/column appended
// (and cuDNN pads pad_before on both sides, whose surplus after never reaches a window), and
// crops the data gradient back out of it. Symmetric padding and VALID use x directly.
//
// Algorithms: cudnnGet*Algorithm_v7 heuristics, per direction, for each batch size: the first
// (fastest expected) deterministic one that fits the workspace, else the first that fits.
// Build plans max_batch (workspace up to kMaxWorkspaceBytes, reserved with
// Context::ReserveWorkspace); a smaller batch size gets its plan on first use, within the
// workspace already reserved, then kept: a first call with a new batch size allocates host
// memory (descriptors, a map entry); steady-state calls allocate nothing and never wait for the
// GPU. Math: CUDNN_FMA_MATH (exact fp32) unless Context::allow_tensor_ops(), then the
// algorithm's, as offered for Context::cudnn_math() (fp16: may convert fp32 to fp16).
#ifndef PSFLOW_WORKER_BACKEND_CUDA_CONV2D_H_
#define PSFLOW_WORKER_BACKEND_CUDA_CONV2D_H_

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "worker/backend/cuda/context.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cuda {

class Conv2D final : public nn::Layer {
 public:
  // The most workspace Build lets a max_batch algorithm ask for.
  static constexpr size_t kMaxWorkspaceBytes = size_t{256} << 20;

  Conv2D(Context& ctx, const nn::Conv2DSpec& spec, std::string name);
  ~Conv2D() override;

  // INVALID_ARGUMENT unless input is [height, width, channels] (each >= 1), filters,
  // kernel_size and stride are >= 1, a kValid kernel fits, and tensors fit cuDNN's int sizes;
  // INTERNAL when cuDNN offers no algorithm; RESOURCE_EXHAUSTED when the GPU is out of memory.
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

 private:
  struct Descriptors;  // cuDNN's filter and convolution descriptors (conv2d.cc)
  struct Plan;         // tensor descriptors and algorithms for one batch size (conv2d.cc)

  // Descriptors and algorithms for `rows` rows, each algorithm within workspace_limit bytes.
  absl::StatusOr<std::unique_ptr<Plan>> MakePlan(int64_t rows, size_t workspace_limit);
  // The plan for `rows` rows, made on first use; null (the failure reported) when none can be.
  const Plan* PlanFor(int64_t rows);
  // Sets the convolution descriptor's math type for an algorithm offered with `math`
  // (CUDNN_FMA_MATH whatever `math` when TF32 is not allowed).
  cudnnStatus_t SetMath(cudnnMathType_t math);
  // The input cuDNN sees: x itself, or x copied with the extra row/column (Forward only).
  const float* CudnnInput(const nn::Matrix& x);

  Context& ctx_;
  nn::Conv2DSpec spec_;
  std::string where_;
  int64_t max_batch_ = 0;
  int64_t in_h_ = 0, in_w_ = 0, in_c_ = 0;
  int64_t out_h_ = 0, out_w_ = 0;
  int64_t pad_top_ = 0, pad_left_ = 0;  // TensorFlow's padding before: cuDNN's on both sides
  int extra_h_ = 0, extra_w_ = 0;       // 1 where TensorFlow pads one more after
  int64_t patch_ = 0;                   // k * k * c_in
  nn::ParameterSet::Handle kernel_ = -1;
  nn::ParameterSet::Handle bias_ = -1;
  std::unique_ptr<Descriptors> desc_;
  std::map<int64_t, std::unique_ptr<Plan>> plans_;  // by batch size
  DeviceArray<float> filter_;                       // the kernel in KRSC, from the last Forward
  DeviceArray<float> filter_grad_;                  // KRSC scratch for the filter gradient
  DeviceArray<float> bias_partials_;                // scratch of the deterministic bias gradient
  DeviceArray<float> padded_;  // [max_batch, h + extra_h, w + extra_w, c_in], if asymmetric
};

}  // namespace psflow::cuda

#endif  // PSFLOW_WORKER_BACKEND_CUDA_CONV2D_H_
