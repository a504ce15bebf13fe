#include "ps/ps_state.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <memory>

#include "absl/strings/str_cat.h"
#include "core/byte_source.h"
#include "core/chunk_plan.h"
#include "core/frame.h"
#include "core/log.h"
#include "core/same_training.h"
#include "core/status_macros.h"
#include "core/wire_type.h"
#include "ps/worker_membership.h"

namespace psflow {
namespace {

// What a task that is not ready answers a worker's exchange (ps_state.h).
absl::Status NotInitialised() {
  return absl::UnavailableError(
      "variables are not initialised yet (a ps task restarted without a checkpoint waits for the "
      "chief to create them again)");
}

}  // namespace

PsState::PsState(Options options, PsMetrics* metrics)
    : options_(std::move(options)),
      metrics_(metrics),
      coordinator_(options_.incomplete_push_timeout) {
  if (!options_.checkpoint_dir.empty()) {
    checkpoints_.emplace(options_.checkpoint_dir, options_.task, options_.keep_checkpoints);
  }
  coordinator_.SetExpiryHandler([this] { ExpirePushes(); });
}

PsState::~PsState() { coordinator_.Stop(); }

absl::Status PsState::Activate(const proto::InitializeRequest& request,
                               std::unique_ptr<PartitionStore> store,
                               std::unique_ptr<Optimizer> optimizer, int64_t step,
                               std::optional<std::vector<int>> counted) {
  request_ = request;
  request_.clear_counted_workers();  // a checkpoint's, not the chief's
  fingerprint_ = request.fingerprint();
  sync_ = request.sync().sync_replicas();
  learning_rate_.store(request.optimizer().learning_rate());
  store_ = std::move(store);
  optimizer_ = std::move(optimizer);
  if (metrics_ != nullptr) {
    metrics_->variable_bytes.Set(static_cast<double>(store_->bytes()));
    metrics_->learning_rate.Set(request.optimizer().learning_rate());
    metrics_->global_step.Set(static_cast<double>(step));
    for (int i = 0; i < store_->size(); ++i) {
      metrics_->SetPartitionBytes(store_->partition_name(i),
                                  static_cast<double>(store_->partition_bytes(i)));
    }
  }
  RETURN_IF_ERROR(
      coordinator_.Start(request.sync(), step, store_->partition_elements(), std::move(counted)));
  if (metrics_ != nullptr) metrics_->workers.Set(coordinator_.workers());
  return absl::OkStatus();
}

absl::StatusOr<bool> PsState::RestoreFromCheckpoint() {
  if (!checkpoints_) return false;
  ASSIGN_OR_RETURN(std::optional<psflow::Checkpoint> ckpt, checkpoints_->RestoreNewest());
  if (!ckpt) return false;
  proto::InitializeRequest request;
  if (!request.ParseFromString(ckpt->metadata)) {
    return absl::DataLossError(
        absl::StrCat("checkpoint in ", checkpoints_->path(), ": metadata does not parse"));
  }
  ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(request.optimizer()));
  ASSIGN_OR_RETURN(
      auto store,
      PartitionStore::Restore(request, *optimizer, request.sync().sync_replicas(), *ckpt,
                              options_.max_variable_bytes, options_.max_variable_bytes_source));
  std::lock_guard lock(init_mu_);
  // The workers it counted when it was written (a scaled job's), else the job's first ones.
  std::optional<std::vector<int>> counted;
  if (request.has_counted_workers()) {
    counted.emplace(request.counted_workers().workers().begin(),
                    request.counted_workers().workers().end());
  }
  RETURN_IF_ERROR(Activate(request, std::move(store), std::move(optimizer), ckpt->global_step,
                           std::move(counted)));
  PSFLOW_LOG(INFO) << "restored " << request.partitions_size() << " partition(s), "
                   << store_->bytes()
                   << " bytes, from the checkpoint at global step=" << ckpt->global_step << " in "
                   << checkpoints_->path();
  return true;
}

