#include "ps/parked_pull.h"

#include <algorithm>
#include <utility>

namespace psflow {

std::chrono::steady_clock::time_point ParkDeadline(int64_t timeout_ms) {
  return std::chrono::steady_clock::now() +
         std::min<std::chrono::milliseconds>(
             std::chrono::milliseconds(std::max<int64_t>(0, timeout_ms)), kMaxPark);
}

void ParkCheckedPull(PsState& state, PsMetrics* metrics,
                     std::shared_ptr<const proto::TransferHeader> header,
                     std::function<void(PullOutcome)> done) {
  const auto parked_at = std::chrono::steady_clock::now();
  const auto deadline = ParkDeadline(header->timeout_ms());
  state.ParkPull(
      *header, deadline,
      [&state, metrics, header, parked_at, done = std::move(done)](bool reached) {
        if (metrics != nullptr) {
          metrics->wait_seconds.Increment(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - parked_at).count());
        }
        if (reached) {
          done(PullOutcome::kReached);
        } else {
          done(state.coordinator().stopped() ? PullOutcome::kStopping : PullOutcome::kTimedOut);
        }
      });
}

proto::TransferReply TimedOutReply(const PsState& state) {
  proto::TransferReply reply;
  reply.set_timed_out(true);
  reply.set_global_step(std::max<int64_t>(0, state.global_step()));
  return reply;
}

void CountPull(PsMetrics* metrics, int64_t payload) {
  if (metrics == nullptr) return;
  metrics->pulls.Increment();
  metrics->sent_bytes.Increment(static_cast<double>(payload));
}

}  // namespace psflow
