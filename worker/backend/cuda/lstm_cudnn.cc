// The LSTM's cuDNN path (see lstm_path.h): cuDNN 9's RNN API, one layer, unidirectional, LSTM
// cells with a single input bias, fp32 data, CUDNN_RNN_ALGO_STANDARD or _PERSIST_STATIC (the
// layer times both against the fused path and keeps the fastest that cuDNN accepts).
//
// Data: x [batch, time, in] and y [batch, time, units] are cuDNN's BATCH_MAJOR_UNPACKED layout
// as they are (every sequence has length `time`, so no padding is ever read or written).
//
// Weights: cuDNN keeps its own weight space (per gate i, f, g, o a matrix W [units, in] and R
// [units, units], row-major, and a bias [units]; located once with cudnnGetRNNWeightParams and
// checked against that documented shape). Parameters change every step, so every Forward first
// packs TensorFlow's kernel/bias into it (lstm_kernels.h: blocks transposed, j -> g, forget bias
// folded into f's bias); Backward zeroes a weight-gradient space of the same layout, lets
// cudnnRNNBackwardWeights_v8 add into it and adds that back into TensorFlow's layout.
//
// Batch sizes: descriptors per batch size, made on first use (host work only); the workspace
// (Context's shared one) and the reserve space are sized at build for max_batch, and a batch's
// needs are checked against them. The reserve space Forward writes is what Backward reads.
#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "worker/backend/cuda/context.h"
#include "worker/backend/cuda/lstm_kernels.h"
#include "worker/backend/cuda/lstm_path.h"

namespace psflow::cuda {
namespace {

struct RnnDescDelete {
  void operator()(cudnnRNNStruct* d) const { cudnnDestroyRNNDescriptor(d); }
};
struct DataDescDelete {
  void operator()(cudnnRNNDataStruct* d) const { cudnnDestroyRNNDataDescriptor(d); }
};
struct TensorDescDelete {
  void operator()(cudnnTensorStruct* d) const { cudnnDestroyTensorDescriptor(d); }
};
struct DropoutDescDelete {
  void operator()(cudnnDropoutStruct* d) const { cudnnDestroyDropoutDescriptor(d); }
};
using RnnDesc = std::unique_ptr<cudnnRNNStruct, RnnDescDelete>;
using DataDesc = std::unique_ptr<cudnnRNNDataStruct, DataDescDelete>;
using TensorDesc = std::unique_ptr<cudnnTensorStruct, TensorDescDelete>;
using DropoutDesc = std::unique_ptr<cudnnDropoutStruct, DropoutDescDelete>;

// cuDNN's gate order i, f, g, o, for messages.
constexpr const char* kCudnnGateNames[4] = {"i", "f", "g", "o"};

class CudnnLstm final : public LstmPath {
 public:
  CudnnLstm(Context& ctx, const LstmDims& dims, const LstmState& state, std::string where,
            CudnnRnnAlgo algo)
      : ctx_(ctx), dims_(dims), state_(state), where_(std::move(where)), algo_(algo) {}

  absl::Status Setup();

  const char* name() const override {
    return algo_ == CudnnRnnAlgo::kStandard ? "cudnn" : "cudnn_persistent";
  }

  void Forward(int batch, const float* x, float* y, const float* kernel,
               const float* bias) override {
    const BatchDescs* d = Descs(batch);
    if (d == nullptr) return;
    LaunchPackLstmWeights(kernel, bias, dims_.in, dims_.units, dims_.forget_bias, layout_,
                          weights_.get(), ctx_.stream());
    ctx_.CheckLaunch(where_);
    ctx_.Check(
        cudnnRNNForward(ctx_.cudnn(), rnn_.get(), CUDNN_FWD_MODE_TRAINING, seq_lengths_.get(),
                        d->x.get(), x, d->y.get(), y, d->h.get(), state_.call_h0, state_.state_h,
                        d->h.get(), state_.call_c0, state_.state_c, weight_bytes_, weights_.get(),
                        d->work_bytes, ctx_.workspace(), d->reserve_bytes, reserve_.get()),
        where_);
  }