absl::StatusOr<proto::InitializeResponse> PsState::Initialize(
    const proto::InitializeRequest& request) {
  std::lock_guard lock(init_mu_);
  proto::InitializeResponse response;
  if (coordinator_.ready() || (store_ != nullptr && !request.commit())) {
    if (request.fingerprint() != fingerprint_) {
      return absl::FailedPreconditionError(
          absl::StrCat("this ps task holds a different model or placement (fingerprint ",
                       fingerprint_, ", the chief's is ", request.fingerprint(), ")"));
    }
    if (coordinator_.ready()) {
      RETURN_IF_ERROR(CheckSameTraining(request_.optimizer(), coordinator_.sync(),
                                        request.optimizer(), request.sync()));
      response.set_initialized_now(false);
      response.set_global_step(coordinator_.step());
      return response;
    }
  }
  if (!request.commit()) {
    if (store_ == nullptr) {
      ASSIGN_OR_RETURN(auto optimizer, MakeOptimizer(request.optimizer()));
      // Checked now: the commit must not fail on it after the values were sent.
      RETURN_IF_ERROR(StepCoordinator::CheckSyncConfig(request.sync()));
      ASSIGN_OR_RETURN(
          store_,
          PartitionStore::Create(request, *optimizer, request.sync().sync_replicas(),
                                 options_.max_variable_bytes, options_.max_variable_bytes_source));
      optimizer_ = std::move(optimizer);
      request_ = request;
      fingerprint_ = request.fingerprint();
    }
    // A restarted chief re-assigns into the partitions already created.
    response.set_initialized_now(true);
    return response;
  }
  if (store_ == nullptr) {
    return absl::FailedPreconditionError("initialize commit before the partitions were created");
  }
  if (request.fingerprint() != fingerprint_) {
    return absl::FailedPreconditionError("initialize commit for a different model");
  }
  if (request.start_step() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("initialize commit at step ", request.start_step(), " (must be >= 0)"));
  }
  auto store = std::move(store_);
  auto optimizer = std::move(optimizer_);
  const proto::InitializeRequest created = request_;
  const int64_t start = request.start_step();
  // A task the chief re-creates (start > 0, it lost its state) does not know who has left or
  // joined since the job started: every worker counts from its first push (the first step may
  // then average fewer workers than the job has).
  std::optional<std::vector<int>> counted;
  if (start > 0) counted.emplace();
  RETURN_IF_ERROR(
      Activate(created, std::move(store), std::move(optimizer), start, std::move(counted)));
  if (start > 0) {
    PSFLOW_LOG(WARNING) << "ps task " << options_.task
                        << " lost its training progress (restarted without a checkpoint): its "
                           "variables were re-created from the chief's copy at global step "
                        << start
                        << "; the updates the chief had not pulled and the optimizer's slots are "
                           "lost; the global step resumes at "
                        << start;
  }
  PSFLOW_LOG(INFO) << "initialised " << created.partitions_size() << " partition(s), "
                   << store_->bytes() << " bytes; "
                   << (sync_
                           ? absl::StrCat("sync, aggregating ",
                                          created.sync().replicas_to_aggregate() == 0
                                              ? std::string("every worker's push")
                                              : absl::StrCat(created.sync().replicas_to_aggregate(),
                                                             " workers' pushes"),
                                          " per step, ", created.sync().total_workers(),
                                          " worker(s) to start with")
                           : std::string("async"))
                   << ", optimizer " << optimizer_->config().name();
  response.set_initialized_now(true);
  response.set_global_step(start);
  return response;
}

proto::WaitReadyResponse PsState::ReadyResponse() const {
  proto::WaitReadyResponse r;
  const int64_t step = coordinator_.step();
  r.set_ready(step >= 0);
  r.set_global_step(std::max<int64_t>(step, 0));
  if (step >= 0) {
    r.set_fingerprint(fingerprint_);
    *r.mutable_sync() = coordinator_.sync();
    r.set_learning_rate(learning_rate_.load());
    r.set_optimizer(request_.optimizer().name());
  }
  return r;
}

absl::StatusOr<float> PsState::SetLearningRate(float learning_rate) {
  if (!coordinator_.ready()) return NotInitialised();
  if (!(learning_rate > 0) || !std::isfinite(learning_rate)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning rate must be > 0 and finite, got ", learning_rate));
  }
  const float old = learning_rate_.exchange(learning_rate);
  if (old != learning_rate) {
    PSFLOW_LOG(INFO) << "learning rate " << old << " -> " << learning_rate;
  }
  if (metrics_ != nullptr) metrics_->learning_rate.Set(learning_rate);
  return learning_rate;
}

