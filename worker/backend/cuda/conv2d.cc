#include "worker/backend/cuda/conv2d.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "worker/backend/cuda/cnn_kernels.h"
#include "worker/nn/layer_build.h"

namespace psflow::cuda {
namespace {

absl::Status CudnnOk(cudnnStatus_t s, absl::string_view where) {
  return s == CUDNN_STATUS_SUCCESS ? absl::OkStatus() : CudnnError(s, where);
}

// One direction's algorithm: its id (the direction's enum), the math type it was offered with,
// and the workspace it needs.
struct Algo {
  int id = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  size_t bytes = 0;
};

// The first (fastest expected) deterministic algorithm that runs within `limit` bytes of
// workspace, else the first that does; `exact`: none offered only with tensor-op math.
// workspace(perf, &bytes) asks cuDNN what it needs (the heuristics' own estimate is not always
// the size the call checks).
template <class Perf, class Workspace>
std::optional<Algo> Choose(const Perf* results, int count, size_t limit, bool exact,
                           Workspace workspace) {
  std::optional<Algo> fitting;
  for (int i = 0; i < count; ++i) {
    const Perf& p = results[i];
    if (p.status != CUDNN_STATUS_SUCCESS) continue;
    if (exact && (p.mathType == CUDNN_TENSOR_OP_MATH ||
                  p.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) {
      continue;
    }
    size_t bytes = 0;
    if (!workspace(p, &bytes)) continue;
    bytes = std::max(bytes, p.memory);
    if (bytes > limit) continue;
    const Algo a{static_cast<int>(p.algo), p.mathType, bytes};
    if (p.determinism == CUDNN_DETERMINISTIC) return a;
    if (!fitting) fitting = a;
  }
  return fitting;
}

}  // namespace

struct Conv2D::Descriptors {
  ~Descriptors() {
    if (filter != nullptr) cudnnDestroyFilterDescriptor(filter);
    if (conv != nullptr) cudnnDestroyConvolutionDescriptor(conv);
  }
  cudnnFilterDescriptor_t filter = nullptr;  // KRSC: [filters, k, k, c_in]
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;  // what conv is set to
};

struct Conv2D::Plan {
  ~Plan() {
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
  }
  cudnnTensorDescriptor_t x = nullptr;  // the input cuDNN sees (with the extra row/column)
  cudnnTensorDescriptor_t y = nullptr;
  Algo forward, backward_data, backward_filter;
};

Conv2D::Conv2D(Context& ctx, const nn::Conv2DSpec& spec, std::string name)
    : Layer(std::move(name)), ctx_(ctx), spec_(spec) {}

Conv2D::~Conv2D() = default;

absl::StatusOr<nn::Shape> Conv2D::Build(const nn::Shape& input, const nn::BuildContext& ctx) {
  absl::StatusOr<nn::Conv2DBuild> b = nn::BuildConv2D(spec_, name(), input, ctx);
  if (!b.ok()) return b.status();
  const int k = spec_.kernel_size, s = spec_.stride, f = spec_.filters;
  const nn::Window2D& w = b->window;
  in_h_ = w.in_h;
  in_w_ = w.in_w;
  in_c_ = w.channels;
  out_h_ = w.out_h;
  out_w_ = w.out_w;
  pad_top_ = w.pad_top;
  pad_left_ = w.pad_left;
  kernel_ = b->kernel;
  bias_ = b->bias;
  // SAME's total is pad_before * 2 plus 0 or 1 (the odd one after); VALID pads nothing.
  const auto extra = [&](int64_t in, int64_t out, int64_t before) {
    if (spec_.padding == nn::Padding::kValid) return 0;
    return static_cast<int>(std::max<int64_t>((out - 1) * s + k - in, 0) - 2 * before);
  };
  extra_h_ = extra(in_h_, out_h_, pad_top_);
  extra_w_ = extra(in_w_, out_w_, pad_left_);
  max_batch_ = std::max<int64_t>(ctx.max_batch, 1);
  patch_ = b->patch;
  where_ = absl::StrCat(name(), " [batch<=", max_batch_, ", ", in_h_, ", ", in_w_, ", ", in_c_,
                        "] -> [", out_h_, ", ", out_w_, ", ", f, "]");
  constexpr int64_t kIntMax = std::numeric_limits<int>::max();
  if (max_batch_ * (in_h_ + extra_h_) * (in_w_ + extra_w_) * in_c_ > kIntMax ||
      max_batch_ * out_h_ * out_w_ * f > kIntMax || patch_ * f > kIntMax) {
    return absl::InvalidArgumentError(
        absl::StrCat(where_, ": tensors too large for cuDNN's 32-bit sizes"));
  }

  desc_ = std::make_unique<Descriptors>();
  absl::Status st = CudnnOk(cudnnCreateFilterDescriptor(&desc_->filter), where_);
  if (st.ok()) {
    st = CudnnOk(cudnnSetFilter4dDescriptor(desc_->filter, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, f,
                                            static_cast<int>(in_c_), k, k),
                 where_);
  }
  if (st.ok()) st = CudnnOk(cudnnCreateConvolutionDescriptor(&desc_->conv), where_);
  if (st.ok()) {
    st = CudnnOk(cudnnSetConvolution2dDescriptor(desc_->conv, static_cast<int>(pad_top_),
                                                 static_cast<int>(pad_left_), s, s, 1, 1,
                                                 CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                 where_);
  }
  if (st.ok()) st = CudnnOk(cudnnSetConvolutionMathType(desc_->conv, desc_->math), where_);
  if (!st.ok()) return st;

  // The max_batch plan, and the workspace it needs; where that cannot be had, one within the
  // workspace other layers already reserved.
  auto plan = MakePlan(max_batch_, kMaxWorkspaceBytes);
  if (!plan.ok()) return plan.status();
  const size_t bytes = std::max(
      {(*plan)->forward.bytes, (*plan)->backward_data.bytes, (*plan)->backward_filter.bytes});
  if (absl::Status r = ctx_.ReserveWorkspace(bytes, where_); !r.ok()) {
    if (!absl::IsResourceExhausted(r)) return r;
    plan = MakePlan(max_batch_, ctx_.workspace_bytes());
    if (!plan.ok()) return plan.status();
  }
  plans_.clear();
  plans_.emplace(max_batch_, *std::move(plan));

  for (auto [array, count, what] :
       {std::tuple{&filter_, patch_ * f, "the kernel in cuDNN's layout"},
        std::tuple{&filter_grad_, patch_ * f, "the kernel gradient in cuDNN's layout"},
        std::tuple{&bias_partials_, BiasGradPartialFloats(f), "bias gradient partial sums"}}) {
    auto a = ctx_.Allocate<float>(count, absl::StrCat(where_, ": ", what));
    if (!a.ok()) return a.status();
    *array = *std::move(a);
  }
  if (extra_h_ != 0 || extra_w_ != 0) {
    auto a = ctx_.Allocate<float>(max_batch_ * (in_h_ + extra_h_) * (in_w_ + extra_w_) * in_c_,
                                  absl::StrCat(where_, ": the input padded after"));
    if (!a.ok()) return a.status();
    padded_ = *std::move(a);
  }
  return b->out;
}

absl::StatusOr<std::unique_ptr<Conv2D::Plan>> Conv2D::MakePlan(int64_t rows,
                                                               size_t workspace_limit) {
  auto plan = std::make_unique<Plan>();
  const int n = static_cast<int>(rows), f = spec_.filters;
  cudnnHandle_t handle = ctx_.cudnn();
  absl::Status st = CudnnOk(cudnnCreateTensorDescriptor(&plan->x), where_);
  if (st.ok()) st = CudnnOk(cudnnCreateTensorDescriptor(&plan->y), where_);
  if (st.ok()) {
    st = CudnnOk(cudnnSetTensor4dDescriptor(
                     plan->x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, static_cast<int>(in_c_),
                     static_cast<int>(in_h_ + extra_h_), static_cast<int>(in_w_ + extra_w_)),
                 where_);
  }
  if (st.ok()) {
    st = CudnnOk(cudnnSetTensor4dDescriptor(plan->y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, n, f,
                                            static_cast<int>(out_h_), static_cast<int>(out_w_)),
                 where_);
  }
  // cuDNN's output shape must be TensorFlow's: the padding arithmetic, checked.
  int on = 0, oc = 0, oh = 0, ow = 0;
  if (st.ok()) {
    st = CudnnOk(cudnnGetConvolution2dForwardOutputDim(desc_->conv, plan->x, desc_->filter, &on,
                                                       &oc, &oh, &ow),
                 where_);
  }
  if (!st.ok()) return st;
  if (on != n || oc != f || oh != out_h_ || ow != out_w_) {
    return absl::InternalError(absl::StrCat(where_, ": cuDNN computes an output of [", on, ", ", oh,
                                            ", ", ow, ", ", oc, "] for ", n, " rows"));
  }

  // Offered with the precision's math type (the descriptor's), each run with its own.
  if (st = CudnnOk(SetMath(ctx_.cudnn_math()), where_); !st.ok()) return st;
  const auto none = [&](const char* direction) {
    return absl::InternalError(absl::StrCat(where_, ": cuDNN offers no ", direction,
                                            " algorithm for ", n, " rows within ", workspace_limit,
                                            " bytes of workspace"));
  };
  const bool exact = !ctx_.allow_tensor_ops();
  int count = 0;
  {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    st = CudnnOk(
        cudnnGetConvolutionForwardAlgorithm_v7(handle, plan->x, desc_->filter, desc_->conv, plan->y,
                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &count, perf),
        where_);
    if (!st.ok()) return st;
    auto a = Choose(perf, count, workspace_limit, exact, [&](const auto& p, size_t* bytes) {
      return SetMath(p.mathType) == CUDNN_STATUS_SUCCESS &&
             cudnnGetConvolutionForwardWorkspaceSize(handle, plan->x, desc_->filter, desc_->conv,
                                                     plan->y, p.algo,
                                                     bytes) == CUDNN_STATUS_SUCCESS;
    });
    if (!a) return none("forward");
    plan->forward = *a;
  }
  if (st = CudnnOk(SetMath(ctx_.cudnn_math()), where_); !st.ok()) return st;
  {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    st = CudnnOk(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                     handle, desc_->filter, plan->y, desc_->conv, plan->x,
                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &count, perf),
                 where_);
    if (!st.ok()) return st;
    auto a = Choose(perf, count, workspace_limit, exact, [&](const auto& p, size_t* bytes) {
      return SetMath(p.mathType) == CUDNN_STATUS_SUCCESS &&
             cudnnGetConvolutionBackwardDataWorkspaceSize(handle, desc_->filter, plan->y,
                                                          desc_->conv, plan->x, p.algo,
                                                          bytes) == CUDNN_STATUS_SUCCESS;
    });
    if (!a) return none("backward data");
    plan->backward_data = *a;
  }
  if (st = CudnnOk(SetMath(ctx_.cudnn_math()), where_); !st.ok()) return st;
  {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    st = CudnnOk(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                     handle, plan->x, plan->y, desc_->conv, desc_->filter,
                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &count, perf),
                 where_);
    if (!st.ok()) return st;
    auto a = Choose(perf, count, workspace_limit, exact, [&](const auto& p, size_t* bytes) {
      return SetMath(p.mathType) == CUDNN_STATUS_SUCCESS &&
             cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, plan->x, plan->y, desc_->conv,
                                                            desc_->filter, p.algo,
                                                            bytes) == CUDNN_STATUS_SUCCESS;
    });
    if (!a) return none("backward filter");
    plan->backward_filter = *a;
  }
  return plan;
}