  void Backward(int batch, const float* x, const float* y, const float* dy, float* dx,
                const float* /*kernel: packed into the weight space by Forward*/, float* d_kernel,
                float* d_bias) override {
    const BatchDescs* d = Descs(batch);
    if (d == nullptr) return;
    // cuDNN always computes dx; without a consumer it goes to scratch. No gradient arrives at
    // the final state (dhy = dcy = 0) and none leaves through the initial one (dhx, dcx are
    // dropped): truncated backpropagation, as the CPU layer.
    float* dx_out = dx != nullptr ? dx : dx_scratch_.get();
    ctx_.Check(cudnnRNNBackwardData_v8(
                   ctx_.cudnn(), rnn_.get(), seq_lengths_.get(), d->y.get(), y, dy, d->x.get(),
                   dx_out, d->h.get(), state_.call_h0, zeros_.get(), dhx_.get(), d->h.get(),
                   state_.call_c0, zeros_.get(), dcx_.get(), weight_bytes_, weights_.get(),
                   d->work_bytes, ctx_.workspace(), d->reserve_bytes, reserve_.get()),
               where_);
    // cudnnRNNBackwardWeights_v8 only adds (CUDNN_WGRAD_MODE_ADD): into a zeroed space, whose
    // contents the unpack kernel then adds to the parameters' gradients.
    ctx_.Check(cudaMemsetAsync(dweights_.get(), 0, weight_bytes_, ctx_.stream()), where_);
    ctx_.Check(cudnnRNNBackwardWeights_v8(
                   ctx_.cudnn(), rnn_.get(), CUDNN_WGRAD_MODE_ADD, seq_lengths_.get(), d->x.get(),
                   x, d->h.get(), state_.call_h0, d->y.get(), y, weight_bytes_, dweights_.get(),
                   d->work_bytes, ctx_.workspace(), d->reserve_bytes, reserve_.get()),
               where_);
    LaunchUnpackLstmGradients(dweights_.get(), layout_, dims_.in, dims_.units, d_kernel, d_bias,
                              ctx_.stream());
    ctx_.CheckLaunch(where_);
  }

 private:
  // What one batch size needs: x, y and state descriptors and its temporary space sizes.
  struct BatchDescs {
    DataDesc x, y;
    TensorDesc h;  // h and c alike: [1 layer, batch, units]
    size_t work_bytes = 0;
    size_t reserve_bytes = 0;
  };

