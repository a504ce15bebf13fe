// A model: layers in sequence, then softmax cross-entropy on the logits. The last layer's output
// per example is [..., num_classes]: one prediction per example (a classifier) or one per time
// step (a language model, [time, vocabulary]), each with its own label.
//
// All activation and activation-gradient buffers are allocated once, in Create(), for max_batch
// rows; ComputeGradients and Evaluate allocate nothing. Not thread-safe.
//
// A step runs in three phases (worker/nn/layer.h): the host phase (the inputs copied into a
// staging buffer the device reads, every layer's Prepare, the labels set), the device phase (the
// input copy, Forward, the loss, Backward, the gradient copies: queued, never waited for) and the
// finish (Backend::FinishGradients waits; the loss is summed). The CPU backend runs the same
// phases, computing as it goes.
#ifndef PSFLOW_WORKER_NN_MODEL_H_
#define PSFLOW_WORKER_NN_MODEL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/nn/backend.h"
#include "worker/nn/layer_spec.h"
#include "worker/nn/model_spec.h"
#include "worker/nn/trainable.h"

namespace psflow::nn {

// One layer's share of a training step (Model::ProfileLayers), in seconds.
struct LayerTime {
  std::string layer;  // Layer::name(), e.g. "dense0"
  double forward_seconds = 0;
  double backward_seconds = 0;
};

// Told by a Model, on the thread of its training step, right after the Backward of each layer
// that has parameters (handles [first, last)), the last layer's first, before anything else of
// that layer's gradients happens (their finish, their copy to the host). Towers reduce each
// layer across towers there (towers.h).
class BackwardHook {
 public:
  virtual ~BackwardHook() = default;
  virtual void LayerDone(ParameterSet& params, int first, int last) = 0;
};

class Model final : public Trainable {
 public:
  // INVALID_ARGUMENT when the layers do not fit together or do not end in num_classes outputs,
  // or max_batch is over kMaxBatch; RESOURCE_EXHAUSTED when the host's memory cannot hold the
  // parameters or the activations.
  static constexpr int64_t kMaxBatch = int64_t{1} << 24;
  // The backend must outlive the model. `seed` seeds the dropout masks.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const ModelSpec& spec, Backend& backend,
                                                       int64_t max_batch, uint64_t seed = 1);
  ~Model() override;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelSpec& spec() const { return spec_; }
  int64_t max_batch() const { return max_batch_; }
  // Predictions (and labels) per example: 1 for a classifier, the time steps of a sequence.
  int64_t labels_per_example() const override { return labels_per_example_; }
  ParameterSet& params() override { return params_; }
  const ParameterSet& params() const { return params_; }

  // The layers, in order: layer i is named layer_name(i) and owns the parameter handles
  // [layer_params(i).first, layer_params(i).second) (an empty range for a layer without any).
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const std::string& layer_name(int i) const { return layers_[static_cast<size_t>(i)]->name(); }
  std::pair<ParameterSet::Handle, ParameterSet::Handle> layer_params(int i) const {
    return {param_begin_[static_cast<size_t>(i)], param_begin_[static_cast<size_t>(i) + 1]};
  }

  // Times each layer's Forward and Backward on `batch` (model_profile.cc): one warm-up step, then
  // the median of `steps` timed training steps per layer, waiting for the device
  // (Backend::Synchronize) after each layer so a GPU's queued work is counted where it runs. The
  // loss (softmax cross-entropy) counts as the last layer's forward. Afterwards params().grads()
  // are undefined (until the next ComputeGradients), stateful layers start from zeros
  // (ResetState) and the dropout masks are those the next step would have drawn anyway; the
  // values are not changed. INVALID_ARGUMENT for steps < 1; a layer's error as ComputeGradients.
  absl::StatusOr<std::vector<LayerTime>> ProfileLayers(const Batch& batch, int steps);

  // Copies params()' host values to the device now (nothing on the CPU). Every step and
  // evaluation does so itself when the values changed (ParameterSet::ValuesChanged); this is for
  // values written without saying so, and for tests.
  void UploadParameters() {
    backend_.UploadParameters(params_);
    uploaded_version_ = params_.values_version();
  }
  // The device values were written there directly (Backend::BroadcastParameters) and are the
  // ones to compute with: the host values, whatever they are, are not uploaded over them until
  // they change again (ParameterSet::ValuesChanged).
  void DeviceValuesAreCurrent() { uploaded_version_ = params_.values_version(); }

