// What the step rules of a ps task (async_step_rules.h, sync_step_rules.h) take and return: the
// verdict on a gradient chunk, the partitions a sync step may apply, the pushes open in async
// mode, and the checks of a push header both modes share. Values only: the rules are pure state
// machines (no locks, no clock of their own: the time is an argument), table-tested in
// step_rules_test.cc; StepCoordinator (step_coordinator.h) makes them thread-safe and parks calls.
#ifndef PSFLOW_PS_STEP_RULES_H_
#define PSFLOW_PS_STEP_RULES_H_

#include <chrono>
#include <cstdint>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "proto/ps.pb.h"

namespace psflow::step_rules {

using Clock = std::chrono::steady_clock;

// Chunks one push may have (4 MiB each: 256 GiB per ps task).
inline constexpr uint32_t kMaxChunks = 1 << 16;

enum class Verdict {
  kApply,         // async: apply now
  kAccumulate,    // sync: stage the gradients, then tell the rules (SyncStepRules::Staged)
  kDropStale,     // computed at an old step
  kDropBackup,    // sync: this step already has its replicas_to_aggregate workers
  kDropGivenUp,   // a late chunk of this worker's push, given up (it expired or its worker left)
  kDropJoining,   // sync: a worker not yet counted (new, or back after leaving): it joins the job
                  // at the next step boundary (worker_membership.h)
  kDropRepeated,  // sync: a chunk its worker's push of this step already has, or of another
                  // chunk count: the worker restarted and pushes the step again
};

struct Admission {
  Verdict verdict = Verdict::kApply;
  // The ps's step when the push arrived (async: when its first chunk did); the optimizer
  // applies the push as step + 1.
  int64_t step = 0;
  int64_t staleness = 0;     // step - the push's step
  bool opens_push = false;   // async: this chunk opened its push (the step advanced)
  bool closes_push = false;  // async: this chunk was its push's last
};

// Sync: what became ready. The caller applies each partition in `apply` (in that order) as the
// average of the staged pieces of `workers` (1 / workers.size() times their sum), then tells the
// rules (SyncStepRules::Applied) with this Progress.
struct Progress {
  absl::InlinedVector<uint32_t, 8> apply;
  absl::InlinedVector<int, 8> workers;  // the admitted workers, ascending (may be none)
  // Workers whose incomplete push was given up (Leave, Expire). Sync: their staged pieces are to
  // be discarded, before anything in `apply` is applied. Async: their open push ends as it is.
  absl::InlinedVector<int, 2> given_up;
  // As far as this call knows, the step completes once `apply` is applied (Applied decides;
  // another thread may still be applying a partition). Said once per step.
  bool completes_step = false;

  bool empty() const { return apply.empty() && given_up.empty() && !completes_step; }
};

// Async: a push some of whose chunks are in.
struct OpenPush {
  int worker = 0;
  int64_t counted_at = 0;  // its chunks' Admission::step
  uint32_t chunks_left = 0;
};

// What both modes refuse before looking at their state, as INVALID_ARGUMENT: a step from the
// future (beyond `step`), a worker index outside [0, kMaxWorkers) (worker_membership.h), a chunk
// count of 0 or over kMaxChunks, a chunk index not below the count.
absl::Status CheckPushHeader(const proto::TransferHeader& header, int64_t step);

}  // namespace psflow::step_rules

#endif  // PSFLOW_PS_STEP_RULES_H_