cudnnStatus_t Conv2D::SetMath(cudnnMathType_t math) {
  // Exact fp32 unless the precision allows tensor ops: then what the algorithm was offered with.
  const cudnnMathType_t m = ctx_.allow_tensor_ops() ? math : CUDNN_FMA_MATH;
  if (m == desc_->math) return CUDNN_STATUS_SUCCESS;
  const cudnnStatus_t s = cudnnSetConvolutionMathType(desc_->conv, m);
  if (s == CUDNN_STATUS_SUCCESS) desc_->math = m;
  return s;
}

const Conv2D::Plan* Conv2D::PlanFor(int64_t rows) {
  if (auto it = plans_.find(rows); it != plans_.end()) return it->second.get();
  if (rows > max_batch_) {
    ctx_.Fail(absl::InvalidArgumentError(absl::StrCat(where_, ": called with ", rows, " rows")));
    return nullptr;
  }
  // First use of this batch size: within the workspace reserved at Build.
  auto plan = MakePlan(rows, ctx_.workspace_bytes());
  if (!plan.ok()) {
    ctx_.Fail(plan.status());
    return nullptr;
  }
  return plans_.emplace(rows, *std::move(plan)).first->second.get();
}

const float* Conv2D::CudnnInput(const nn::Matrix& x) {
  if (padded_ == nullptr) return x.data;
  LaunchPadAfter(x.data, x.rows, in_h_, in_w_, in_c_, extra_h_, extra_w_, padded_.get(),
                 ctx_.stream());
  ctx_.CheckLaunch(where_);
  return padded_.get();
}