absl::StatusOr<int64_t> PsState::Leave(int worker) {
  if (!coordinator_.ready()) return NotInitialised();
  if (worker < 0 || worker >= kMaxWorkers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "leave from worker ", worker, "; worker indexes go from 0 to ", kMaxWorkers - 1));
  }
  StepCoordinator::Wakeups wake;
  {
    // Exclusive: no push is between its Admit and its ChunkAccumulated, so the worker's place
    // and staged pieces are settled when it gives them up.
    std::unique_lock lock(update_mu_);
    wake = ApplyReady(coordinator_.Leave(worker), learning_rate_.load());
  }
  StepCoordinator::Wake(std::move(wake));
  if (metrics_ != nullptr) metrics_->workers.Set(coordinator_.workers());
  return coordinator_.step();
}

StepCoordinator::Wakeups PsState::ApplyReady(const StepCoordinator::Progress& progress,
                                             float learning_rate) {
  if (!progress.given_up.empty()) {
    if (sync_) {
      store_->DropStaged(progress.given_up);
    } else {
      ForgetCaptured(progress.given_up);
    }
  }
  // The step cannot advance while these partitions are being applied: this is the step s whose
  // average they get (the optimizer's step s + 1). No workers (every admitted one gone): the
  // partitions complete the step without an update.
  const int64_t step = coordinator_.step();
  if (!progress.apply.empty() && !progress.workers.empty()) {
    const float scale = 1.0f / static_cast<float>(progress.workers.size());
    for (uint32_t p : progress.apply) {
      store_->ApplyStaged(p, progress.workers, scale, *optimizer_, learning_rate, step + 1);
    }
  }
  bool completed = false;
  StepCoordinator::Wakeups wake = coordinator_.PartitionsApplied(progress, &completed);
  // This call completed the step: another thread applying its last partitions at the same time
  // may see the step move too, but only one call completes it.
  if (metrics_ != nullptr && completed) metrics_->updates.Increment();
  return wake;
}

void PsState::ExpirePushes() {
  StepCoordinator::Wakeups wake;
  {
    // Exclusive, as Leave: no push is between its Admit and its ChunkAccumulated.
    std::unique_lock lock(update_mu_);
    const StepCoordinator::Progress progress = coordinator_.ExpirePushes();
    for (int worker : progress.given_up) {
      PSFLOW_LOG(WARNING) << "ps task " << options_.task << ": worker " << worker
                          << "'s push stayed incomplete for "
                          << std::chrono::duration<double>(options_.incomplete_push_timeout).count()
                          << " s (killed mid-push?): given up"
                          << (sync_ ? "; its pieces are dropped and the step goes on without it"
                                    : "");
    }
    if (!coordinator_.ready() || progress.empty()) {
      return;
    }
    wake = ApplyReady(progress, learning_rate_.load());
  }
  StepCoordinator::Wake(std::move(wake));
  if (metrics_ != nullptr) {
    metrics_->global_step.Set(static_cast<double>(coordinator_.step()));
    metrics_->workers.Set(coordinator_.workers());
  }
}

void PsState::Capture(const proto::TransferHeader& header,
                      const StepCoordinator::Admission& admission, ByteSource& frame,
                      float learning_rate) {
  std::lock_guard lock(capture_mu_);
  auto it = std::find_if(capture_open_.begin(), capture_open_.end(),
                         [&](const auto& open) { return open.worker == header.worker(); });
  if (it == capture_open_.end()) return;
  if (it->counted_at == admission.step) {
    store_->ApplyGradientsTo(capture_, header, frame, *optimizer_, learning_rate,
                             admission.step + 1);
    if (--it->chunks_left > 0) return;
  }
  // Done, or the worker opened another push (it restarted): the one in the copy ends here.
  capture_open_.erase(it);
  if (capture_open_.empty()) capture_done_.notify_all();
}

void PsState::ForgetCaptured(std::span<const int> workers) {
  std::lock_guard lock(capture_mu_);
  for (int worker : workers) {
    std::erase_if(capture_open_, [worker](const auto& open) { return open.worker == worker; });
  }
  if (capture_open_.empty()) capture_done_.notify_all();
}

