// The global step of one ps task and the rules that move it: synchronous aggregation or
// asynchronous application, and the calls parked until a step is reached.
//
// Async: every gradient chunk is applied as it arrives. A push is one worker's chunks for one step
// (same step and chunk count, no chunk twice); its first chunk to arrive, whichever it is, opens
// it: the step advances by one and the push is counted at the step it found (Admission::step: every
// chunk of the push is applied as optimizer step Admission::step + 1, so a push split into chunks
// updates exactly as the push whole) with its staleness (that step minus the step the gradient was
// computed at). A chunk that cannot belong to the worker's open push (another step or count, or a
// chunk already seen: the worker restarted) opens a new one; the old one ends as it is.
//
// Sync (TensorFlow's SyncReplicasOptimizer rules, applied per partition): the first
// `replicas_to_aggregate` workers to push for the current step s are admitted (per worker, on its
// first chunk); their gradients are staged (PartitionStore::Stage). A worker has delivered a
// partition when it has sent all of its elements (dense: counted against the partition's size
// given to Start) or all of its push's chunks (sparse rows vary per worker: the whole push marks
// them delivered). Once the admitted set is final (min(replicas_to_aggregate, workers still in the
// job)) and every admitted worker has delivered a partition, that partition is averaged over the
// admitted workers and applied at once, without waiting for the others, and a pull parked for
// s + 1 that covers only applied partitions is answered. When every partition is applied and
// every admitted worker's chunks are in, the step becomes s + 1. Partitions that become ready
// together are handed out in partition order (the order the next forward pass reads them).
// A push computed at a step older than s is dropped as stale; a push for s from a worker beyond
// the first replicas_to_aggregate (a backup worker), or once a partition of s was applied, is
// dropped too, so the slowest never hold the step back. A push from a step the ps has not reached
// is INVALID_ARGUMENT. A worker that Leaves no longer counts: if its push was incomplete it loses
// its place in the step and none of its staged pieces is applied (the callers apply the admitted
// workers' pieces only); the step then needs min(replicas_to_aggregate, workers still in the job).
// With complete pushes every partition gets exactly the sum the whole-step rule gave.
//
// A push left incomplete for push_timeout (a worker killed mid-push: no Leave, the rest never
// comes) is given up (ExpirePushes, driven by the timer through the expiry handler). Sync: the
// worker loses its place as with Leave, and its staged pieces are listed for the caller to
// discard; until it pushes again it does not count among the workers still in the job, so the
// step completes with the others (min(replicas_to_aggregate, workers still there)). Partitions of
// the step already applied keep its pieces (they were whole); the others never see them. If every
// admitted worker of a partly applied step is gone, the step's remaining partitions are completed
// without an update. Async: the open push ends as it is (its chunks were applied as they came).
//
// The caller's protocol per accumulated chunk: Admit -> stage the payload -> ChunkAccumulated ->
// discard the staged pieces of Progress::given_up, apply the returned partitions (averaged over
// Progress::workers; none: no update) -> PartitionsApplied (always, even with nothing to apply) ->
// Wake the returned calls after releasing its locks. Leave and ExpirePushes return a Progress the
// same way.
//
// Waiting: Park(min_step, partitions, deadline, done) calls done(true) as soon as the step is >=
// min_step, or is min_step - 1 with every listed partition already applied (immediately when that
// holds), done(false) at the deadline or on Stop; no partitions: the whole step. Before the ps is
// ready the step is -1, so Park(0, ...) waits for readiness. Callbacks run on the thread that
// advanced the step (or the timer thread) without the lock held. Thread-safe.
#ifndef PSFLOW_PS_STEP_COORDINATOR_H_
#define PSFLOW_PS_STEP_COORDINATOR_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "proto/ps.pb.h"

namespace psflow {

class StepCoordinator {
 public:
  // Chunks one push may have (4 MiB each: 256 GiB per ps task).
  static constexpr uint32_t kMaxChunks = 1 << 16;
  // How long a push may stay incomplete before it is given up (well under the workers' pull
  // deadline, --ps_timeout_s, 60 s by default, so the others' parked pulls outlast it).
  static constexpr std::chrono::seconds kDefaultPushTimeout{30};

  enum class Verdict {
    kApply,        // async: apply now
    kAccumulate,   // sync: stage the gradients, then call ChunkAccumulated
    kDropStale,    // computed at an old step
    kDropBackup,   // sync: this step already has its replicas_to_aggregate workers
    kDropGivenUp,  // sync: a late chunk of this worker's push of this step, given up (expired)
  };
  // Parked calls made due by a step change, to be answered (Wake) once the caller has released
  // its own locks.
  using Wakeups = std::vector<std::pair<std::function<void(bool)>, bool>>;
  static void Wake(Wakeups wakeups);

