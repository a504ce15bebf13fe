// Everything one ps task knows and does, apart from gRPC: the partitions (PartitionStore), the
// optimizer and its run-time learning rate, the step rules (StepCoordinator) and checkpoints.
// PsService puts it on the wire; the frame fuzzer drives it directly.
//
// Life cycle: Initialize(commit = false) creates the partitions; the chief's TK_ASSIGN pushes fill
// them; Initialize(commit = true) makes the task ready, at the commit's start_step (0 for a new
// job; a chief re-creating a task that restarted without a checkpoint sends its last known global
// step, so the step never goes back: that is logged as lost progress). Or RestoreFromCheckpoint
// makes it ready at the checkpoint's step and a chief's Initialize then finds the variables there.
//
// Every bulk frame is validated completely (kind, fingerprint, dtype, segments against the
// partitions, payload size, step) before it touches a partition, so a bad call changes nothing.
// Sync mode applies each partition as soon as every admitted worker has delivered it
// (StepCoordinator), so pulls of the next step are answered partition by partition; a pull's
// reply reports the step its partitions are at (StepCoordinator::step_of).
//
// Checkpoints are consistent cuts: Checkpoint() waits for the pushes being applied and holds new
// ones off while it copies the partitions (a memcpy of the model), then writes without any lock.
// In sync mode it also waits (up to kCheckpointWait) for a step whose partitions are partly applied
// to finish: a checkpoint never holds half a step. In async mode the pushes open at the copy (some
// of their chunks applied) are completed in the copy: each later chunk of theirs is applied to the
// copy as well as to the partitions, pushes opened after the copy only to the partitions, and the
// copy is written once the open ones are done (up to kCheckpointWait): it holds whole pushes and
// the step that counts them. A push given up (its worker left or restarted, or incomplete for
// incomplete_push_timeout, see StepCoordinator) ends as it is, in the copy as in the partitions.
//
// Locks, always in this order: init_mu_ (initialisation alone) or checkpoint_mu_, update_mu_
// (shared by pushes and pulls, exclusive by a checkpoint's copy, Leave and the expiry),
// capture_mu_, then the coordinator's own. The step rules' effects come back as values (Admission,
// Progress, Wakeups: sync_step_rules.h, async_step_rules.h) and are carried out here under
// update_mu_; the parked calls they make due are answered only once every lock is released (a
// parked pull's answer takes update_mu_ itself). Thread-safe.
#ifndef PSFLOW_PS_PS_STATE_H_
#define PSFLOW_PS_PS_STATE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "core/byte_source.h"
#include "core/optimizer.h"
#include "proto/ps.pb.h"
#include "ps/checkpoint.h"
#include "ps/partition_store.h"
#include "ps/ps_metrics.h"
#include "ps/step_coordinator.h"
#include "ps/versioned_values.h"

namespace psflow {

class PsState {
 public:
  static constexpr std::chrono::seconds kCheckpointWait{60};
  struct Options {
    int task = 0;
    std::string checkpoint_dir;  // empty: no checkpoints
    int keep_checkpoints = 3;
    // A push incomplete this long is given up (StepCoordinator's push_timeout).
    std::chrono::milliseconds incomplete_push_timeout = StepCoordinator::kDefaultPushTimeout;
    // Tests: runs on the checkpointing thread, without locks, once a checkpoint has copied the
    // partitions and before it waits for the pushes open at that moment.
    std::function<void()> after_checkpoint_cut;
    // The most bytes the variables with their slots and accumulators may take (0: no bound), and
    // what it is, for the error (e.g. "--max_variable_bytes", "the cgroup's memory.max").
    int64_t max_variable_bytes = 0;
    std::string max_variable_bytes_source;
  };
  // metrics may be null.
  PsState(Options options, PsMetrics* metrics);
  ~PsState();  // stops the coordinator (no expiry runs afterwards)

  // Loads the newest valid checkpoint of this task, if there is one, and becomes ready at its
  // step. True when one was restored.
  absl::StatusOr<bool> RestoreFromCheckpoint();

  // See the life cycle above. FAILED_PRECONDITION when the task holds a different model
  // (fingerprint) or the commit comes before the partitions; INVALID_ARGUMENT for a bad
  // partition list, optimizer or sync config.
  absl::StatusOr<proto::InitializeResponse> Initialize(const proto::InitializeRequest& request);

  proto::WaitReadyResponse ReadyResponse() const;
  // Before ready, SetLearningRate, Leave, Push (gradients) and CheckPull answer UNAVAILABLE
  // ("variables are not initialised yet"): a task restarted without a checkpoint is, to a worker
  // between two exchanges, a task that went away, and it recovers (the chief creates the
  // variables again from its latest parameters) instead of exiting.
  // INVALID_ARGUMENT for a rate that is not > 0 and finite.
  absl::StatusOr<float> SetLearningRate(float learning_rate);
  // The worker stops counting (worker_membership.h). INVALID_ARGUMENT for an index outside
  // [0, kMaxWorkers).
  absl::StatusOr<int64_t> Leave(int worker);
  // The workers the task counts on now (joined, not left; psflow_ps_workers).
  int workers() const { return coordinator_.workers(); }

  // One bulk push frame (TK_ASSIGN or TK_GRADIENT): validated, then applied, accumulated or
  // dropped. Errors: INVALID_ARGUMENT (naming the variable partition where there is one) for a
  // malformed frame, unknown partition, wrong size, dtype or fingerprint, a step from the future;
  // UNAVAILABLE for gradients before ready (above); FAILED_PRECONDITION for assignments after.
  absl::StatusOr<proto::TransferReply> Push(ByteSource& frame);

