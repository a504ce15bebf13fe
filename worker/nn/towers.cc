#include "worker/nn/towers.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/nn/clip.h"

namespace psflow::nn {

absl::StatusOr<std::unique_ptr<Towers>> Towers::Create(const ModelSpec& spec,
                                                       const std::vector<Backend*>& backends,
                                                       int64_t max_batch, uint64_t seed) {
  if (backends.empty()) return absl::InvalidArgumentError("towers need at least one backend");
  const int64_t n = static_cast<int64_t>(backends.size());
  std::unique_ptr<Towers> t(new Towers());
  t->backends_ = backends;
  const int64_t rows = (max_batch + n - 1) / n;
  for (size_t k = 0; k < backends.size(); ++k) {
    // Its memory on its own device.
    backends[k]->BindThread();
    absl::StatusOr<std::unique_ptr<Model>> m = Model::Create(spec, *backends[k], rows, seed + k);
    if (!m.ok()) {
      backends[0]->BindThread();
      return absl::Status(m.status().code(), absl::StrCat("tower ", k, ": ", m.status().message()));
    }
    t->towers_.push_back(*std::move(m));
    if (k > 0) t->others_.push_back(&t->towers_.back()->params());
    t->hooks_.push_back(std::make_unique<LayerHook>(*t, static_cast<int>(k)));
  }
  backends[0]->BindThread();
  t->begin_.resize(backends.size());
  t->copied_version_.resize(backends.size(), 0);
  t->rows_.resize(backends.size());
  t->weight_.resize(backends.size());
  t->losses_.resize(backends.size(), 0.0);
  {
    std::lock_guard lock(t->mu_);
    t->marked_.resize(backends.size(), 0);
    t->finished_.resize(backends.size(), 0);
    // At most one entry per parameter: no allocation in a step.
    t->ready_.reserve(t->towers_[0]->params().descs().size());
  }
  for (size_t k = 0; k < backends.size(); ++k) {
    t->threads_.emplace_back([p = t.get(), k] { p->ThreadLoop(static_cast<int>(k)); });
  }
  return t;
}

Towers::~Towers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  // Each model's device memory is released with its own device current.
  for (size_t k = towers_.size(); k-- > 0;) {
    backends_[k]->BindThread();
    towers_[k].reset();
  }
  if (!backends_.empty()) backends_[0]->BindThread();
}

void Towers::ThreadLoop(int k) {
  backends_[static_cast<size_t>(k)]->BindThread();
  uint64_t seen = 0;
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
    }
    if (job == Job::kStep) {
      Step(k);
    } else {
      towers_[static_cast<size_t>(k)]->ResetState();
    }
    {
      std::lock_guard lock(mu_);
      finished_[static_cast<size_t>(k)] = 1;
      --pending_;
    }
    // Also the caller of a streaming step, and tower 0 waiting for this tower's marks.
    cv_.notify_all();
  }
}

void Towers::StartJob(Job job) {
  {
    std::lock_guard lock(mu_);
    job_ = job;
    pending_ = static_cast<int>(towers_.size());
    std::fill(marked_.begin(), marked_.end(), 0);
    std::fill(finished_.begin(), finished_.end(), 0);
    ready_.clear();
    told_ = 0;
    abandoned_ = false;
    ++generation_;
  }
  cv_.notify_all();
}

void Towers::RunOnEveryTower(Job job) {
  StartJob(job);
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return pending_ == 0; });
}

void Towers::RunStreamingStep() {
  StartJob(Job::kStep);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return told_ < ready_.size() || pending_ == 0; });
    if (told_ == ready_.size()) return;  // every tower is done, and every layer told
    const auto [first, last] = ready_[told_++];
    lock.unlock();
    listener_->GradientsReady(first, last);
    lock.lock();
  }
}

void Towers::LayerHook::LayerDone(ParameterSet& params, int first, int last) {
  if (k_ == 0) {
    towers_.AddLayer(params, first, last, marks++);
    return;
  }
  towers_.backends_[static_cast<size_t>(k_)]->MarkGradients(marks++);
  {
    std::lock_guard lock(towers_.mu_);
    ++towers_.marked_[static_cast<size_t>(k_)];
  }
  towers_.cv_.notify_all();
}

void Towers::AddLayer(ParameterSet& params, int first, int last, int mark) {
  {
    // Every tower with rows has made the layer's gradients, or ended without them: it failed,
    // and the step, whose error that is, tells nothing more.
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] {
      for (size_t k = 1; k < towers_.size(); ++k) {
        if (weight_[k] != 0 && marked_[k] <= mark && finished_[k] == 0) return false;
      }
      return true;
    });
    for (size_t k = 1; k < towers_.size(); ++k) {
      if (weight_[k] != 0 && marked_[k] <= mark) abandoned_ = true;
    }
    if (abandoned_) return;
  }
  if (mark == 0) {
    // Before the step's first GradientsReady, every sparse parameter's touched rows are the
    // union of the towers' (their layers set them before forward): a ps client sizes its sparse
    // sends on them then (ps_client.h).
    MergeTouchedRows(params, others_, weight_, /*zero_new_rows=*/true, rows_scratch_);
  }
  backends_[0]->AddLayerGradients(params, others_, std::span<Backend* const>(backends_).subspan(1),
                                  weight_, first, last, mark);
}