  struct Admission {
    Verdict verdict = Verdict::kApply;
    // The ps's step when the push arrived (async: when its first chunk did); the optimizer
    // applies the push as step + 1.
    int64_t step = 0;
    int64_t staleness = 0;     // step - the push's step
    bool opens_push = false;   // async: this chunk opened its push (the step advanced)
    bool closes_push = false;  // async: this chunk was its push's last
    // Async: the parked calls the step's advance made due, for the caller to Wake once it holds
    // none of its own locks (a parked pull's answer takes them).
    Wakeups wake;
  };
  // Sync: what became ready. The caller applies each partition in `apply` (in that order) as the
  // average of the staged pieces of `workers` (1 / workers.size() times their sum), then calls
  // PartitionsApplied with this Progress.
  struct Progress {
    absl::InlinedVector<uint32_t, 8> apply;
    absl::InlinedVector<int, 8> workers;  // the admitted workers, ascending (may be none)
    // Workers whose incomplete push was given up (Leave, ExpirePushes). Sync: their staged
    // pieces are to be discarded, before anything in `apply` is applied.
    absl::InlinedVector<int, 2> given_up;
    // As far as this call knows, the step completes once `apply` is applied (PartitionsApplied
    // decides; another thread may still be applying a partition).
    bool completes_step = false;
  };

  explicit StepCoordinator(std::chrono::milliseconds push_timeout = kDefaultPushTimeout);
  ~StepCoordinator();  // Stop()s

  // Called on the timer thread, without the lock, once a push has been incomplete for
  // push_timeout; it is to call ExpirePushes (with the caller's locks) and apply what that
  // returns. Set before Start; it must stay callable until Stop() returns (Stop waits for a call
  // in progress). None: pushes are never given up.
  void SetExpiryHandler(std::function<void()> handler);

  // INVALID_ARGUMENT for a sync config with total_workers < 1 or replicas_to_aggregate < 0 or
  // > total_workers.
  static absl::Status CheckSyncConfig(const proto::SyncConfig& sync);

  // Makes the ps ready at `step` with `sync`'s rules, waking the parked calls. partition_elements:
  // the size of each partition, in the order segments index them (none: the step is only whole
  // pushes; segments naming a partition outside the list count as sparse). Errors as
  // CheckSyncConfig.
  absl::Status Start(const proto::SyncConfig& sync, int64_t step,
                     std::vector<int64_t> partition_elements = {});
  bool ready() const;
  bool stopped() const;  // Stop was called
  int64_t step() const;
  // Calls `reached` once, as soon as step() >= target (at once, on this thread, when it already
  // is): under the coordinator's lock, so it must be quick and must not call the coordinator.
  // One watch at a time: a later call replaces it. After ClearStepWatch returns, no call of it
  // runs or will run.
  void WatchStep(int64_t target, std::function<void()> reached);
  void ClearStepWatch();
  proto::SyncConfig sync() const;
  // The step the listed partitions' values are at: step() + 1 when every one of them was already
  // applied in the current sync step, else step(). Empty: step().
  int64_t step_of(std::span<const uint32_t> partitions) const;
  // Sync: some partitions of the current step are applied (or being applied) and others not yet:
  // a checkpoint now would see half a step.
  bool mid_step() const;

  // Decides what to do with a gradient chunk (header already validated for shape). Async:
  // the push's first chunk advances the step (the calls that makes due: Admission::wake). Sync:
  // once a worker's push of step s was given up (ExpirePushes), its chunks of that push that
  // come later (same step and count, a chunk not seen before) are kDropGivenUp and it stays out
  // of the step; a chunk seen before (the worker restarted) or of another step is a new push.
  // INVALID_ARGUMENT for a step from the future, a worker index outside the job, inconsistent chunk
  // numbering, or dense elements of a partition sent twice; FAILED_PRECONDITION before Start.
  absl::StatusOr<Admission> Admit(const proto::TransferHeader& header);

  // Sync: the admitted chunk's gradients are staged. Returns the partitions that became ready
  // (nothing for a worker not admitted).
  Progress ChunkAccumulated(const proto::TransferHeader& header);
  // Async: a push some of whose chunks are in.
  struct OpenPush {
    int worker = 0;
    int64_t counted_at = 0;  // its chunks' Admission::step
    uint32_t chunks_left = 0;
  };
  // Async: the pushes open now.
  std::vector<OpenPush> open_pushes() const;
  // Sync: the number of workers admitted to the current step.
  int workers_in_step() const;
  // Sync: progress.apply was applied. Marks them, and when every partition is applied and every
  // admitted worker's chunks are in, makes the step s + 1: then, and only in that one call of
  // the step's, *completed_step (when given) is set to true, else to false. Returns the parked
  // calls now due, for the caller to Wake after releasing its locks.
  [[nodiscard]] Wakeups PartitionsApplied(const Progress& progress, bool* completed_step = nullptr);