  absl::Status ToStatus(cudnnStatus_t s, absl::string_view what) const {
    return s == CUDNN_STATUS_SUCCESS ? absl::OkStatus()
                                     : CudnnError(s, absl::StrCat(where_, ": ", what));
  }
  absl::Status AllocateFloats(DeviceArray<float>& buffer, int64_t count, absl::string_view what) {
    absl::StatusOr<DeviceArray<float>> a =
        ctx_.Allocate<float>(count, absl::StrCat(where_, ": cuDNN path's ", what));
    if (!a.ok()) return a.status();
    buffer = *std::move(a);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<BatchDescs>> MakeBatchDescs(int batch) const;
  // The batch's descriptors, made on first use; null (the error recorded) if that fails.
  const BatchDescs* Descs(int batch);
  absl::Status LocateWeights();

  Context& ctx_;
  const LstmDims dims_;
  const LstmState state_;
  const std::string where_;
  const CudnnRnnAlgo algo_;

  DropoutDesc dropout_;
  RnnDesc rnn_;
  size_t weight_bytes_ = 0;
  DeviceArray<float> weights_;   // cuDNN's weight space, packed each Forward
  DeviceArray<float> dweights_;  // its gradient, same layout
  CudnnLstmWeightLayout layout_{};
  std::vector<int32_t> host_seq_lengths_;  // max_batch times `time`
  DeviceArray<int32_t> seq_lengths_;       // the same on the device (cuDNN reads it there)
  std::vector<std::unique_ptr<BatchDescs>> by_batch_;  // index: batch size
  size_t max_work_bytes_ = 0;                          // reserved in the shared workspace
  size_t max_reserve_bytes_ = 0;
  DeviceArray<char> reserve_;
  DeviceArray<float> zeros_;       // [max_batch, units]: dhy, dcy
  DeviceArray<float> dhx_, dcx_;   // [max_batch, units]: gradients into the initial state, unused
  DeviceArray<float> dx_scratch_;  // [max_batch, time, in]: dx when the caller wants none
};

absl::Status CudnnLstm::Setup() {
  const int b = dims_.max_batch, u = dims_.units;
  cudnnHandle_t handle = ctx_.cudnn();

  // One layer: dropout (between layers) never applies; cuDNN still wants a descriptor.
  cudnnDropoutDescriptor_t dropout = nullptr;
  if (absl::Status s = ToStatus(cudnnCreateDropoutDescriptor(&dropout), "dropout descriptor");
      !s.ok()) {
    return s;
  }
  dropout_.reset(dropout);
  if (absl::Status s = ToStatus(cudnnSetDropoutDescriptor(dropout, handle, 0.0f, nullptr, 0, 0),
                                "dropout descriptor");
      !s.ok()) {
    return s;
  }
  cudnnRNNDescriptor_t rnn = nullptr;
  if (absl::Status s = ToStatus(cudnnCreateRNNDescriptor(&rnn), "RNN descriptor"); !s.ok())
    return s;
  rnn_.reset(rnn);
  // The context's precision: exact fp32, TF32 (tf32, bf16) or fp16 conversion.
  // projSize == hiddenSize: no projection. Padded I/O: required for the unpacked layouts.
  if (absl::Status s = ToStatus(
          cudnnSetRNNDescriptor_v8(rnn,
                                   algo_ == CudnnRnnAlgo::kStandard ? CUDNN_RNN_ALGO_STANDARD
                                                                    : CUDNN_RNN_ALGO_PERSIST_STATIC,
                                   CUDNN_LSTM, CUDNN_RNN_SINGLE_INP_BIAS, CUDNN_UNIDIRECTIONAL,
                                   CUDNN_LINEAR_INPUT, CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT,
                                   ctx_.cudnn_math(), dims_.in, u, u,
                                   /*numLayers=*/1, dropout, CUDNN_RNN_PADDED_IO_ENABLED),
          "cudnnSetRNNDescriptor_v8");
      !s.ok()) {
    return s;
  }

  if (absl::Status s =
          ToStatus(cudnnGetRNNWeightSpaceSize(handle, rnn, &weight_bytes_), "weight space size");
      !s.ok()) {
    return s;
  }
  if (weight_bytes_ % sizeof(float) != 0) {
    return absl::InternalError(
        absl::StrCat(where_, ": cuDNN's weight space of ", weight_bytes_, " bytes is not floats"));
  }
  const auto weight_floats = static_cast<int64_t>(weight_bytes_ / sizeof(float));
  if (absl::Status s = AllocateFloats(weights_, weight_floats, "weight space"); !s.ok()) return s;
  if (absl::Status s = AllocateFloats(dweights_, weight_floats, "weight gradient space"); !s.ok()) {
    return s;
  }
  if (absl::Status s = LocateWeights(); !s.ok()) return s;

  host_seq_lengths_.assign(static_cast<size_t>(b), dims_.time);
  absl::StatusOr<DeviceArray<int32_t>> lengths =
      ctx_.Allocate<int32_t>(b, absl::StrCat(where_, ": sequence lengths"));
  if (!lengths.ok()) return lengths.status();
  seq_lengths_ = *std::move(lengths);
  // On the compute stream: the allocation's zeroing memset is queued there, and a plain
  // cudaMemcpy (legacy stream) would not wait for it.
  if (cudaError_t e = cudaMemcpyAsync(seq_lengths_.get(), host_seq_lengths_.data(),
                                      host_seq_lengths_.size() * sizeof(int32_t),
                                      cudaMemcpyHostToDevice, ctx_.stream());
      e != cudaSuccess) {
    return CudaError(e, absl::StrCat(where_, ": sequence lengths"));
  }
  if (cudaError_t e = cudaStreamSynchronize(ctx_.stream()); e != cudaSuccess) {
    return CudaError(e, absl::StrCat(where_, ": sequence lengths"));
  }

  // The largest batch sets the temporary space every batch size shares.
  by_batch_.resize(static_cast<size_t>(b) + 1);
  absl::StatusOr<std::unique_ptr<BatchDescs>> full = MakeBatchDescs(b);
  if (!full.ok()) return full.status();
  max_work_bytes_ = (*full)->work_bytes;
  max_reserve_bytes_ = (*full)->reserve_bytes;
  by_batch_[static_cast<size_t>(b)] = *std::move(full);
  if (absl::Status s = ctx_.ReserveWorkspace(max_work_bytes_, absl::StrCat(where_, ": workspace"));
      !s.ok()) {
    return s;
  }
  absl::StatusOr<DeviceArray<char>> reserve = ctx_.Allocate<char>(
      static_cast<int64_t>(max_reserve_bytes_), absl::StrCat(where_, ": cuDNN reserve space"));
  if (!reserve.ok()) return reserve.status();
  reserve_ = *std::move(reserve);

  const int64_t state_floats = static_cast<int64_t>(b) * u;
  if (absl::Status s = AllocateFloats(zeros_, state_floats, "zero state gradients"); !s.ok()) {
    return s;
  }
  if (absl::Status s = AllocateFloats(dhx_, state_floats, "dhx"); !s.ok()) return s;
  if (absl::Status s = AllocateFloats(dcx_, state_floats, "dcx"); !s.ok()) return s;
  return AllocateFloats(dx_scratch_, static_cast<int64_t>(b) * dims_.time * dims_.in, "dx scratch");
}

absl::Status CudnnLstm::LocateWeights() {
  const int u = dims_.units;
  const int64_t weight_floats = static_cast<int64_t>(weight_bytes_ / sizeof(float));
  cudnnTensorDescriptor_t raw = nullptr;
  if (absl::Status s = ToStatus(cudnnCreateTensorDescriptor(&raw), "tensor descriptor"); !s.ok()) {
    return s;
  }
  const TensorDesc desc(raw);
  const char* base = reinterpret_cast<const char*>(weights_.get());

  // Where `addr` lies in the weight space, in floats, once its descriptor is read and checked to
  // be {1, rows, cols} (cols == 1 for a bias), row-major, inside the space.
  auto locate = [&](int id, void* addr, int rows, int cols, const char* kind,
                    int64_t& offset) -> absl::Status {
    cudnnDataType_t type{};
    int nb = 0;
    int dim[3] = {0, 0, 0}, stride[3] = {0, 0, 0};
    if (absl::Status s =
            ToStatus(cudnnGetTensorNdDescriptor(desc.get(), 3, &type, &nb, dim, stride),
                     "weight descriptor");
        !s.ok()) {
      return s;
    }
    const bool shape_ok = addr != nullptr && type == CUDNN_DATA_FLOAT && nb == 3 && dim[0] == 1 &&
                          dim[1] == rows && dim[2] == cols && (rows == 1 || stride[1] == cols) &&
                          (cols == 1 || stride[2] == 1);
    const int64_t bytes = static_cast<const char*>(addr) - base;
    offset = bytes / static_cast<int64_t>(sizeof(float));
    if (!shape_ok || bytes < 0 || bytes % static_cast<int64_t>(sizeof(float)) != 0 ||
        offset + static_cast<int64_t>(rows) * cols > weight_floats) {
      return absl::InternalError(
          absl::StrCat(where_, ": cuDNN lays out the ", kind, " of gate ", kCudnnGateNames[id % 4],
                       " (linLayerID ", id, ") as ", nb, " dims [",
                       absl::StrJoin(dim, dim + (nb < 3 ? nb : 3), ", "), "] strides [",
                       absl::StrJoin(stride, stride + (nb < 3 ? nb : 3), ", "), "] at byte ", bytes,
                       " of ", weight_bytes_, "; expected [1, ", rows, ", ", cols, "] row-major"));
    }
    return absl::OkStatus();
  };

  // linLayerID 0-3: W of gates i, f, g, o (with their biases); 4-7: R of the same gates.
  for (int id = 0; id < 8; ++id) {
    const bool recurrent = id >= 4;
    const int gate = id % 4;
    void* matrix = nullptr;
    if (absl::Status s = ToStatus(
            cudnnGetRNNWeightParams(ctx_.cudnn(), rnn_.get(), 0, weight_bytes_, weights_.get(), id,
                                    desc.get(), &matrix, nullptr, nullptr),
            "cudnnGetRNNWeightParams");
        !s.ok()) {
      return s;
    }
    int64_t& matrix_offset = recurrent ? layout_.r[gate] : layout_.w[gate];
    if (absl::Status s = locate(id, matrix, u, recurrent ? u : dims_.in,
                                recurrent ? "recurrent matrix" : "input matrix", matrix_offset);
        !s.ok()) {
      return s;
    }
    if (recurrent) continue;  // CUDNN_RNN_SINGLE_INP_BIAS: only the input GEMMs have biases
    void* bias = nullptr;
    if (absl::Status s = ToStatus(
            cudnnGetRNNWeightParams(ctx_.cudnn(), rnn_.get(), 0, weight_bytes_, weights_.get(), id,
                                    nullptr, nullptr, desc.get(), &bias),
            "cudnnGetRNNWeightParams");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = locate(id, bias, u, 1, "bias", layout_.b[gate]); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudnnLstm::BatchDescs>> CudnnLstm::MakeBatchDescs(int batch) const {
  auto d = std::make_unique<BatchDescs>();
  const std::string what = absl::StrCat("descriptors for batch ", batch);
  for (DataDesc* data : {&d->x, &d->y}) {
    cudnnRNNDataDescriptor_t raw = nullptr;
    if (absl::Status s = ToStatus(cudnnCreateRNNDataDescriptor(&raw), what); !s.ok()) return s;
    data->reset(raw);
    // Sequence lengths are read from the host array here; every one is `time`.
    const int vector = data == &d->x ? dims_.in : dims_.units;
    if (absl::Status s =
            ToStatus(cudnnSetRNNDataDescriptor(
                         raw, CUDNN_DATA_FLOAT, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED,
                         dims_.time, batch, vector, host_seq_lengths_.data(), nullptr),
                     what);
        !s.ok()) {
      return s;
    }
  }
  cudnnTensorDescriptor_t h = nullptr;
  if (absl::Status s = ToStatus(cudnnCreateTensorDescriptor(&h), what); !s.ok()) return s;
  d->h.reset(h);
  const int dim[3] = {1, batch, dims_.units};
  const int stride[3] = {batch * dims_.units, dims_.units, 1};
  if (absl::Status s =
          ToStatus(cudnnSetTensorNdDescriptor(h, CUDNN_DATA_FLOAT, 3, dim, stride), what);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          ToStatus(cudnnGetRNNTempSpaceSizes(ctx_.cudnn(), rnn_.get(), CUDNN_FWD_MODE_TRAINING,
                                             d->x.get(), &d->work_bytes, &d->reserve_bytes),
                   absl::StrCat("temporary space sizes for batch ", batch));
      !s.ok()) {
    return s;
  }
  return d;
}

const CudnnLstm::BatchDescs* CudnnLstm::Descs(int batch) {
  if (batch < 1 || batch > dims_.max_batch) {
    ctx_.Fail(absl::InvalidArgumentError(
        absl::StrCat(where_, ": a call of ", batch, " rows (built for 1..", dims_.max_batch, ")")));
    return nullptr;
  }
  std::unique_ptr<BatchDescs>& slot = by_batch_[static_cast<size_t>(batch)];
  if (slot == nullptr) {
    absl::StatusOr<std::unique_ptr<BatchDescs>> d = MakeBatchDescs(batch);
    if (!d.ok()) {
      ctx_.Fail(d.status());
      return nullptr;
    }
    // Sized at build for max_batch; a smaller batch must fit (it always has so far).
    if ((*d)->work_bytes > max_work_bytes_ || (*d)->reserve_bytes > max_reserve_bytes_) {
      ctx_.Fail(absl::InternalError(
          absl::StrCat(where_, ": batch ", batch, " needs ", (*d)->work_bytes, " workspace and ",
                       (*d)->reserve_bytes, " reserve bytes, more than batch ", dims_.max_batch,
                       "'s ", max_work_bytes_, " and ", max_reserve_bytes_)));
      return nullptr;
    }
    slot = *std::move(d);
  }
  return slot.get();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LstmPath>> MakeCudnnLstmPath(Context& ctx, const LstmDims& dims,
                                                            const LstmState& state,
                                                            std::string where, CudnnRnnAlgo algo) {
  auto path = std::make_unique<CudnnLstm>(ctx, dims, state, std::move(where), algo);
  if (absl::Status s = path->Setup(); !s.ok()) return s;
  return path;
}

}  // namespace psflow::cuda