void Towers::Relay::GradientsReady(ParameterSet::Handle first, ParameterSet::Handle last) {
  {
    std::lock_guard lock(towers_.mu_);
    if (towers_.abandoned_) return;
    towers_.ready_.emplace_back(first, last);
  }
  towers_.cv_.notify_all();
}

void Towers::Step(int k) {
  const size_t i = static_cast<size_t>(k);
  Model& m = *towers_[i];
  if (rows_[i] == 0) {
    losses_[i] = 0.0;
    return;
  }
  // Tower 0's values, when they changed since this tower last took them; each Model copies its
  // own to its GPU as the step starts.
  const uint64_t version = towers_[0]->params().values_version();
  if (k > 0 && copied_version_[i] != version) {
    m.params().CopyValuesFrom(towers_[0]->params());
    copied_version_[i] = version;
  }
  const int64_t elements = NumElements(m.spec().input_shape);
  const Batch slice{batch_.inputs + begin_[i] * elements,
                    batch_.labels + begin_[i] * m.labels_per_example(), rows_[i]};
  // Left on the device, scaled: the unscaling and the clip apply to the sum. Streaming, tower 0
  // adds the others' layers up as it goes and streams the sums to the host.
  const GradientFinish::Where where =
      streaming_ && k == 0 ? GradientFinish::Where::kToHost : GradientFinish::Where::kRaw;
  losses_[i] = m.ComputeGradients(slice, GradientFinish{0, 1, where});
}

void Towers::SetLossScale(float scale) {
  for (auto& tower : towers_) tower->SetLossScale(scale);
}

absl::StatusOr<double> Towers::ComputeGradients(const Batch& batch, float clip_norm) {
  const int64_t n = static_cast<int64_t>(towers_.size());
  // The first batch % n towers take one row more: tower 0 always has a row.
  int64_t begin = 0;
  for (int64_t k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>(k);
    begin_[i] = begin;
    rows_[i] = batch.size / n + (k < batch.size % n ? 1 : 0);
    weight_[i] =
        static_cast<float>(static_cast<double>(rows_[i]) / static_cast<double>(batch.size));
    begin += rows_[i];
  }
  batch_ = batch;
  const GradientFinish finish = towers_[0]->Finish(clip_norm);
  streaming_ = listener_ != nullptr && !graphs_ && finish.where == GradientFinish::Where::kToHost &&
               !finish.measures();
  for (size_t k = 0; k < towers_.size(); ++k) {
    hooks_[k]->marks = 0;
    towers_[k]->SetBackwardHook(streaming_ ? hooks_[k].get() : nullptr);
  }
  towers_[0]->SetGradientListener(streaming_ ? &relay_ : nullptr);
  if (streaming_) {
    RunStreamingStep();
    // tower(0) used on its own is a model like any other.
    for (auto& tower : towers_) tower->SetBackwardHook(nullptr);
    towers_[0]->SetGradientListener(nullptr);
  } else {
    RunOnEveryTower(Job::kStep);
  }
  double loss = 0;
  for (size_t k = 0; k < towers_.size(); ++k) {
    if (!losses_[k].ok()) {
      return absl::Status(losses_[k].status().code(),
                          absl::StrCat("tower ", k, ": ", losses_[k].status().message()));
    }
    loss += weight_[k] * *losses_[k];
  }
  if (streaming_) {  // added up and on the host: nothing measured
    last_step_finite_ = true;
    return loss;
  }
  // The sum is finished as one model's gradients would be (every tower has the same scale).
  absl::StatusOr<double> norm = backends_[0]->ReduceGradients(params(), others_, weight_, finish);
  if (!norm.ok()) return norm.status();
  last_step_finite_ = !finish.measures() || std::isfinite(*norm);
  return loss;
}

void Towers::ResetState() { RunOnEveryTower(Job::kResetState); }

absl::StatusOr<std::unique_ptr<ParameterUpdate>> Towers::MakeUpdate(const Optimizer& optimizer) {
  // The caller's thread queues the update on the first GPU.
  backends_[0]->BindThread();
  ASSIGN_OR_RETURN(std::unique_ptr<ParameterUpdate> update, towers_[0]->MakeUpdate(optimizer));
  if (!update->on_device() || towers_.size() == 1) return update;
  return WithHooks(
      std::move(update),
      [this] {
        backends_[0]->BroadcastParameters(params(), others_,
                                          std::span<Backend* const>(backends_).subspan(1));
        // Every other tower now computes with tower 0's device values, including one that sat
        // out the steps since tower 0's host values last changed: neither those host values
        // (behind the device's) nor its own are to be uploaded over them. The towers' threads
        // are parked (RunOnEveryTower hands each step over under mu_).
        const uint64_t version = params().values_version();
        for (size_t k = 1; k < towers_.size(); ++k) {
          copied_version_[k] = version;
          towers_[k]->DeviceValuesAreCurrent();
        }
      },
      nullptr);
}

absl::Status Towers::DownloadParameters() {
  backends_[0]->BindThread();
  return towers_[0]->DownloadParameters();
}

}  // namespace psflow::nn
