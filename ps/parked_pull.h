// How a checked pull is parked and answered, the same whichever transport carried it (the gRPC
// service, ps_service.h, or the bulk channel, bulk_server.h): park it until its partitions reach
// its step (StepCoordinator::Park, at most kMaxPark), count the wait, and tell the transport the
// outcome exactly once.
#ifndef PSFLOW_PS_PARKED_PULL_H_
#define PSFLOW_PS_PARKED_PULL_H_

#include <chrono>
#include <functional>
#include <memory>

#include "proto/ps.pb.h"
#include "ps/ps_metrics.h"
#include "ps/ps_state.h"

namespace psflow {

// How long a parked call may wait at most, whatever the caller asks.
inline constexpr std::chrono::milliseconds kMaxPark = std::chrono::minutes(10);
// Now + timeout_ms (negative: 0), at most kMaxPark.
std::chrono::steady_clock::time_point ParkDeadline(int64_t timeout_ms);

enum class PullOutcome {
  kReached,   // the transport sends the values (PsState::PinPull or FillPull) and counts them
  kTimedOut,  // the reply is TimedOutReply(): no payload
  kStopping,  // the ps is stopping: UNAVAILABLE kStoppingMessage
};
inline constexpr char kStoppingMessage[] = "the ps task is stopping";

// Parks `header` (checked by PsState::CheckPull) and calls done once, on the thread that reached
// the step, timed it out or stopped the ps (possibly this one, before returning). Counts the wait
// in metrics' wait_seconds (metrics may be null).
void ParkCheckedPull(PsState& state, PsMetrics* metrics,
                     std::shared_ptr<const proto::TransferHeader> header,
                     std::function<void(PullOutcome)> done);

// A timed-out pull's reply header.
proto::TransferReply TimedOutReply(const PsState& state);

// Counts a pull answered with `payload` bytes of values.
void CountPull(PsMetrics* metrics, int64_t payload);

}  // namespace psflow

#endif  // PSFLOW_PS_PARKED_PULL_H_
