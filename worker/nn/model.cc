#include "worker/nn/model.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <new>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"

namespace psflow::nn {
namespace {

// The logits as one row per prediction.
Matrix Predictions(const Matrix& m, int64_t classes) {
  return Matrix{m.data, m.size() / classes, classes, m.device};
}

}  // namespace

Model::Model(ModelSpec spec, Backend& backend, int64_t max_batch)
    : spec_(std::move(spec)), backend_(backend), max_batch_(max_batch) {}

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const ModelSpec& spec, Backend& backend,
                                                     int64_t max_batch, uint64_t seed) {
  // With at most 2^31 values per example in a layer (a model file's check), every batch buffer's
  // size in bytes fits 63 bits: no layer's sizes overflow.
  if (max_batch > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.name, ": a batch of ", max_batch, " examples; at most ", kMaxBatch));
  }
  try {
    return Build(spec, backend, max_batch, seed);
  } catch (const std::exception& e) {
    // std::bad_alloc, or std::length_error for a size past what a vector holds: the only
    // exceptions building throws.
    return absl::ResourceExhaustedError(absl::StrCat(
        spec.name, ": out of host memory for its parameters or its activations (", max_batch,
        " examples per batch; ", e.what(), "): use a smaller model or --batch_size"));
  }
}

absl::StatusOr<std::unique_ptr<Model>> Model::Build(const ModelSpec& spec, Backend& backend,
                                                    int64_t max_batch, uint64_t seed) {
  if (max_batch < 1) return absl::InvalidArgumentError("model batch size must be >= 1");
  std::unique_ptr<Model> m(new Model(spec, backend, max_batch));
  Shape shape = spec.input_shape;
  m->widths_.push_back(NumElements(shape));
  m->param_begin_.push_back(0);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    auto layer = backend.MakeLayer(spec.layers[i], spec.LayerName(i));
    if (!layer.ok()) return layer.status();
    const BuildContext ctx{&m->params_, max_batch, seed * 1000003u + i};
    auto out = (*layer)->Build(shape, ctx);
    if (!out.ok()) {  // the layer's code: a bad shape, out of memory, no kernel on this GPU
      return absl::Status(out.status().code(), absl::StrCat(spec.name, ": layer ", (*layer)->name(),
                                                            ": ", out.status().message()));
    }
    shape = *out;
    m->widths_.push_back(NumElements(shape));
    m->layers_.push_back(*std::move(layer));
    m->param_begin_.push_back(static_cast<int>(m->params_.descs().size()));
  }
  if (shape.empty() || shape.back() != spec.num_classes) {
    return absl::InvalidArgumentError(absl::StrCat(spec.name, ": last layer outputs [",
                                                   absl::StrJoin(shape, ","), "], expected [..., ",
                                                   spec.num_classes, "] logits"));
  }
  m->labels_per_example_ = NumElements(shape) / spec.num_classes;
  m->carries_state_ = shape.size() > 1;
  m->params_.Finalize();
  if (absl::Status s = backend.AttachParameters(m->params_); !s.ok()) return s;
  m->loss_ = backend.MakeSoftmaxCrossEntropy();
  for (size_t i = 0; i < m->widths_.size(); ++i) {
    m->acts_.push_back(backend.Allocate(max_batch * m->widths_[i]));
    m->grads_.push_back(backend.Allocate(i == 0 ? 0 : max_batch * m->widths_[i]));
    if (m->acts_.back() == nullptr || m->grads_.back() == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat(spec.name, ": out of device memory for the activations of ",
                       i == 0 ? std::string("the input") : m->layers_[i - 1]->name(), " (",
                       max_batch, " x ", m->widths_[i], " floats)"));
    }
  }
  if (backend.stages_inputs()) m->staged_input_ = backend.AllocateHost(max_batch * m->widths_[0]);
  if (backend.stages_inputs() && m->staged_input_ == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat(spec.name, ": out of host memory for staging the inputs (", max_batch, " x ",
                     m->widths_[0], " floats)"));
  }
  m->views_.reserve(m->widths_.size());
  m->grad_views_.reserve(m->widths_.size());
  return m;
}