  // The worker has finished. An incomplete push of the current step loses its place; what
  // became ready is returned as by ChunkAccumulated (the caller applies it and calls
  // PartitionsApplied).
  Progress Leave(int worker);

  // Gives up every push incomplete for push_timeout or longer (see the top). What became ready
  // is returned as by ChunkAccumulated.
  Progress ExpirePushes();

  void Park(int64_t min_step, std::vector<uint32_t> partitions,
            std::chrono::steady_clock::time_point deadline, std::function<void(bool reached)> done);
  // Answers every parked call with false, and every later Park at once; no expiry handler call
  // starts after it, and one in progress has returned when Stop does.
  void Stop();

 private:
  struct Parked {
    int64_t min_step;
    std::vector<uint32_t> partitions;
    std::chrono::steady_clock::time_point deadline;
    std::function<void(bool)> done;
  };
  // Sync: one admitted worker's push to this task in the current step.
  struct WorkerPush {
    uint32_t num_chunks = 0;
    uint32_t chunks_in = 0;  // staged (ChunkAccumulated)
    std::vector<bool> seen;  // per chunk: admitted
    // Per partition: dense elements admitted, dense elements staged, delivered.
    std::vector<int64_t> admitted_elements;
    std::vector<int64_t> staged_elements;
    std::vector<bool> delivered;
    std::chrono::steady_clock::time_point opened;  // its first chunk's admission
    bool complete() const { return chunks_in == num_chunks; }
  };
  // Sync: the push of a worker that ExpirePushes gave up, to tell its late chunks.
  struct GivenUpPush {
    int64_t step = -1;  // -1: none
    uint32_t num_chunks = 0;
    std::vector<bool> seen;  // per chunk: admitted before, or dropped since
  };
  // Async: one worker's push being applied.
  struct AsyncPush {
    bool open = false;
    int64_t from_step = 0;   // the header's step
    int64_t counted_at = 0;  // the ps's step when it opened (Admission::step)
    uint32_t num_chunks = 0;
    uint32_t chunks_in = 0;
    std::vector<bool> seen;  // per chunk (its storage kept from push to push)
    std::chrono::steady_clock::time_point opened;
  };
  enum class PartitionState : uint8_t { kWaiting, kApplying, kApplied };
  bool ReachedLocked(const Parked& p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AdmissionFinalLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the partitions every admitted worker has delivered, marked kApplying, to progress.
  void TakeReadyLocked(Progress& progress) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The earliest time an incomplete push passes push_timeout; max() when none is incomplete.
  std::chrono::steady_clock::time_point NextPushDeadlineLocked() const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the parked calls that are due (reached, expired or stopping) out.
  Wakeups TakeDueLocked(std::chrono::steady_clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimerLoop();
  // Fires the step watch when the step has reached its target.
  void StepMovedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int64_t step_ ABSL_GUARDED_BY(mu_) = -1;  // -1 until Start
  int64_t watch_target_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> watch_ ABSL_GUARDED_BY(mu_);  // WatchStep's, until it fires
  proto::SyncConfig sync_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> partition_elements_ ABSL_GUARDED_BY(mu_);
  // sync: replicas_to_aggregate, as given or defaulted
  int required_ ABSL_GUARDED_BY(mu_) = 0;
  // sync: the current step's admitted workers
  std::map<int, WorkerPush> admitted_ ABSL_GUARDED_BY(mu_);
  // sync: per partition, in the current step
  std::vector<PartitionState> partition_state_ ABSL_GUARDED_BY(mu_);
  // sync: a partition of the current step is applying or applied, or the step's completion was
  // told: admission is closed
  bool applying_ ABSL_GUARDED_BY(mu_) = false;
  bool completion_told_ ABSL_GUARDED_BY(mu_) = false;  // sync: Progress::completes_step given
  std::vector<bool> left_ ABSL_GUARDED_BY(mu_);        // per worker
  int left_count_ ABSL_GUARDED_BY(mu_) = 0;
  // sync, per worker: its push was given up and it has not pushed since
  std::vector<bool> absent_ ABSL_GUARDED_BY(mu_);
  int absent_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<GivenUpPush> given_up_ ABSL_GUARDED_BY(mu_);  // sync: per worker
  std::vector<AsyncPush> async_ ABSL_GUARDED_BY(mu_);       // async: per worker
  const std::chrono::milliseconds push_timeout_;
  std::function<void()> expiry_handler_;        // set before Start, read by the timer thread
  bool expiring_ ABSL_GUARDED_BY(mu_) = false;  // the handler is running
  std::vector<Parked> parked_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;
};

}  // namespace psflow

#endif  // PSFLOW_PS_STEP_COORDINATOR_H_