  // Sets params().grads() (on the host) to the gradient of the loss on `batch` and returns the
  // loss: the cross-entropy summed over each example's predictions, averaged over the examples
  // (for a classifier the mean cross-entropy; for a language model the seed's per-sequence cost),
  // plus any regularisation. With clip_norm > 0 the gradients are first clipped by their global
  // norm (tf.clip_by_global_norm; nn/clip.h: a repeated token's rows are summed first). batch.size
  // must be in [1, max_batch]. Errors: a device failure, naming the layer and its shapes.
  //
  // A GradientListener (SetGradientListener) hears of every layer's parameters once per step that
  // streams (no clipping, no loss scale, gradients to the host), the last layer's first. On the
  // CPU each layer is told right after its Backward. Where the host copies are asynchronous (a
  // GPU, Backend::host_gradients_final_when_ready() false) the whole backward is queued first,
  // then each layer is told as its copy lands (Backend::AwaitGradients) while the device goes on
  // with the layers below; a replayed graph (--cuda_graphs) likewise. Only the step that checks a
  // new graph tells every layer after its finish. A step that fails tells nothing more; a failure
  // the device reports late (a fault in a lower layer's backward) can come after upper layers
  // were told: the step's error is what counts (the trainer stops on it).
  absl::StatusOr<double> ComputeGradients(const Batch& batch, float clip_norm = 0) override;
  void SetGradientListener(GradientListener* listener) override { listener_ = listener; }
  // From the next step on, tells `hook` (null: nobody) of each layer with parameters right after
  // its Backward (BackwardHook). A step with a hook runs eagerly, never as a graph.
  void SetBackwardHook(BackwardHook* hook) { hook_ = hook; }
  // The same, finished as `finish` says (towers keep the gradients on the device as backward
  // made them, where kRaw; its unscale should then be 1 / the loss scale or 1).
  absl::StatusOr<double> ComputeGradients(const Batch& batch, const GradientFinish& finish);
  // How ComputeGradients(batch, clip_norm) finishes a step: clipped at clip_norm, unscaled by the
  // loss scale, checked for finiteness while loss scaling is on, to the host.
  GradientFinish Finish(float clip_norm) const {
    return GradientFinish{
        clip_norm, 1.0f / loss_scale_,
        gradients_on_device_ ? GradientFinish::Where::kOnDevice : GradientFinish::Where::kToHost,
        check_finite_};
  }
  // From the next step on, ComputeGradients(batch, clip_norm) finishes the gradients on the
  // device and leaves them there (GradientFinish::Where::kOnDevice) for an update on the device
  // (Backend::MakeUpdate): params().grads() on the host are no longer written, and nothing
  // streams to a GradientListener. false (the default) brings them to the host again.
  void SetGradientsOnDevice(bool on_device) { gradients_on_device_ = on_device; }
  // The backend's update (Backend::MakeUpdate); while one on the device lives, the steps leave
  // their gradients there (SetGradientsOnDevice).
  absl::StatusOr<std::unique_ptr<ParameterUpdate>> MakeUpdate(const Optimizer& optimizer) override;
  absl::Status DownloadParameters() override { return backend_.DownloadParameters(params_); }
  Backend& backend() { return backend_; }
  void SetLossScale(float scale) override {
    loss_scale_ = scale > 0 ? scale : 1;
    check_finite_ = scale > 0;
  }
  float loss_scale() const { return loss_scale_; }
  bool last_step_finite() const override { return last_step_finite_; }

  // Forward only (inference mode): cross-entropy summed over all predictions and the number of
  // correct arg-max predictions.
  absl::StatusOr<SoftmaxCrossEntropy::Eval> Evaluate(const Batch& batch);

  // Starts stateful layers (LSTMs) from zeros again: at an epoch's start, before evaluation.
  void ResetState() override;
  absl::Status ListRowsRead(const Batch& batch, ParameterSet& into) override;

  // For gradient checks: the next ComputeGradients draws the dropout masks of training step
  // `step` (steps count from 0) again.
  void RewindRandomness(uint64_t step) { step_ = step; }

  // --cuda_graphs. From now on the device phase of a step of max_batch examples is recorded once
  // into a graph (Backend::BeginCapture) and replayed every later step of that size: one launch
  // instead of hundreds where small kernels leave the GPU waiting for the CPU. Other sizes (a
  // short last batch) and Evaluate run eagerly. The first max_batch step checks the graph: it runs
  // eagerly, records the graph, rewinds the randomness and carried state, replays the graph on
  // the same batch and compares (gradients within kGraphGradientTolerance of their largest
  // magnitude, the loss within kGraphLossTolerance, both relative). A recording that fails or a
  // replay that differs is logged as one WARNING and the model runs eagerly for good (after a
  // failed comparison that step runs eagerly again from the same start); the outcome of the check
  // is logged once at INFO. The results of ComputeGradients are what they are eagerly.
  // A graph that streams gradients to the host copies them into the host buffer it was recorded
  // with: a step after a hand-over swapped params().grads() for another buffer runs eagerly.
  // On a backend that cannot record graphs (the CPU) that first step logs the WARNING and runs
  // eagerly. The backend is readied (Backend::EnableGraphs) on the thread that runs the steps.
  void EnableGraphs() {
    if (graph_state_ == GraphState::kOff) graph_state_ = GraphState::kUnchecked;
  }
  enum class GraphState { kOff, kUnchecked, kReplaying, kFailed };
  GraphState graph_state() const { return graph_state_; }
  static constexpr double kGraphGradientTolerance = 1e-5;
  static constexpr double kGraphLossTolerance = 1e-6;

