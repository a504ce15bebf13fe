// 2-D convolution on the CPU (tf.nn.conv2d, NHWC). The patches of a chunk of examples are laid out
// as rows (im2col, [examples * out_h * out_w, k * k * c_in]) and multiplied by the kernel, whose
// TensorFlow layout [k, k, c_in, filters] is a row-major [k * k * c_in, filters] matrix, in one
// OpenBLAS sgemm. Backward: dW += patches^T * dy, db += column sums of dy, and dx = col2im(dy *
// W^T), scattering each patch row's gradient back onto the input positions it was read from.
#ifndef PSFLOW_WORKER_BACKEND_CPU_CONV2D_H_
#define PSFLOW_WORKER_BACKEND_CPU_CONV2D_H_

#include <vector>

#include "worker/backend/cpu/thread_pool.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"

namespace psflow::cpu {

class Conv2D final : public nn::Layer {
 public:
  // A patch matrix of 4 MB: sgemms of a few thousand rows, and patches still in cache when the
  // sgemm reads them. On the MNIST and CIFAR-10 convolutions 4 MB ran 5-10% faster than 8-16 MB.
  static constexpr int64_t kDefaultWorkspaceFloats = int64_t{1} << 20;

  // workspace_floats bounds the patch matrix: Build fits as many examples per sgemm as it holds
  // (at least one, at most max_batch). Tests pass a small value to exercise chunking.
  // im2col and col2im split a chunk's examples over `pool` (null: this thread).
  Conv2D(const nn::Conv2DSpec& spec, std::string name, ThreadPool* pool = nullptr,
         int64_t workspace_floats = kDefaultWorkspaceFloats)
      : Layer(std::move(name)), spec_(spec), pool_(pool), workspace_floats_(workspace_floats) {}

  // INVALID_ARGUMENT unless input is [height, width, channels] (each >= 1), filters, kernel_size
  // and stride are >= 1, and a kValid kernel fits in the input.
  absl::StatusOr<nn::Shape> Build(const nn::Shape& input, const nn::BuildContext& ctx) override;
  void Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) override;
  void Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y,
                const nn::Matrix& dy, const nn::Matrix* dx) override;

  // Examples per sgemm, fixed by Build.
  int64_t examples_per_chunk() const { return chunk_; }

 private:
  // Writes the patch rows of n examples starting at x into col_.
  void Im2Col(const float* x, int64_t n);
  // Sets n examples of dx starting at dx to the sum of the patch-row gradients in col_.
  void Col2Im(int64_t n, float* dx);
  // One example: its patch rows from its image, and its image's gradient from theirs.
  void Im2ColExample(const float* xe, float* rows) const;
  void Col2ImExample(const float* rows, float* dxe) const;
  // visit(at, in, lo, hi) for each kernel row of each patch of one example, in patch order: `at`
  // is where it starts in the example's patch rows (kernel_size * c_in floats), [lo, hi) the
  // part of it inside the image, which starts at `in` in the example's input; in is -1 when
  // nothing of the kernel row is inside (the padding above or below, or beside a narrow image).
  template <class Visit>
  void ForEachKernelRow(Visit visit) const;

  nn::Conv2DSpec spec_;
  ThreadPool* pool_;
  int64_t workspace_floats_;
  int64_t in_h_ = 0, in_w_ = 0, in_c_ = 0;
  int64_t out_h_ = 0, out_w_ = 0;
  int64_t pad_top_ = 0, pad_left_ = 0;
  int64_t patch_ = 0;  // k * k * c_in: one patch row
  int64_t chunk_ = 1;
  std::vector<float> col_;  // chunk_ * out_h_ * out_w_ patch rows
  // The first input row whose patches col_ holds (Forward's last chunk), so that Backward does
  // not lay them out again; null when col_ holds anything else.
  const float* col_source_ = nullptr;
  nn::ParameterSet::Handle kernel_ = -1;
  nn::ParameterSet::Handle bias_ = -1;
};

}  // namespace psflow::cpu

#endif  // PSFLOW_WORKER_BACKEND_CPU_CONV2D_H_