absl::Status PsState::CheckFrame(const proto::TransferHeader& header) const {
  if (header.fingerprint() != fingerprint_) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame for model fingerprint ", header.fingerprint(), "; this ps task holds ",
                     fingerprint_, " (a different model or placement)"));
  }
  return WireTypeOf(header.wire_dtype()).status();
}

absl::Status PsState::CheckPayload(const proto::TransferHeader& header, int64_t elements,
                                   size_t payload_bytes) const {
  const uint64_t expected =
      static_cast<uint64_t>(elements) * WireBytes(*WireTypeOf(header.wire_dtype()));
  if (expected != payload_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "segments describe ", expected, " payload bytes; the frame has ", payload_bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::TransferReply> PsState::Push(ByteSource& frame) {
  proto::TransferHeader h;
  RETURN_IF_ERROR(DecodeFrameHeader(frame, &h));
  proto::TransferReply reply;
  if (h.kind() == proto::TK_ASSIGN) {
    std::lock_guard lock(init_mu_);
    if (coordinator_.ready()) {
      return absl::FailedPreconditionError("initial values after the variables were committed");
    }
    if (store_ == nullptr) return absl::FailedPreconditionError("initial values before initialize");
    RETURN_IF_ERROR(CheckFrame(h));
    ASSIGN_OR_RETURN(const int64_t n, store_->CheckSegments(h, /*allow_sparse=*/false));
    RETURN_IF_ERROR(CheckPayload(h, n, frame.remaining()));
    if (metrics_ != nullptr) {
      metrics_->received_bytes.Increment(static_cast<double>(frame.remaining()));
    }
    store_->Assign(h, frame);
    return reply;
  }
  if (h.kind() != proto::TK_GRADIENT) {
    return absl::InvalidArgumentError(
        absl::StrCat("push of kind ", proto::TransferKind_Name(h.kind())));
  }
  if (!coordinator_.ready()) return NotInitialised();
  RETURN_IF_ERROR(CheckFrame(h));
  ASSIGN_OR_RETURN(const int64_t n, store_->CheckSegments(h, /*allow_sparse=*/true));
  RETURN_IF_ERROR(CheckPayload(h, n, frame.remaining()));
  const auto payload_bytes = static_cast<double>(frame.remaining());
  // The step advances and the gradients land under one shared hold of update_mu_, so a
  // checkpoint (exclusive) never sees one without the other.
  StepCoordinator::Wakeups wake;
  {
    std::shared_lock lock(update_mu_);
    if (updates_stopped_) {
      return absl::UnavailableError("the ps task is stopping: gradients not applied");
    }
    ASSIGN_OR_RETURN(StepCoordinator::Admission admission, coordinator_.Admit(h));
    if (metrics_ != nullptr) {
      metrics_->pushes.Increment();
      metrics_->received_bytes.Increment(payload_bytes);
    }
    const float lr = learning_rate_.load();
    switch (admission.verdict) {
      case StepCoordinator::Verdict::kApply:
        if (capturing_) {
          ByteSource copy = frame;  // a checkpoint is completing its copy: rare, may allocate
          store_->ApplyGradients(h, frame, *optimizer_, lr, admission.step + 1);
          Capture(h, admission, copy, lr);
        } else {
          store_->ApplyGradients(h, frame, *optimizer_, lr, admission.step + 1);
        }
        if (metrics_ != nullptr) {
          // A push counts once, as it opens (its first chunk to arrive); its examples ride on
          // chunk 0.
          if (admission.opens_push) {
            metrics_->updates.Increment();
            metrics_->staleness.Observe(static_cast<double>(admission.staleness));
          }
          if (h.chunk() == 0) metrics_->examples.Increment(static_cast<double>(h.examples()));
        }
        break;
      case StepCoordinator::Verdict::kAccumulate:
        store_->Stage(h, frame);
        if (h.chunk() == 0 && metrics_ != nullptr) {
          metrics_->examples.Increment(static_cast<double>(h.examples()));
        }
        wake = ApplyReady(coordinator_.ChunkAccumulated(h), lr);
        break;
      case StepCoordinator::Verdict::kDropStale:
        reply.set_dropped(true);
        if (metrics_ != nullptr) metrics_->dropped_stale.Increment();
        break;
      case StepCoordinator::Verdict::kDropBackup:
        reply.set_dropped(true);
        if (metrics_ != nullptr) metrics_->dropped_backup.Increment();
        break;
      case StepCoordinator::Verdict::kDropGivenUp:
        reply.set_dropped(true);
        if (metrics_ != nullptr) metrics_->dropped_given_up.Increment();
        break;
      case StepCoordinator::Verdict::kDropJoining:
        reply.set_dropped(true);
        if (metrics_ != nullptr) metrics_->dropped_joining.Increment();
        break;
      case StepCoordinator::Verdict::kDropRepeated:
        reply.set_dropped(true);
        if (metrics_ != nullptr) metrics_->dropped_repeated.Increment();
        break;
    }
    // Async: the calls parked for the step this push opened.
    if (!admission.wake.empty()) wake = std::move(admission.wake);
  }
  // Parked pulls take update_mu_ themselves: answer them after releasing it.
  StepCoordinator::Wake(std::move(wake));
  const int64_t step = coordinator_.step();
  if (metrics_ != nullptr) {
    metrics_->global_step.Set(static_cast<double>(step));
    metrics_->workers.Set(coordinator_.workers());
  }
  reply.set_global_step(step);
  return reply;
}

absl::StatusOr<int64_t> PsState::CheckPull(ByteSource& frame, proto::TransferHeader* header) const {
  RETURN_IF_ERROR(DecodeFrameHeader(frame, header));
  if (header->kind() != proto::TK_PULL) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull of kind ", proto::TransferKind_Name(header->kind())));
  }
  if (!coordinator_.ready()) return NotInitialised();
  RETURN_IF_ERROR(CheckFrame(*header));
  if (frame.remaining() != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull request with ", frame.remaining(), " payload bytes"));
  }
  ASSIGN_OR_RETURN(const int64_t n, store_->CheckSegments(*header, /*allow_sparse=*/true));
  const int64_t bytes = n * static_cast<int64_t>(WireBytes(*WireTypeOf(header->wire_dtype())));
  if (bytes > kChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("pull of ", bytes, " bytes in one call (limit ", kChunkBytes, ")"));
  }
  return bytes;
}