void Model::MakeViews(int64_t rows) {
  views_.clear();
  grad_views_.clear();
  for (size_t i = 0; i < acts_.size(); ++i) {
    views_.push_back(Matrix{acts_[i].get(), rows, widths_[i], backend_.device()});
    grad_views_.push_back(Matrix{grads_[i].get(), rows, widths_[i], backend_.device()});
  }
}

absl::Status Model::Stage(const Batch& batch, bool training) {
  assert(batch.size >= 1 && batch.size <= max_batch_);
  if (uploaded_version_ != params_.values_version()) UploadParameters();
  // A classifier's examples are independent: no batch starts from the state another left.
  if (!carries_state_) ResetState();
  // Staged at one address: the device phase's copy (recorded or not) reads this batch's inputs.
  // A backend that reads host memory copies them from the batch itself.
  input_ = batch.inputs;
  if (staged_input_ != nullptr) {
    std::memcpy(staged_input_.get(), batch.inputs,
                static_cast<size_t>(batch.size * widths_[0]) * sizeof(float));
    input_ = staged_input_.get();
  }
  MakeViews(batch.size);
  const RunContext ctx{&params_, training, step_, batch.inputs};
  for (const auto& layer : layers_) RETURN_IF_ERROR(layer->Prepare(ctx, batch.size));
  if (!training) return absl::OkStatus();
  return loss_->SetLabels(batch.labels, batch.size * labels_per_example_, spec_.num_classes);
}

absl::Status Model::ListRowsRead(const Batch& batch, ParameterSet& into) {
  for (const auto& layer : layers_) {
    RETURN_IF_ERROR(layer->ListRowsRead(batch.inputs, batch.size, into));
  }
  // Without a sparse parameter there are no rows to leave out: pulls stay whole.
  into.set_pulls_rows(std::any_of(into.descs().begin(), into.descs().end(),
                                  [](const ParameterDesc& d) { return d.sparse; }));
  return absl::OkStatus();
}

const Matrix& Model::Forward(bool training) {
  const int64_t rows = views_[0].rows;
  backend_.CopyToDevice(input_, acts_[0].get(), rows * widths_[0]);
  const RunContext ctx{&params_, training, step_, nullptr};
  for (size_t l = 0; l < layers_.size(); ++l) layers_[l]->Forward(ctx, views_[l], views_[l + 1]);
  return views_.back();
}

Model::~Model() {
  graph_.reset();
  backend_.DetachParameters(params_);
}

absl::StatusOr<std::unique_ptr<ParameterUpdate>> Model::MakeUpdate(const Optimizer& optimizer) {
  ASSIGN_OR_RETURN(std::unique_ptr<ParameterUpdate> update,
                   backend_.MakeUpdate(optimizer, params_));
  if (!update->on_device()) return update;
  SetGradientsOnDevice(true);
  return WithHooks(std::move(update), nullptr, [this] { SetGradientsOnDevice(false); });
}

absl::StatusOr<double> Model::ComputeGradients(const Batch& batch, float clip_norm) {
  return ComputeGradients(batch, Finish(clip_norm));
}

absl::StatusOr<double> Model::ComputeGradients(const Batch& batch, const GradientFinish& finish) {
  RETURN_IF_ERROR(Stage(batch, /*training=*/true));
  const bool tell = listener_ != nullptr && StreamsToHost(finish);
  const bool final_when_ready = backend_.host_gradients_final_when_ready();
  told_ = false;
  if (batch.size == max_batch_ && hook_ == nullptr &&
      (graph_state_ == GraphState::kUnchecked || graph_state_ == GraphState::kReplaying)) {
    // A replay tells as its copies land; a graph check, which may run the step more than once,
    // tells of the result only.
    tell_as_copied_ = tell && !final_when_ready;
    absl::StatusOr<double> loss = GraphStep(batch, finish);
    tell_as_copied_ = false;
    if (loss.ok() && tell && !told_) TellListener();
    return loss;
  }
  tell_per_layer_ = tell && final_when_ready;
  RunStep(batch.size, finish);
  tell_per_layer_ = false;
  // Backward is queued on the device: tell of each layer as its copy lands, while the device
  // goes on with the layers below.
  if (tell && !final_when_ready) TellAsCopied();
  ++step_;
  absl::StatusOr<double> loss = FinishStep(batch.size, finish);
  if (loss.ok() && tell && !told_) TellListener();
  return loss;
}

