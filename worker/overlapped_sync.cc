#include "worker/overlapped_sync.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/status_macros.h"

namespace psflow {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

OverlappedSync::OverlappedSync(ParameterSync& sync, const nn::ParameterSet& layout,
                               HandOver hand_over)
    : sync_(sync), exchange_(sync, layout, hand_over) {}

absl::Status OverlappedSync::Prepare(const nn::ParameterSet& params, bool is_chief) {
  return sync_.Prepare(params, is_chief);
}

absl::StatusOr<SyncResult> OverlappedSync::Pull(nn::ParameterSet& params) {
  const std::optional<SyncResult> taken = std::exchange(pulled_, std::nullopt);
  // The values the last Push's wait brought (pulled for this step), or, after a Flush, those
  // pulled for the step after this one: every row of them serves this one too, but only some rows
  // of a sparse pull did.
  if (taken.has_value() && !left_ && (exchange_.in_flight() || !params.pulls_rows())) {
    return *taken;
  }
  // The exchange in flight brings the values for the step after this one.
  if (exchange_.in_flight()) return SyncResult{.global_step = global_step_};
  // These values serve this step and the next (no exchange brings that one's): every row.
  const bool rows = params.pulls_rows();
  params.set_pulls_rows(false);
  absl::StatusOr<SyncResult> whole = sync_.Pull(params);
  params.set_pulls_rows(rows);
  ASSIGN_OR_RETURN(SyncResult pulled, std::move(whole));
  if (taken.has_value()) pulled.bytes += taken->bytes;  // the last exchange's pull counts too
  global_step_ = std::max(global_step_, pulled.global_step);
  return pulled;
}

absl::StatusOr<std::optional<SyncResult>> OverlappedSync::Flush(nn::ParameterSet& params) {
  if (!exchange_.in_flight()) return std::nullopt;
  const auto start = Clock::now();
  ASSIGN_OR_RETURN(const Exchange x, exchange_.Finish(params));
  // A pull not returned yet (a Flush right after a Push) still counts its bytes.
  const int64_t unreturned = pulled_.has_value() ? pulled_->bytes : 0;
  pulled_ = x.pulled;
  pulled_->bytes += unreturned;
  SyncResult pushed = x.pushed;
  pushed.global_step = std::max(x.pushed.global_step, x.pulled.global_step);
  global_step_ = pushed.global_step;
  pushed.waited_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  pushed.background_seconds = x.push_seconds + x.pull_seconds;
  return std::optional<SyncResult>(pushed);
}

absl::StatusOr<SyncResult> OverlappedSync::Push(nn::ParameterSet& params, int64_t examples) {
  ASSIGN_OR_RETURN(const std::optional<SyncResult> finished, Flush(params));
  exchange_.Start(params, examples);
  return finished.value_or(SyncResult{.global_step = global_step_});
}

absl::Status OverlappedSync::SetLearningRate(float learning_rate) {
  if (exchange_.in_flight()) {
    return absl::FailedPreconditionError("set the learning rate with an exchange in flight");
  }
  return sync_.SetLearningRate(learning_rate);
}

absl::Status OverlappedSync::Leave() {
  if (exchange_.in_flight()) {
    return absl::FailedPreconditionError("leaving with an exchange in flight");
  }
  left_ = true;  // a Pull after Leave reads the ps
  return sync_.Leave();
}

}  // namespace psflow