proto::TransferReply PsState::FillPull(const proto::TransferHeader& header,
                                       std::byte* payload) const {
  return ReadPull(header, [&] { store_->CopyOut(header, payload); });
}

proto::TransferReply PsState::PinPull(
    const proto::TransferHeader& header,
    absl::FunctionRef<void(const VersionedValues::Pin&)> add) const {
  return ReadPull(header, [&] { store_->PinOut(header, add); });
}

proto::TransferReply PsState::ReadPull(const proto::TransferHeader& header,
                                       absl::FunctionRef<void()> read) const {
  proto::TransferReply reply;
  const std::vector<uint32_t> partitions = PartitionsOf(header);
  std::shared_lock lock(update_mu_);
  read();
  // Under the same hold as the read: the step these values are at (a partition applied ahead of
  // the rest of its step is at the next one).
  reply.set_global_step(coordinator_.step_of(partitions));
  return reply;
}

void PsState::ParkPull(const proto::TransferHeader& header,
                       std::chrono::steady_clock::time_point deadline,
                       std::function<void(bool reached)> done) {
  coordinator_.Park(header.step(), PartitionsOf(header), deadline, std::move(done));
}

std::vector<uint32_t> PsState::PartitionsOf(const proto::TransferHeader& header) {
  std::vector<uint32_t> partitions;
  partitions.reserve(static_cast<size_t>(header.segments_size()));
  for (const proto::Segment& s : header.segments()) partitions.push_back(s.partition());
  return partitions;
}

int64_t PsState::bytes() const {
  if (!coordinator_.ready()) return 0;
  return store_->bytes();
}

bool PsState::StopUpdates(std::chrono::steady_clock::duration wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    int64_t step = 0;
    {
      std::unique_lock lock(update_mu_);
      if (!coordinator_.ready() || !coordinator_.mid_step() ||
          std::chrono::steady_clock::now() >= deadline) {
        updates_stopped_ = true;
        return !coordinator_.ready() || !coordinator_.mid_step();
      }
      step = coordinator_.step();
    }
    // The pushes that finish the step hold update_mu_ shared: wait for it outside.
    auto finished = std::make_shared<std::promise<bool>>();
    std::future<bool> reached = finished->get_future();
    coordinator_.Park(step + 1, {}, deadline, [finished](bool r) { finished->set_value(r); });
    reached.get();  // reached, or the deadline (tested above), or stopped (mid_step stays)
    if (coordinator_.stopped()) {
      std::unique_lock lock(update_mu_);
      updates_stopped_ = true;
      return !coordinator_.mid_step();
    }
  }
}