 private:
  // Create, which may throw std::bad_alloc.
  static absl::StatusOr<std::unique_ptr<Model>> Build(const ModelSpec& spec, Backend& backend,
                                                      int64_t max_batch, uint64_t seed);
  Model(ModelSpec spec, Backend& backend, int64_t max_batch);
  // views_ sized to `rows` examples.
  void MakeViews(int64_t rows);
  // The host phase: the inputs into staged_input_ (a staging backend), the views, every layer's
  // Prepare and, in training, the labels. A layer's error (a bad token id) or a bad label.
  absl::Status Stage(const Batch& batch, bool training);
  // The device phase of Forward: the staged inputs to the device, every layer's Forward.
  const Matrix& Forward(bool training);
  // The device phase of a training step of `rows` examples (the views staged): what a graph
  // records.
  void RunStep(int64_t rows, const GradientFinish& finish);
  // Tells listener_ of every layer's parameters, the last layer's first.
  void TellListener();
  // The same, each layer once the backend's copy of its gradients has landed
  // (Backend::AwaitGradients); stops at a device failure. Sets told_.
  void TellAsCopied();
  // The finish: the gradients on the host (FinishGradients) and the loss of the step of `rows`.
  absl::StatusOr<double> FinishStep(int64_t rows, const GradientFinish& finish);
  // Whether backward streams each layer's gradients to the host (GradientsReady): only when they
  // go there as backward made them (no unscaling, no clipping, not kept on the device).
  static bool StreamsToHost(const GradientFinish& f) {
    return f.where == GradientFinish::Where::kToHost && !f.measures();
  }
  // A staged step of max_batch rows with graphs on (model_graph.cc): replays, or checks first.
  absl::StatusOr<double> GraphStep(const Batch& batch, const GradientFinish& finish);
  absl::StatusOr<double> CheckGraph(const Batch& batch, const GradientFinish& finish);

  ModelSpec spec_;
  Backend& backend_;
  int64_t max_batch_;
  int64_t labels_per_example_ = 1;
  // The output has a time axis (a language model): recurrent state goes from batch to batch.
  bool carries_state_ = false;
  uint64_t step_ = 0;
  float loss_scale_ = 1;
  bool check_finite_ = false;         // loss scaling on
  bool gradients_on_device_ = false;  // SetGradientsOnDevice
  bool last_step_finite_ = true;
  GradientListener* listener_ = nullptr;
  BackwardHook* hook_ = nullptr;
  // This step's RunStep tells listener_ per layer (a streaming step on a backend whose host
  // gradients are final at GradientsReady).
  bool tell_per_layer_ = false;
  // This step's graph replay tells listener_ per layer as the copies land (GraphStep).
  bool tell_as_copied_ = false;
  bool told_ = false;  // listener_ has heard of this step already (per layer)
  ParameterSet params_;
  uint64_t uploaded_version_ = 0;  // params_' values_version() on the device
  std::vector<std::unique_ptr<Layer>> layers_;
  // layers_[i] owns the parameter handles [param_begin_[i], param_begin_[i + 1]).
  std::vector<int> param_begin_;
  std::unique_ptr<SoftmaxCrossEntropy> loss_;
  std::vector<int64_t> widths_;  // elements per example of acts_[i]; acts_[0] is the input
  std::vector<Backend::Buffer> acts_;
  std::vector<Backend::Buffer> grads_;  // d(loss)/d(acts_[i]) for i >= 1
  std::vector<Matrix> views_;           // per call, sized to the batch (capacity reserved once)
  std::vector<Matrix> grad_views_;
  // [max_batch, widths_[0]]: the step's inputs, staged (Backend::stages_inputs() only).
  Backend::HostBuffer staged_input_;
  const float* input_ = nullptr;  // what Forward copies to the device: staged_input_ or the batch's

  GraphState graph_state_ = GraphState::kOff;
  std::unique_ptr<Backend::Graph> graph_;  // recorded for max_batch rows
  // What the graph was recorded with: whether backward streamed gradients to the host
  // (StreamsToHost), and then into which host buffer, and the loss scale (a kernel argument,
  // frozen into the graph).
  bool graph_streams_to_host_ = false;
  const float* graph_grads_ = nullptr;
  float graph_loss_scale_ = 1;
  std::vector<float> check_grads_;  // the eager step's gradients, for the graph's check
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_MODEL_H_
