// The CUDA backend: layers on one GPU (cuBLAS, cuDNN, psflow's kernels), parameters and
// gradients mirrored in one device allocation, gradients streamed to pinned host memory per
// layer as backward produces them.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <span>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "worker/backend/cuda/activation.h"
#include "worker/backend/cuda/context.h"
#include "worker/backend/cuda/conv2d.h"
#include "worker/backend/cuda/dense.h"
#include "worker/backend/cuda/device_update.h"
#include "worker/backend/cuda/dropout.h"
#include "worker/backend/cuda/embedding.h"
#include "worker/backend/cuda/flatten.h"
#include "worker/backend/cuda/kernels.h"
#include "worker/backend/cuda/lrn.h"
#include "worker/backend/cuda/lstm.h"
#include "worker/backend/cuda/max_pool.h"
#include "worker/backend/cuda/softmax_cross_entropy.h"
#include "worker/nn/backend.h"
#include "worker/nn/clip.h"

namespace psflow::nn {
namespace {

// Page-locked host memory for parameter sets (ParameterSet::MoveHostBuffersTo): copies to and
// from it run at the bus's speed and truly asynchronously. Portable: every GPU's copies treat it
// as pinned (towers). One for the process, never destroyed: a set may outlive its backend.
class PinnedHostMemory final : public HostMemory {
 public:
  float* Allocate(size_t bytes) const override {
    void* p = nullptr;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
      cudaGetLastError();
      return nullptr;
    }
    std::memset(p, 0, bytes);
    return static_cast<float*>(p);
  }
  void Free(float* p) const override { cudaFreeHost(p); }
};

const HostMemory& Pinned() {
  static const HostMemory* const memory = new PinnedHostMemory;
  return *memory;
}

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(std::unique_ptr<cuda::Context> ctx) : ctx_(std::move(ctx)) {}
  ~CudaBackend() override {
    // Queued copies may still target the pinned buffers.
    (void)ctx_->Synchronize("shutdown");
    if (host_sum_sq_ != nullptr) cudaFreeHost(host_sum_sq_);
    if (cublas_workspace_ != nullptr) cublasSetWorkspace(ctx_->cublas(), nullptr, 0);
  }

  Device device() const override { return Device::kCuda; }

  absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerSpec& spec,
                                                   std::string name) override {
    using Made = absl::StatusOr<std::unique_ptr<Layer>>;
    cuda::Context& c = *ctx_;
    return std::visit(Overloaded{
                          [&](const DenseSpec& s) -> Made {
                            return std::make_unique<cuda::Dense>(c, s, std::move(name));
                          },
                          [&](const ActivationSpec& s) -> Made {
                            return std::make_unique<cuda::Activation>(c, s, std::move(name));
                          },
                          [&](const Conv2DSpec& s) -> Made {
                            return std::make_unique<cuda::Conv2D>(c, s, std::move(name));
                          },
                          [&](const MaxPoolSpec& s) -> Made {
                            return std::make_unique<cuda::MaxPool>(c, s, std::move(name));
                          },
                          [&](const LrnSpec& s) -> Made {
                            return std::make_unique<cuda::Lrn>(c, s, std::move(name));
                          },
                          [&](const FlattenSpec&) -> Made {
                            return std::make_unique<cuda::Flatten>(c, std::move(name));
                          },
                          [&](const DropoutSpec& s) -> Made {
                            return std::make_unique<cuda::Dropout>(c, s, std::move(name));
                          },
                          [&](const EmbeddingSpec& s) -> Made {
                            return std::make_unique<cuda::Embedding>(c, s, std::move(name));
                          },
                          [&](const LstmSpec& s) -> Made {
                            return std::make_unique<cuda::Lstm>(c, s, std::move(name));
                          },
                      },
                      spec);
  }

  std::unique_ptr<SoftmaxCrossEntropy> MakeSoftmaxCrossEntropy() override {
    return std::make_unique<cuda::SoftmaxCrossEntropy>(*ctx_);
  }

  void CopyToDevice(const float* host, float* device, int64_t floats) override {
    if (floats <= 0) return;
    // The message only on failure: every step comes here (no allocation in the step).
    if (cudaError_t e = cudaMemcpyAsync(device, host, static_cast<size_t>(floats) * sizeof(float),
                                        cudaMemcpyHostToDevice, ctx_->stream());
        e != cudaSuccess) {
      ctx_->Check(e, absl::StrCat("copying ", floats, " input floats to the GPU"));
    }
  }

  absl::Status AttachParameters(ParameterSet& params) override {
    DetachParameters(params);  // a set at the address of one destroyed without detaching
    const int64_t total = std::max<int64_t>(params.total_size(), 1);
    const std::string what =
        absl::StrCat("the model's ", params.total_size(), " parameters and their gradients");
    absl::StatusOr<cuda::DeviceArray<float>> mirror = ctx_->Allocate<float>(2 * total, what);
    if (!mirror.ok()) return mirror.status();
    Attached& a = attached_[&params];
    a.mirror = *std::move(mirror);
    params.AttachDevice(a.mirror.get(), a.mirror.get() + total);
    // A towers step marks each layer with parameters once: never more marks than parameters.
    // Made here, so a step never grows marks_ while another tower's thread reads it.
    while (marks_.size() < params.descs().size()) {
      auto made = MakeEvent();
      if (made == nullptr) return ctx_->Synchronize("creating the towers' events");
      marks_.push_back(std::move(made));
    }
    // Pinned host buffers, which go with the values and gradients wherever a hand-over swaps
    // them (a set made SameLayoutAs this one is pinned too). Best effort: unpinned memory still
    // works, only slower.
    if (params.total_size() > 0 && params.host_memory() != &Pinned() &&
        !params.MoveHostBuffersTo(Pinned())) {
      PSFLOW_LOG(WARNING) << "could not pin the " << 2 * params.total_size() * sizeof(float)
                          << " bytes of host parameters and gradients; copies to and from the "
                          << "GPU will be slower";
    }
    return ctx_->Synchronize("attaching the parameters");
  }

  void DetachParameters(ParameterSet& params) override {
    auto it = attached_.find(&params);
    if (it == attached_.end()) return;
    // Queued copies may still target the host buffers or the mirror.
    (void)ctx_->Synchronize("detaching the parameters");
    params.AttachDevice(nullptr, nullptr);
    attached_.erase(it);
  }

  void UploadParameters(ParameterSet& params) override {
    ctx_->Check(cudaMemcpyAsync(params.device_values(), params.values().data(),
                                static_cast<size_t>(params.total_size()) * sizeof(float),
                                cudaMemcpyHostToDevice, ctx_->stream()),
                "copying the parameters to the GPU");
  }

  void ZeroGradients(ParameterSet& params) override {
    ready_calls_ = 0;
    ctx_->Check(
        cudaMemsetAsync(params.device_grads(), 0,
                        static_cast<size_t>(params.total_size()) * sizeof(float), ctx_->stream()),
        "zeroing the gradients");
  }

  void GradientsReady(ParameterSet& params, int first, int last) override {
    const auto& descs = params.descs();
    const int64_t begin = descs[static_cast<size_t>(first)].offset;
    const ParameterDesc& end_desc = descs[static_cast<size_t>(last - 1)];
    const int64_t end = end_desc.offset + end_desc.size;
    // The copy stream waits for backward to have produced them, then copies while backward goes
    // on with the layers below.
    // While capturing, this fork puts the copy stream into the recording: EndCapture joins it.
    copy_stream_forked_ = copy_stream_forked_ || capturing_;
    ctx_->Check(cudaEventRecord(event_.get(), ctx_->stream()), "recording a gradient event");
    ctx_->Check(cudaStreamWaitEvent(ctx_->copy_stream(), event_.get(), 0),
                "waiting for a gradient event");
    if (cudaError_t e =
            cudaMemcpyAsync(params.grads().data() + begin, params.device_grads() + begin,
                            static_cast<size_t>(end - begin) * sizeof(float),
                            cudaMemcpyDeviceToHost, ctx_->copy_stream());
        e != cudaSuccess) {
      ctx_->Check(e, absl::StrCat("copying gradients of ", descs[static_cast<size_t>(first)].name,
                                  " to the host"));
    }
    // Marks where this copy ends, for AwaitGradients; a recording keeps the mark as a node of its
    // own (external), so that each replay marks it again.
    const size_t k = static_cast<size_t>(ready_calls_++);
    if (k == copied_.size()) {
      if (auto made = MakeEvent(); made != nullptr) copied_.push_back(std::move(made));
    }
    // No event only after MakeEvent failed: it recorded the error, which the step reports.
    if (k >= copied_.size()) return;
    ctx_->Check(cudaEventRecordWithFlags(copied_[k].get(), ctx_->copy_stream(),
                                         capturing_ ? cudaEventRecordExternal : 0),
                "marking a gradient copy");
  }

  // The copies are asynchronous: AwaitGradients waits for each.
  bool host_gradients_final_when_ready() const override { return false; }

  bool AwaitGradients(int k) override {
    const size_t i = static_cast<size_t>(k);
    if (i >= copied_.size()) {
      ctx_->Fail(absl::InternalError(
          absl::StrCat("waiting for gradient copy ", k, " of a step that made ", copied_.size())));
      return false;
    }
    if (!ctx_->ok()) return false;
    ctx_->Check(cudaEventSynchronize(copied_[i].get()), "waiting for a gradient copy");
    return ctx_->ok();
  }

  absl::StatusOr<double> FinishGradients(ParameterSet& params, const GradientFinish& f) override {
    const bool measure = f.measures();
    const int64_t n = params.total_size();
    if (measure) {
      // Untouched rows of a sparse gradient are zero on the device: the norm over the whole
      // buffer is the norm over the touched rows.
      cuda::LaunchSumOfSquares(params.device_grads(), n, sum_sq_.get(), ctx_->stream());
      cuda::LaunchUnscaleClip(params.device_grads(), n, sum_sq_.get(), f.unscale, f.clip_norm,
                              ctx_->stream());
      ctx_->CheckLaunch("unscaling and clipping the gradients by global norm");
      ctx_->Check(cudaMemcpyAsync(host_sum_sq_, sum_sq_.get(), sizeof(double),
                                  cudaMemcpyDeviceToHost, ctx_->stream()),
                  "reading the global norm");
    }
    // Unless backward streamed them (Model::ComputeGradients: no measure), all of them to the
    // host now; an update on the device reads them where they are.
    if (measure && f.where == GradientFinish::Where::kToHost) {
      ctx_->Check(cudaMemcpyAsync(params.grads().data(), params.device_grads(),
                                  static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost,
                                  ctx_->stream()),
                  "copying the gradients to the host");
    }
    if (absl::Status s = ctx_->Synchronize("a training step"); !s.ok()) return s;
    return measure ? static_cast<double>(f.unscale) * std::sqrt(*host_sum_sq_) : 0.0;
  }

  absl::StatusOr<double> ReduceGradients(ParameterSet& into, std::span<ParameterSet* const> from,
                                         std::span<const float> weights,
                                         const GradientFinish& f) override {
    // The staging buffer, peer access and the kernels are this GPU's, whatever the thread did.
    BindThread();
    const int64_t n = into.total_size();
    RETURN_IF_ERROR(AddTowers(into, from, weights, 0, n, "the model",
                              [&](size_t k) { return PrepareReduce(*from[k], n); }));
    // The rows on the device are summed whole (untouched ones are zero); the lists on the host.
    MergeTouchedRows(into, from, weights, /*zero_new_rows=*/false, reduce_scratch_);
    if (f.where == GradientFinish::Where::kToHost && !f.measures()) {
      // Nothing else copies them: as FinishGradients with a measure, minus the measuring.
      ctx_->Check(cudaMemcpyAsync(into.grads().data(), into.device_grads(),
                                  static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToHost,
                                  ctx_->stream()),
                  "copying the gradients to the host");
    }
    return FinishGradients(into, f);
  }

  void MarkGradients(int mark) override {
    const size_t m = static_cast<size_t>(mark);
    if (m >= marks_.size()) {
      ctx_->Fail(absl::InternalError(
          absl::StrCat("gradient mark ", mark, " of a backend made for ", marks_.size())));
      return;
    }
    ctx_->Check(cudaEventRecord(marks_[m].get(), ctx_->stream()), "marking a layer's gradients");
  }

  void AddLayerGradients(ParameterSet& into, std::span<ParameterSet* const> from,
                         std::span<Backend* const> from_backends, std::span<const float> weights,
                         int first, int last, int mark) override {
    const auto& descs = into.descs();
    const int64_t begin = descs[static_cast<size_t>(first)].offset;
    const ParameterDesc& end_desc = descs[static_cast<size_t>(last - 1)];
    const int64_t n = end_desc.offset + end_desc.size - begin;
    const size_t m = static_cast<size_t>(mark);
    const std::string& name = descs[static_cast<size_t>(first)].name;
    // Each layer its own part of the staging buffer: no layer's copy waits for another's sum.
    const absl::Status added = AddTowers(into, from, weights, begin, n, name, [&](size_t k) {
      auto* other = dynamic_cast<CudaBackend*>(from_backends[k]);
      if (other == nullptr || m >= other->marks_.size()) {
        return absl::InternalError(
            absl::StrCat("tower ", k + 1, " has no CUDA mark ", mark, " for ", name));
      }
      // After tower k + 1's backward of the layer, on its GPU.
      ctx_->Check(cudaStreamWaitEvent(ctx_->stream(), other->marks_[m].get(), 0),
                  "waiting for another tower's gradients");
      // The staging buffer and peer access, once a step (the first layer comes first).
      return mark == 0 ? PrepareReduce(*from[k], into.total_size()) : absl::OkStatus();
    });
    if (!added.ok()) {
      ctx_->Fail(added);
      return;
    }
    // The rows on the device are summed whole (untouched ones are zero); the lists on the host.
    MergeTouchedRows(into, from, weights, /*zero_new_rows=*/false, reduce_scratch_,
                     HandleRange{first, last});
  }

  void BroadcastParameters(ParameterSet& from, std::span<ParameterSet* const> to,
                           std::span<Backend* const> to_backends) override {
    BindThread();
    if (broadcast_ == nullptr && (broadcast_ = MakeEvent()) == nullptr) return;  // recorded
    const size_t bytes = static_cast<size_t>(from.total_size()) * sizeof(float);
    // On this GPU's stream, after the update queued there: peer to peer where the GPUs allow it
    // (ReduceGradients enabled it), through the host otherwise.
    for (ParameterSet* set : to) {
      ctx_->Check(cudaMemcpyAsync(set->device_values(), from.device_values(), bytes,
                                  cudaMemcpyDefault, ctx_->stream()),
                  "copying the updated parameters to another tower's GPU");
    }
    ctx_->Check(cudaEventRecord(broadcast_.get(), ctx_->stream()),
                "marking the updated parameters' copies");
    // Each tower's next step waits for its copy on its own GPU (an event of another device is
    // fine to wait for).
    for (Backend* backend : to_backends) {
      auto* other = dynamic_cast<CudaBackend*>(backend);
      if (other == nullptr) {
        ctx_->Fail(absl::InternalError("a tower on another kind of backend than the first's"));
        return;
      }
      other->ctx_->Check(cudaStreamWaitEvent(other->ctx_->stream(), broadcast_.get(), 0),
                         "waiting for the updated parameters");
    }
  }

  absl::Status CopyGradientsToHost(ParameterSet& params) override {
    ctx_->Check(cudaMemcpyAsync(params.grads().data(), params.device_grads(),
                                static_cast<size_t>(params.total_size()) * sizeof(float),
                                cudaMemcpyDeviceToHost, ctx_->stream()),
                "copying the gradients to the host");
    return ctx_->Synchronize("copying the gradients to the host");
  }

  absl::StatusOr<std::unique_ptr<ParameterUpdate>> MakeUpdate(const Optimizer& optimizer,
                                                              ParameterSet& params) override {
    if (!params.on_device()) {
      return absl::FailedPreconditionError(
          "an update on the GPU needs parameters attached to it (AttachParameters)");
    }
    return cuda::MakeDeviceUpdate(*ctx_, optimizer, params);
  }

  absl::Status DownloadParameters(ParameterSet& params) override {
    ctx_->Check(cudaMemcpyAsync(params.values().data(), params.device_values(),
                                static_cast<size_t>(params.total_size()) * sizeof(float),
                                cudaMemcpyDeviceToHost, ctx_->stream()),
                "copying the parameters to the host");
    return ctx_->Synchronize("copying the parameters to the host");
  }

  absl::Status Synchronize() override { return ctx_->Synchronize("a forward pass"); }

  void BindThread() override {
    ctx_->Check(cudaSetDevice(ctx_->device()), "making the GPU current for a thread");
  }

  // into's device gradients [begin, begin + n) := weights[0] * them + the sum over k of
  // weights[k + 1] * from[k]'s, on this GPU's stream. Each tower's part goes through
  // reduce_staging_ at the same offset (unified addressing: peer to peer where enabled);
  // before(k), an absl::Status, runs first for each tower with a weight, and its error ends the
  // sum. `what` names the gradients in errors.
  template <class Before>
  absl::Status AddTowers(ParameterSet& into, std::span<ParameterSet* const> from,
                         std::span<const float> weights, int64_t begin, int64_t n,
                         absl::string_view what, Before before) {
    bool added = false;
    for (size_t k = 0; k < from.size(); ++k) {
      const float w = weights[k + 1];
      if (w == 0) continue;
      RETURN_IF_ERROR(before(k));
      if (cudaError_t e = cudaMemcpyAsync(
              reduce_staging_.get() + begin, from[k]->device_grads() + begin,
              static_cast<size_t>(n) * sizeof(float), cudaMemcpyDefault, ctx_->stream());
          e != cudaSuccess) {
        ctx_->Check(e, absl::StrCat("copying tower ", k + 1, "'s gradients of ", what, " to GPU ",
                                    ctx_->device()));
      }
      cuda::LaunchAxpby(added ? 1.0f : weights[0], into.device_grads() + begin, w,
                        reduce_staging_.get() + begin, n, ctx_->stream());
      ctx_->CheckLaunch("adding up the towers' gradients");
      added = true;
    }
    if (!added && weights[0] != 1.0f) {
      cuda::LaunchAxpby(weights[0], into.device_grads() + begin, 0.0f, into.device_grads() + begin,
                        n, ctx_->stream());
      ctx_->CheckLaunch("weighting the gradients");
    }
    return absl::OkStatus();
  }

  // Staging for another tower's gradients (n floats, allocated on first use: the first towers
  // step), and peer access to its GPU where the hardware allows it.
  absl::Status PrepareReduce(ParameterSet& other, int64_t n) {
    if (reduce_staging_floats_ < n) {
      absl::StatusOr<cuda::DeviceArray<float>> a =
          ctx_->Allocate<float>(n, "staging for the other towers' gradients");
      if (!a.ok()) return a.status();
      reduce_staging_ = *std::move(a);
      reduce_staging_floats_ = n;
    }
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, other.device_grads()) != cudaSuccess) {
      cudaGetLastError();
      return absl::OkStatus();  // the copy still works, through the host
    }
    const int peer = attributes.device;
    if (peer == ctx_->device() || !peers_tried_.insert(peer).second) return absl::OkStatus();
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, ctx_->device(), peer) == cudaSuccess && can != 0) {
      const cudaError_t e = cudaDeviceEnablePeerAccess(peer, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        PSFLOW_LOG(WARNING) << "GPU " << ctx_->device() << " cannot map GPU " << peer
                            << "'s memory (" << cudaGetErrorString(e)
                            << "): towers' gradients go through the host";
      }
    } else {
      PSFLOW_LOG(INFO) << "GPU " << ctx_->device() << " has no peer access to GPU " << peer
                       << ": towers' gradients go through the host";
    }
    cudaGetLastError();
    return absl::OkStatus();
  }

  absl::Status EnableGraphs() override {
    if (cublas_workspace_ != nullptr) return absl::OkStatus();
    // cuBLAS's own workspace comes from a pool it may grow while recording; a fixed one of the
    // size NVIDIA recommends (32 MiB on Hopper and later, 4 MiB before) keeps the recording's
    // addresses fixed and the step allocation-free. Eager calls use it too from now on.
    const size_t bytes = (ctx_->properties().major >= 9 ? 32 : 4) << 20;
    absl::StatusOr<cuda::DeviceArray<char>> w =
        ctx_->Allocate<char>(static_cast<int64_t>(bytes), "cuBLAS's workspace for CUDA graphs");
    if (!w.ok()) return w.status();
    if (cublasStatus_t s = cublasSetWorkspace(ctx_->cublas(), w->get(), bytes);
        s != CUBLAS_STATUS_SUCCESS) {
      return cuda::CublasError(s, "giving cuBLAS a workspace for CUDA graphs");
    }
    cublas_workspace_ = *std::move(w);
    return absl::OkStatus();
  }

  absl::Status BeginCapture() override {
    RETURN_IF_ERROR(EnableGraphs());
    // EndCapture takes the errors recorded while recording as its own: an earlier one stays
    // where FinishGradients reports it, and nothing is recorded.
    if (absl::Status earlier = ctx_->TakeError(); !earlier.ok()) {
      const std::string message(earlier.message());
      ctx_->Fail(std::move(earlier));
      return absl::FailedPreconditionError(
          absl::StrCat("not recording after a device error: ", message));
    }
    // Thread-local mode: a call that cannot be recorded (a synchronisation, an allocation) made by
    // this thread fails the recording at once, so it falls back instead of recording something
    // wrong (relaxed mode would let such calls through); other threads (the other towers' GPUs,
    // the exchange with the ps) are not constrained, as global mode would constrain them.
    if (cudaError_t e = cudaStreamBeginCapture(ctx_->stream(), cudaStreamCaptureModeThreadLocal);
        e != cudaSuccess) {
      cudaGetLastError();
      return cuda::CudaError(e, "starting to record a CUDA graph");
    }
    capturing_ = true;
    copy_stream_forked_ = false;
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<Graph>> EndCapture() override {
    if (copy_stream_forked_) {
      // The gradient copies forked into the copy stream join the recording stream again: a
      // recording must end where it began.
      ctx_->Check(cudaEventRecord(join_.get(), ctx_->copy_stream()), "joining the copy stream");
      ctx_->Check(cudaStreamWaitEvent(ctx_->stream(), join_.get(), 0), "joining the copy stream");
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(ctx_->stream(), &graph);
    capturing_ = false;
    copy_stream_forked_ = false;
    // What the layers recorded as errors meanwhile are calls the recording refused (nothing
    // ran): this recording's failure, not the step's; FinishGradients must not report them.
    const absl::Status refused = ctx_->TakeError();
    if (ended != cudaSuccess || !refused.ok()) {
      cudaGetLastError();
      if (graph != nullptr) cudaGraphDestroy(graph);
      return !refused.ok() ? refused : cuda::CudaError(ended, "recording a CUDA graph");
    }
    cudaGraphExec_t exec = nullptr;
    const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (made != cudaSuccess) {
      cudaGetLastError();
      return cuda::CudaError(made, "instantiating a CUDA graph");
    }
    return std::make_unique<CudaGraph>(*ctx_, exec);
  }

  absl::Status Prepare() {
    absl::StatusOr<cuda::DeviceArray<double>> s = ctx_->Allocate<double>(1, "the global norm");
    if (!s.ok()) return s.status();
    sum_sq_ = *std::move(s);
    void* pinned = nullptr;
    if (cudaError_t e = cudaMallocHost(&pinned, sizeof(double)); e != cudaSuccess) {
      return cuda::CudaError(e, "pinned memory for the global norm");
    }
    host_sum_sq_ = static_cast<double*>(pinned);
    event_ = MakeEvent();
    join_ = MakeEvent();
    return absl::OkStatus();
  }

 protected:
  float* AllocateRaw(int64_t floats) override {
    absl::StatusOr<cuda::DeviceArray<float>> p =
        ctx_->Allocate<float>(std::max<int64_t>(floats, 16), "activations");
    if (!p.ok()) {
      PSFLOW_LOG(ERROR) << p.status().message();
      return nullptr;
    }
    return p->release();
  }
  void Free(float* p) const override { cudaFree(p); }
  // Pinned: copies from it are truly asynchronous, and can be recorded into a graph.
  bool stages_inputs() const override { return true; }
  float* AllocateHostRaw(int64_t floats) override {
    void* p = nullptr;
    if (cudaError_t e =
            cudaMallocHost(&p, static_cast<size_t>(std::max<int64_t>(floats, 1)) * sizeof(float));
        e != cudaSuccess) {
      cudaGetLastError();
      PSFLOW_LOG(ERROR) << cuda::CudaError(e, "pinned host memory for staging").message();
      return nullptr;
    }
    return static_cast<float*>(p);
  }
  void FreeHost(float* p) const override { cudaFreeHost(p); }

 private:
  struct EventDestroy {
    void operator()(CUevent_st* e) const { cudaEventDestroy(e); }
  };
  std::unique_ptr<CUevent_st, EventDestroy> MakeEvent() {
    cudaEvent_t e = nullptr;
    ctx_->Check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "creating an event");
    return std::unique_ptr<CUevent_st, EventDestroy>(e);
  }

  class CudaGraph final : public Graph {
   public:
    CudaGraph(cuda::Context& ctx, cudaGraphExec_t exec) : ctx_(ctx), exec_(exec) {}
    ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
    void Launch() override {
      ctx_.Check(cudaGraphLaunch(exec_, ctx_.stream()), "replaying the step's CUDA graph");
    }

   private:
    cuda::Context& ctx_;
    cudaGraphExec_t exec_;
  };

  // What AttachParameters made for one parameter set.
  struct Attached {
    cuda::DeviceArray<float> mirror;  // values then gradients
  };

  std::unique_ptr<cuda::Context> ctx_;
  std::map<const ParameterSet*, Attached> attached_;
  std::unique_ptr<CUevent_st, EventDestroy> event_;
  std::unique_ptr<CUevent_st, EventDestroy> join_;  // the copy stream joining a recording
  bool capturing_ = false;                          // between BeginCapture and EndCapture
  bool copy_stream_forked_ = false;                 // GradientsReady ran while capturing
  // copied_[k] marks the end of the step's k-th gradient copy (AwaitGradients); made as needed.
  std::vector<std::unique_ptr<CUevent_st, EventDestroy>> copied_;
  // marks_[m]: where this backend's backward made a towers step's m-th layer (MarkGradients);
  // read by tower 0's backend on its thread, so made before any step (AttachParameters).
  std::vector<std::unique_ptr<CUevent_st, EventDestroy>> marks_;
  // Where BroadcastParameters' copies end (made at its first call).
  std::unique_ptr<CUevent_st, EventDestroy> broadcast_;
  int ready_calls_ = 0;                       // GradientsReady calls since the step's ZeroGradients
  cuda::DeviceArray<char> cublas_workspace_;  // set by EnableGraphs
  cuda::DeviceArray<double> sum_sq_;
  double* host_sum_sq_ = nullptr;  // pinned
  cuda::DeviceArray<float> reduce_staging_;
  int64_t reduce_staging_floats_ = 0;
  std::set<int> peers_tried_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device, Precision precision) {
  absl::StatusOr<std::unique_ptr<cuda::Context>> ctx = cuda::Context::Create(device, precision);
  if (!ctx.ok()) return ctx.status();
  auto backend = std::make_unique<CudaBackend>(*std::move(ctx));
  if (absl::Status s = backend->Prepare(); !s.ok()) return s;
  return backend;
}

}  // namespace psflow::nn
