#include "worker/nn/model.h"

#include <cassert>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::nn {
namespace {

std::string LayerName(const LayerSpec& spec, size_t index) {
  const char* kind = std::holds_alternative<DenseSpec>(spec) ? "dense" : "activation";
  return absl::StrCat(kind, index);
}

}  // namespace

Model::Model(ModelSpec spec, Backend& backend, int64_t max_batch)
    : spec_(std::move(spec)), backend_(backend), max_batch_(max_batch) {}

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const ModelSpec& spec, Backend& backend,
                                                     int64_t max_batch) {
  if (max_batch < 1) return absl::InvalidArgumentError("model batch size must be >= 1");
  std::unique_ptr<Model> m(new Model(spec, backend, max_batch));
  Shape shape = spec.input_shape;
  m->widths_.push_back(NumElements(shape));
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    auto layer = backend.MakeLayer(spec.layers[i], LayerName(spec.layers[i], i));
    if (!layer.ok()) return layer.status();
    auto out = (*layer)->Build(shape, m->params_);
    if (!out.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec.name, ": layer ", (*layer)->name(), ": ", out.status().message()));
    }
    shape = *out;
    m->widths_.push_back(NumElements(shape));
    m->layers_.push_back(*std::move(layer));
  }
  if (shape != Shape{spec.num_classes}) {
    return absl::InvalidArgumentError(absl::StrCat(spec.name, ": last layer outputs [",
                                                   absl::StrJoin(shape, ","), "], expected [",
                                                   spec.num_classes, "] logits"));
  }
  m->params_.Finalize();
  m->loss_ = backend.MakeSoftmaxCrossEntropy();
  for (size_t i = 0; i < m->widths_.size(); ++i) {
    m->acts_.push_back(backend.Allocate(max_batch * m->widths_[i]));
    m->grads_.push_back(backend.Allocate(i == 0 ? 0 : max_batch * m->widths_[i]));
  }
  m->views_.reserve(m->widths_.size());
  return m;
}

Matrix Model::View(const Backend::Buffer& buffer, size_t i, int64_t rows) const {
  return Matrix{buffer.get(), rows, widths_[i], backend_.device()};
}

const Matrix& Model::Forward(const Batch& batch, bool training) {
  assert(batch.size >= 1 && batch.size <= max_batch_);
  backend_.CopyToDevice(batch.inputs, acts_[0].get(), batch.size * widths_[0]);
  views_.clear();
  for (size_t i = 0; i < acts_.size(); ++i) views_.push_back(View(acts_[i], i, batch.size));
  const RunContext ctx{&params_, training};
  for (size_t l = 0; l < layers_.size(); ++l) layers_[l]->Forward(ctx, views_[l], views_[l + 1]);
  return views_.back();
}

float Model::ComputeGradients(const Batch& batch) {
  const Matrix& logits = Forward(batch, /*training=*/true);
  params_.ZeroGrads();
  const size_t n = layers_.size();
  const float loss = loss_->ForwardBackward(logits, batch.labels, View(grads_[n], n, batch.size));
  const RunContext ctx{&params_, true};
  for (size_t l = n; l-- > 0;) {
    const Matrix dy = View(grads_[l + 1], l + 1, batch.size);
    const Matrix dx = View(grads_[l], l, batch.size);
    layers_[l]->Backward(ctx, views_[l], views_[l + 1], dy, l == 0 ? nullptr : &dx);
  }
  return loss;
}

SoftmaxCrossEntropy::Eval Model::Evaluate(const Batch& batch) {
  return loss_->Evaluate(Forward(batch, /*training=*/false), batch.labels);
}

}  // namespace psflow::nn