void Conv2D::Forward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& y) {
  if (x.rows == 0) return;
  const Plan* plan = PlanFor(x.rows);
  if (plan == nullptr) return;
  const float* kernel = ctx.params->device_value(kernel_).data();
  const float* bias = ctx.params->device_value(bias_).data();
  LaunchHwioToKrsc(kernel, patch_, spec_.filters, filter_.get(), ctx_.stream());
  ctx_.CheckLaunch(where_);
  const float* in = CudnnInput(x);
  const float one = 1.0f, zero = 0.0f;
  ctx_.Check(SetMath(plan->forward.math), where_);
  ctx_.Check(
      cudnnConvolutionForward(ctx_.cudnn(), &one, plan->x, in, desc_->filter, filter_.get(),
                              desc_->conv, static_cast<cudnnConvolutionFwdAlgo_t>(plan->forward.id),
                              ctx_.workspace(), ctx_.workspace_bytes(), &zero, plan->y, y.data),
      where_);
  LaunchAddBias(bias, x.rows * out_h_ * out_w_, spec_.filters, y.data, ctx_.stream());
  ctx_.CheckLaunch(where_);
}

void Conv2D::Backward(const nn::RunContext& ctx, const nn::Matrix& x, const nn::Matrix& /*y*/,
                      const nn::Matrix& dy, const nn::Matrix* dx) {
  if (x.rows == 0) return;
  const Plan* plan = PlanFor(x.rows);
  if (plan == nullptr) return;
  float* kernel_grad = ctx.params->device_grad(kernel_).data();
  float* bias_grad = ctx.params->device_grad(bias_).data();
  const float one = 1.0f, zero = 0.0f;
  LaunchBiasGrad(dy.data, x.rows * out_h_ * out_w_, spec_.filters, bias_partials_.get(), bias_grad,
                 ctx_.stream());
  ctx_.CheckLaunch(where_);

  // The filter gradient first: it reads the padded input Forward left in padded_, which the
  // data gradient then overwrites.
  const float* in = padded_ != nullptr ? padded_.get() : x.data;
  ctx_.Check(SetMath(plan->backward_filter.math), where_);
  ctx_.Check(
      cudnnConvolutionBackwardFilter(
          ctx_.cudnn(), &one, plan->x, in, plan->y, dy.data, desc_->conv,
          static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->backward_filter.id), ctx_.workspace(),
          ctx_.workspace_bytes(), &zero, desc_->filter, filter_grad_.get()),
      where_);
  LaunchAddKrscToHwio(filter_grad_.get(), patch_, spec_.filters, kernel_grad, ctx_.stream());
  ctx_.CheckLaunch(where_);

  if (dx == nullptr) return;
  float* out = padded_ != nullptr ? padded_.get() : dx->data;
  ctx_.Check(SetMath(plan->backward_data.math), where_);
  ctx_.Check(cudnnConvolutionBackwardData(
                 ctx_.cudnn(), &one, desc_->filter, filter_.get(), plan->y, dy.data, desc_->conv,
                 static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->backward_data.id),
                 ctx_.workspace(), ctx_.workspace_bytes(), &zero, plan->x, out),
             where_);
  if (padded_ != nullptr) {
    LaunchCropAfter(padded_.get(), x.rows, in_h_, in_w_, in_c_, extra_h_, extra_w_, dx->data,
                    ctx_.stream());
    ctx_.CheckLaunch(where_);
  }
}

}  // namespace psflow::cuda
