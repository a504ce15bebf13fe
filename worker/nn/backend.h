// A compute backend: makes layers that run on one kind of device and owns that device's memory.
// The CPU backend (OpenBLAS) is the reference; a CUDA backend implements the same interface.
#ifndef PSFLOW_WORKER_NN_BACKEND_H_
#define PSFLOW_WORKER_NN_BACKEND_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/nn/layer.h"
#include "worker/nn/layer_spec.h"
#include "worker/nn/parameter_update.h"
#include "worker/nn/precision.h"

namespace psflow::nn {

// How a step's gradients are finished (Backend::FinishGradients, ReduceGradients).
struct GradientFinish {
  // Where the step leaves its gradients.
  enum class Where {
    kToHost,    // finished (unscaled, clipped) and copied to params.grads() on the host
    kOnDevice,  // finished on the device and left there, for an update on the device
                // (Backend::MakeUpdate); the host gradients are not written
    kRaw,       // left on the device as backward made them (unscale and clip_norm unused), for
                // ReduceGradients to combine with other towers' there
  };
  float clip_norm = 0;  // > 0: clip by global norm (tf.clip_by_global_norm)
  float unscale = 1;    // every gradient is first multiplied by this: 1 / the loss scale
  Where where = Where::kToHost;
  // Loss scaling is on: every gradient must be checked for finiteness, even at a scale of 1.
  bool check_finite = false;
  bool finished() const { return where != Where::kRaw; }
  // Whether the global norm is measured: clipping needs it, and loss scaling needs to know
  // whether every gradient is finite.
  bool measures() const { return finished() && (clip_norm > 0 || unscale != 1 || check_finite); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;

  // UNIMPLEMENTED when this backend has no kernel for the spec's kind.
  virtual absl::StatusOr<std::unique_ptr<Layer>> MakeLayer(const LayerSpec& spec,
                                                           std::string name) = 0;
  virtual std::unique_ptr<SoftmaxCrossEntropy> MakeSoftmaxCrossEntropy() = 0;

  // Device memory for activations: `floats` zeroed floats, freed with the returned owner; null
  // when the device (for the CPU backend: the heap) is out of memory. Never throws.
  struct BufferDeleter {
    const Backend* backend;
    void operator()(float* p) const { backend->Free(p); }
  };
  using Buffer = std::unique_ptr<float[], BufferDeleter>;
  Buffer Allocate(int64_t floats) { return Buffer(AllocateRaw(floats), BufferDeleter{this}); }

  // Copies `floats` host floats to device memory (a memcpy on the CPU backend).
  virtual void CopyToDevice(const float* host, float* device, int64_t floats) = 0;

  // ---- Parameters on the device. The CPU backend computes on the host buffers themselves, so
  // every one of these is trivial there; a GPU backend keeps a mirror in device memory.

  // Called once by Model::Create after params.Finalize(): allocates the device mirror of values
  // and gradients (ParameterSet::AttachDevice) and, on a GPU, moves the host buffers into pinned
  // memory for fast copies (ParameterSet::MoveHostBuffersTo: their addresses change, so take
  // them after attaching; a backend reads them afresh at each copy).
  virtual absl::Status AttachParameters(ParameterSet& /*params*/) { return absl::OkStatus(); }
  // Called by ~Model while params is still alive: releases the device mirror AttachParameters
  // made for it, once the copies queued to and from the host buffers are done (the buffers stay
  // with the set, which frees them into their memory). A no-op for a set never attached.
  // Several models may be attached to one backend at once.
  virtual void DetachParameters(ParameterSet& /*params*/) {}

  // The host values changed (a pull, Initialize): copy them to the device before the next step.
  virtual void UploadParameters(ParameterSet& /*params*/) {}

  // Zeroes the gradients the layers accumulate into.
  virtual void ZeroGradients(ParameterSet& params) { params.ZeroGrads(); }

  // Model::ComputeGradients calls this right after the Backward of a layer whose parameters are
  // handles [first, last): a GPU backend starts copying those gradients to the host on a side
  // stream while backward goes on with earlier layers. Only called when the gradients go to the
  // host as backward made them (GradientFinish::measures() false, where kToHost).
  virtual void GradientsReady(ParameterSet& /*params*/, int /*first*/, int /*last*/) {}
  // Whether the host gradients GradientsReady was told of are final when it returns: true on the
  // CPU, which computes in them; false on a GPU, whose copies land later (AwaitGradients).
  virtual bool host_gradients_final_when_ready() const { return true; }
  // Blocks until the host copy started by the step's k-th GradientsReady (k counts from 0 at the
  // step's ZeroGradients, in the order they were called) has landed: from then on those host
  // gradients are final. The copies of a replayed graph (BeginCapture) are those it recorded, k as
  // then. False when the device failed meanwhile or k is past this step's calls (FinishGradients
  // reports the error); true at once where host_gradients_final_when_ready().
  virtual bool AwaitGradients(int /*k*/) { return true; }

  // Ends a step's backward. With f.finished(): multiplies every gradient by f.unscale, clips them
  // by global norm when f.clip_norm > 0 (on the device), and, where kToHost, makes params.grads()
  // on the host hold them. Returns the global norm of the unscaled gradients before clipping when
  // f.measures(), else 0; a norm that is not finite (inf, NaN) means some gradient is not:
  // nothing was clipped and the step must not be applied. Where kRaw: only waits for the step.
  // On the CPU, kToHost and kOnDevice are the same. Errors: the first of any kernel since the
  // last call, naming the layer and its shapes.
  virtual absl::StatusOr<double> FinishGradients(ParameterSet& params, const GradientFinish& f);

  // Towers: finishes `into`'s gradients (as FinishGradients with `f`) after replacing them with
  // weights[0] * into's + sum over k >= 1 of weights[k] * from[k - 1]'s; a sparse parameter's
  // touched rows become the union of theirs. Every set was finished with where kRaw and
  // none is in use; `into` is attached to this backend, the others to backends of the same kind
  // (other GPUs: the CUDA backend adds them on this one's, over peer copies where the GPUs allow
  // them). A weight of 0 skips its set. The default adds on the host.
  virtual absl::StatusOr<double> ReduceGradients(ParameterSet& into,
                                                 std::span<ParameterSet* const> from,
                                                 std::span<const float> weights,
                                                 const GradientFinish& f);

  // ---- Towers that stream each layer's gradients (towers.h). Right after the Backward of each
  // layer that has parameters, tower k >= 1 calls MarkGradients (its step's marks count from 0):
  // a GPU records an event on its stream, the CPU (whose Backward is done when it returns) does
  // nothing. Tower 0, right after its own Backward of that layer, once every tower of `from`
  // with a weight has marked the layer (the caller orders the calls), calls AddLayerGradients:
  // its gradients of handles [first, last) := weights[0] * its own + the weighted sum of
  // theirs, and the touched rows the union, as ReduceGradients (with where kRaw) does for every
  // handle; `from_backends[k]` is from[k]'s backend, of this backend's kind. On a GPU the sum
  // runs on this backend's stream after the towers' marks, so the layer's gradients can go to the
  // host (GradientsReady) while backward goes on below. Errors as FinishGradients reports them.
  virtual void MarkGradients(int /*mark*/) {}
  virtual void AddLayerGradients(ParameterSet& into, std::span<ParameterSet* const> from,
                                 std::span<Backend* const> from_backends,
                                 std::span<const float> weights, int first, int last, int mark);

  // Copies params' device gradients, as the step left them, to params.grads() on the host and
  // waits (a check that needs gradients the step left on the device). Nothing on the CPU.
  virtual absl::Status CopyGradientsToHost(ParameterSet& /*params*/) { return absl::OkStatus(); }

  // The optimizer's update of params where this backend computes (parameter_update.h): on the
  // CPU over the host buffers (MakeHostUpdate, this default); on a GPU over the device mirror,
  // its slots in device memory. params must be attached (AttachParameters) and `optimizer` must
  // outlive the update. RESOURCE_EXHAUSTED when the device has no room for the slots.
  virtual absl::StatusOr<std::unique_ptr<ParameterUpdate>> MakeUpdate(const Optimizer& optimizer,
                                                                      ParameterSet& params) {
    return MakeHostUpdate(optimizer, params);
  }
  // Towers updating on the device (Towers::MakeUpdate): copies `from`'s device values, as the
  // work queued on this backend so far leaves them, to each set of `to` (attached to
  // `to_backends[k]`, of this backend's kind: other GPUs, over peer copies where they allow
  // them), and makes those backends' later work wait for the copies. The default copies
  // device_values() on the caller's thread (the CPU's are the host buffers).
  virtual void BroadcastParameters(ParameterSet& from, std::span<ParameterSet* const> to,
                                   std::span<Backend* const> to_backends);
  // Copies the device values to params.values() on the host and waits: after an update on the
  // device, before anyone reads the host values. The first error so far, as Synchronize. Nothing
  // on the CPU.
  virtual absl::Status DownloadParameters(ParameterSet& /*params*/) { return absl::OkStatus(); }

  // Makes this backend's device the calling thread's current one (CUDA's current device is per
  // thread): a thread other than the one that created the backend calls this before using it
  // or a model built on it. Nothing on the CPU.
  virtual void BindThread() {}

  // Waits for queued device work; the first error since the last call, as FinishGradients.
  virtual absl::Status Synchronize() { return absl::OkStatus(); }

  // ---- Host staging and step graphs (--cuda_graphs; see Model::EnableGraphs).

  // Whether a step's inputs are first staged in host memory the device copies from asynchronously
  // (AllocateHost: pinned, at one fixed address a recorded copy reads): a GPU. The CPU computes on
  // host memory and copies the batch from where it is.
  virtual bool stages_inputs() const { return false; }
  // With stages_inputs(): `floats` floats of that host memory, freed with the returned owner;
  // null when none can be had.
  struct HostBufferDeleter {
    const Backend* backend;
    void operator()(float* p) const { backend->FreeHost(p); }
  };
  using HostBuffer = std::unique_ptr<float[], HostBufferDeleter>;
  HostBuffer AllocateHost(int64_t floats) {
    return HostBuffer(AllocateHostRaw(floats), HostBufferDeleter{this});
  }

  // Recorded device work, replayed as a whole: one launch instead of one per kernel. Must not
  // outlive its backend.
  class Graph {
   public:
    virtual ~Graph() = default;
    // Queues one replay on the compute stream; errors as a kernel's (FinishGradients reports).
    virtual void Launch() = 0;
  };
  // Readies the backend for recording (a GPU gives cuBLAS a fixed workspace). UNIMPLEMENTED on
  // a backend that cannot record (the CPU: its layers compute as they are called).
  virtual absl::Status EnableGraphs() {
    return absl::UnimplementedError("this backend cannot record graphs (CUDA only)");
  }
  // From BeginCapture to EndCapture the compute stream records instead of running: the work the
  // layers queue (and GradientsReady's copies) becomes a graph; nothing runs. Only device work
  // may be queued in between (no waiting, no allocation). EndCapture's errors (a call that cannot
  // be recorded, instantiation) leave the backend as it was before BeginCapture: usable eagerly,
  // and FinishGradients does not report them again.
  virtual absl::Status BeginCapture() { return EnableGraphs(); }
  virtual absl::StatusOr<std::unique_ptr<Graph>> EndCapture() {
    return absl::UnimplementedError("this backend cannot record graphs (CUDA only)");
  }

 protected:
  virtual float* AllocateRaw(int64_t floats) = 0;
  virtual void Free(float* p) const = 0;
  // Only backends that stage inputs allocate host memory.
  virtual float* AllocateHostRaw(int64_t /*floats*/) { return nullptr; }
  virtual void FreeHost(float* /*p*/) const {}

  // ReduceGradients' touched-row union: kept between steps (no allocation once it is big enough).
  std::vector<int64_t> reduce_scratch_;
};

// The CPU backend: `threads` (0: one per core) run each layer, its matrix products and psflow's
// own loops alike, from one pool per backend (OpenBLAS itself runs single-threaded on them).
// Several workers sharing a machine want 1 each, leaving cores to the ps and each other. The first
// call loads OpenBLAS with kernels chosen from the CPU's features (backend/cpu/blas.h); where it
// cannot be loaded (an installation fault) the process exits with one line saying why.
// `threads` above kMaxCpuThreads count as kMaxCpuThreads.
inline constexpr int kMaxCpuThreads = 1024;
std::unique_ptr<Backend> MakeCpuBackend(int threads = 0);

// What the CPU backend computes its products with, e.g. "OpenBLAS 0.3.21, Zen kernels (chosen
// from CPUID: AVX2+FMA)"; loads OpenBLAS as MakeCpuBackend does.
std::string CpuKernels();

// The CUDA backend on GPU `device` (an index among the visible GPUs), its products computed in
// `precision` (precision.h: fp32 matches the CPU reference to ~1e-5). FAILED_PRECONDITION, one
// line saying why, when this binary was built without CUDA, no GPU is usable or `device` is not
// one of them.
absl::StatusOr<std::unique_ptr<Backend>> MakeCudaBackend(int device,
                                                         Precision precision = Precision::kFp32);

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_BACKEND_H_