absl::StatusOr<std::optional<int64_t>> PsState::Checkpoint() {
  if (!checkpoints_ || !coordinator_.ready()) return std::optional<int64_t>();
  std::lock_guard one_at_a_time(checkpoint_mu_);
  psflow::Checkpoint ckpt;
  proto::InitializeRequest metadata = request_;
  metadata.mutable_optimizer()->set_learning_rate(learning_rate_.load());
  metadata.set_commit(true);
  proto::WorkerList& counted = *metadata.mutable_counted_workers();  // present even when empty
  for (int w : coordinator_.counted_workers()) counted.add_workers(w);
  ckpt.metadata = metadata.SerializeAsString();
  ckpt.fingerprint = fingerprint_;
  // A step whose partitions are partly applied is waited out (the pushes that finish it hold
  // update_mu_ shared): a checkpoint holds whole steps only.
  bool capturing = false;
  for (;;) {
    int64_t step = 0;
    {
      std::unique_lock lock(update_mu_);
      if (!coordinator_.mid_step()) {
        ckpt.global_step = coordinator_.step();
        ckpt.tensors = store_->Snapshot(*optimizer_);
        if (!sync_) {
          std::vector<StepCoordinator::OpenPush> open = coordinator_.open_pushes();
          if (!open.empty()) {
            // Async pushes half applied: their remaining chunks complete the copy (Capture).
            std::lock_guard capture_lock(capture_mu_);
            capture_ = std::move(ckpt.tensors);
            capture_open_ = std::move(open);
            capturing_ = capturing = true;
          }
        }
        break;
      }
      step = coordinator_.step();
    }
    auto finished = std::make_shared<std::promise<bool>>();
    std::future<bool> reached = finished->get_future();
    coordinator_.Park(step + 1, {}, std::chrono::steady_clock::now() + kCheckpointWait,
                      [finished](bool r) { finished->set_value(r); });
    if (!reached.get()) {
      if (coordinator_.stopped()) {
        return absl::UnavailableError(
            absl::StrCat("checkpoint not written: the ps stopped with step ", step,
                         " partly applied (a worker's push was incomplete)"));
      }
      return absl::UnavailableError(
          absl::StrCat("checkpoint not written: step ", step, " stayed partly applied for ",
                       std::chrono::duration_cast<std::chrono::seconds>(kCheckpointWait).count(),
                       " s (a worker's push is incomplete)"));
    }
  }
  if (options_.after_checkpoint_cut) options_.after_checkpoint_cut();
  if (capturing) {
    // The open pushes finish or are given up (incomplete_push_timeout); a stopping ps gets no
    // more chunks: what they have is all they will have, as in the partitions.
    const auto give_up = std::chrono::steady_clock::now() + kCheckpointWait;
    {
      std::unique_lock lock(capture_mu_);
      while (!capture_open_.empty() && !coordinator_.stopped() &&
             std::chrono::steady_clock::now() < give_up) {
        capture_done_.wait_for(lock, std::chrono::milliseconds(50));
      }
    }
    std::unique_lock lock(update_mu_);
    std::lock_guard capture_lock(capture_mu_);
    capturing_ = false;
    const bool complete = capture_open_.empty() || coordinator_.stopped();
    ckpt.tensors = std::move(capture_);
    capture_.clear();
    capture_open_.clear();
    if (!complete) {
      return absl::UnavailableError(absl::StrCat(
          "checkpoint not written: an async push open at step ", ckpt.global_step,
          " stayed incomplete for ",
          std::chrono::duration_cast<std::chrono::seconds>(kCheckpointWait).count(), " s"));
    }
  }
  RETURN_IF_ERROR(checkpoints_->Write(ckpt));
  if (metrics_ != nullptr) metrics_->checkpoints.Increment();
  return std::optional<int64_t>(ckpt.global_step);
}

}  // namespace psflow