  // A bulk pull frame, validated (as Push); the payload bytes its reply will carry.
  absl::StatusOr<int64_t> CheckPull(ByteSource& frame, proto::TransferHeader* header) const;
  // Parks a checked pull until its partitions reach header.step() (StepCoordinator::Park), then
  // calls done (see there).
  void ParkPull(const proto::TransferHeader& header, std::chrono::steady_clock::time_point deadline,
                std::function<void(bool reached)> done);
  // Fills a checked pull's reply payload (payload bytes long) and returns its reply header.
  proto::TransferReply FillPull(const proto::TransferHeader& header, std::byte* payload) const;
  // The same for a checked float32 pull, without copying: add gets pins of the payload's values,
  // in payload order (PartitionStore::PinOut); the caller sends them and then unpins each once
  // (VersionedValues::Unpin, any thread, also after this PsState is gone).
  proto::TransferReply PinPull(const proto::TransferHeader& header,
                               absl::FunctionRef<void(const VersionedValues::Pin&)> add) const;

  StepCoordinator& coordinator() { return coordinator_; }
  int64_t global_step() const { return coordinator_.step(); }
  int64_t bytes() const;

  // Writes a checkpoint now (no-op without a checkpoint dir or before ready). Returns the step
  // written, if any. UNAVAILABLE when a sync step stays partly applied for kCheckpointWait, or the
  // ps stops (the coordinator's Stop) with one partly applied.
  absl::StatusOr<std::optional<int64_t>> Checkpoint();

  // For a clean stop before the final checkpoint: waits, while pushes are still served, until no
  // sync step is partly applied (for at most `wait`), then refuses every later gradient push
  // (UNAVAILABLE "stopping": the worker drops it, as a push to a lost task, and goes on from the
  // ps's state once it is back), so the final
  // checkpoint holds every update applied and a whole step. False when a step stayed partly
  // applied for `wait` (updates are refused all the same). Async steps are never partly applied.
  bool StopUpdates(std::chrono::steady_clock::duration wait);

 private:
  absl::Status CheckFrame(const proto::TransferHeader& header) const;
  // INVALID_ARGUMENT unless the payload holds exactly `elements` of the frame's wire type.
  absl::Status CheckPayload(const proto::TransferHeader& header, int64_t elements,
                            size_t payload_bytes) const;
  // Applies what became ready (sync) and tells the coordinator; the calls to Wake.
  StepCoordinator::Wakeups ApplyReady(const StepCoordinator::Progress& progress,
                                      float learning_rate);
  static std::vector<uint32_t> PartitionsOf(const proto::TransferHeader& header);
  // FillPull and PinPull: runs `read` (the store's copy or pin of the header's segments) under
  // update_mu_ and answers with the step the values it read are at.
  proto::TransferReply ReadPull(const proto::TransferHeader& header,
                                absl::FunctionRef<void()> read) const;
  // counted: StepCoordinator::Start's.
  absl::Status Activate(const proto::InitializeRequest& request,
                        std::unique_ptr<PartitionStore> store, std::unique_ptr<Optimizer> optimizer,
                        int64_t step, std::optional<std::vector<int>> counted);
  // The coordinator's expiry handler: gives up the pushes incomplete for too long.
  void ExpirePushes();
  // Async, with a checkpoint waiting for the pushes open at its copy: `frame` (a copy of the
  // chunk's payload) goes to the copy as well when its push is one of them. Under update_mu_.
  void Capture(const proto::TransferHeader& header, const StepCoordinator::Admission& admission,
               ByteSource& frame, float learning_rate);
  // The checkpoint's copy no longer waits for these workers' pushes (given up).
  void ForgetCaptured(std::span<const int> workers);

  Options options_;
  PsMetrics* metrics_;
  StepCoordinator coordinator_;
  std::optional<CheckpointDir> checkpoints_;

  std::mutex init_mu_;  // serialises Initialize, assignments and activation
  // Written under init_mu_ before coordinator_.ready(), read without it afterwards (ready()'s
  // lock orders the writes before every read), so not ABSL_GUARDED_BY: a push or pull reads them
  // after checking ready(). The partitions' contents are guarded by update_mu_.
  proto::InitializeRequest request_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<PartitionStore> store_;
  uint64_t fingerprint_ = 0;
  bool sync_ = false;

  std::atomic<float> learning_rate_{0.0f};
  // Shared by every push while it touches partitions; exclusive while a checkpoint copies them.
  mutable std::shared_mutex update_mu_;

  // StopUpdates was called: gradient pushes are refused. Written under update_mu_ held
  // exclusively, read under it shared.
  bool updates_stopped_ = false;

  std::mutex checkpoint_mu_;  // one Checkpoint at a time (it owns the copy below)
  // Async: the copy of the partitions a checkpoint is completing (see the top).
  // Written under update_mu_ held exclusively, read under it shared: a push tests it without
  // capture_mu_.
  bool capturing_ = false;
  std::mutex capture_mu_;
  std::condition_variable capture_done_;  // capture_open_ became empty
  std::vector<CheckpointTensor> capture_ ABSL_GUARDED_BY(capture_mu_);
  std::vector<StepCoordinator::OpenPush> capture_open_ ABSL_GUARDED_BY(capture_mu_);
};

}  // namespace psflow

#endif  // PSFLOW_PS_PS_STATE_H_