void Model::TellListener() {
  for (size_t l = layers_.size(); l-- > 0;) {
    if (param_begin_[l] < param_begin_[l + 1]) {
      listener_->GradientsReady(param_begin_[l], param_begin_[l + 1]);
    }
  }
}

void Model::TellAsCopied() {
  // A step whose device failed tells nothing more: FinishStep reports the failure.
  told_ = true;
  int k = 0;
  for (size_t l = layers_.size(); l-- > 0;) {
    if (param_begin_[l] < param_begin_[l + 1]) {
      if (!backend_.AwaitGradients(k++)) return;
      listener_->GradientsReady(param_begin_[l], param_begin_[l + 1]);
    }
  }
}

void Model::RunStep(int64_t rows, const GradientFinish& finish) {
  const Matrix& logits = Forward(/*training=*/true);
  backend_.ZeroGradients(params_);
  const size_t n = layers_.size();
  // Backward runs on loss_scale_ times the loss; FinishStep's loss is unscaled.
  const float mean = 1.0f / static_cast<float>(rows);
  loss_->ForwardBackward(Predictions(logits, spec_.num_classes), loss_scale_ * mean,
                         Predictions(grad_views_[n], spec_.num_classes));
  // Layer by layer to the host only when nothing has to see all gradients first.
  const bool stream_to_host = StreamsToHost(finish);
  const RunContext ctx{&params_, true, step_, nullptr, loss_scale_};
  for (size_t l = n; l-- > 0;) {
    layers_[l]->Backward(ctx, views_[l], views_[l + 1], grad_views_[l + 1],
                         l == 0 ? nullptr : &grad_views_[l]);
    if (hook_ != nullptr && param_begin_[l] < param_begin_[l + 1]) {
      hook_->LayerDone(params_, param_begin_[l], param_begin_[l + 1]);
    }
    if (stream_to_host && param_begin_[l] < param_begin_[l + 1]) {
      backend_.GradientsReady(params_, param_begin_[l], param_begin_[l + 1]);
      if (tell_per_layer_) {
        listener_->GradientsReady(param_begin_[l], param_begin_[l + 1]);
        told_ = true;
      }
    }
  }
}

absl::StatusOr<double> Model::FinishStep(int64_t rows, const GradientFinish& finish) {
  absl::StatusOr<double> norm = backend_.FinishGradients(params_, finish);
  if (!norm.ok()) return norm.status();
  last_step_finite_ = !finish.measures() || std::isfinite(*norm);
  const float mean = 1.0f / static_cast<float>(rows);
  double loss = loss_->Loss() * mean;
  for (size_t l = layers_.size(); l-- > 0;) loss += layers_[l]->RegularizationLoss(params_);
  return loss;
}

absl::StatusOr<SoftmaxCrossEntropy::Eval> Model::Evaluate(const Batch& batch) {
  RETURN_IF_ERROR(Stage(batch, /*training=*/false));
  const SoftmaxCrossEntropy::Eval eval =
      loss_->Evaluate(Predictions(Forward(/*training=*/false), spec_.num_classes), batch.labels);
  if (absl::Status s = backend_.Synchronize(); !s.ok()) return s;
  return eval;
}

void Model::ResetState() {
  for (auto& layer : layers_) layer->ResetState();
}

}  // namespace psflow::nn
