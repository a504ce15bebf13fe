// Asynchronous training with communication overlapped with computation, as a ParameterSync: the
// trainer pulls, computes and pushes as it does serially, and this wrapper turns that into a
// BackgroundExchange (background_exchange.h says what it costs and buys):
//
//   Pull  the first: the wrapped sync's pull. After that: returns at once, with the values the
//         exchange finished by the last Push or Flush already in params (a step computes on
//         parameters that lack this worker's previous step: a delay of one step).
//   Push  waits for the exchange in flight (its pulled values go into params), then hands this
//         step's gradients over to a new one; returns what the finished exchange's push did
//         (waited_seconds: the wait; background_seconds: that exchange's push + pull).
//   Flush waits for the exchange in flight, as Push does, and starts none.
//
// Sparse pulls: the exchange a Push starts pulls the values of the step after next
// (pull_ahead() 2), so params' rows to pull must be that step's when Push is called; a Pull that
// pulls itself (the first, or the first after a Flush) brings every row, as its values serve this
// step and the next. A step that pushes nothing (its gradients were not finite) is followed by a
// Flush (Trainer), so the next step finds the rows it reads.
//
// GradientsReady does nothing: while the trainer computes, the wrapped sync belongs to the
// background thread, and this step's gradients go out whole with the next exchange (the exchange
// already overlaps the next step's computation).
//
// SetLearningRate and Leave need nothing in flight (FAILED_PRECONDITION otherwise): the wrapped
// sync is used by the background thread between a Push and the next Push or Flush.
#ifndef PSFLOW_WORKER_OVERLAPPED_SYNC_H_
#define PSFLOW_WORKER_OVERLAPPED_SYNC_H_

#include <memory>
#include <optional>

#include "worker/background_exchange.h"
#include "worker/parameter_sync.h"

namespace psflow {

class OverlappedSync final : public ParameterSync {
 public:
  // `sync` (a PsClient, asynchronous) must outlive this; `layout` fixes the parameters;
  // `hand_over` as BackgroundExchange's.
  OverlappedSync(ParameterSync& sync, const nn::ParameterSet& layout,
                 HandOver hand_over = HandOver::kCopy);

  absl::Status Prepare(const nn::ParameterSet& params, bool is_chief) override;
  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override;
  absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t examples) override;
  void GradientsReady(const nn::ParameterSet& /*params*/, nn::ParameterSet::Handle /*first*/,
                      nn::ParameterSet::Handle /*last*/, int64_t /*examples*/) override {}
  absl::StatusOr<std::optional<SyncResult>> Flush(nn::ParameterSet& params) override;
  int pull_ahead() const override { return 2; }
  absl::Status SetLearningRate(float learning_rate) override;
  absl::Status Leave() override;
  absl::StatusOr<Others> OthersTraining() override { return sync_.OthersTraining(); }

 private:
  ParameterSync& sync_;
  BackgroundExchange exchange_;
  // The pull of the exchange finished last, not yet returned by Pull (its values are in params).
  std::optional<SyncResult> pulled_;
  int64_t global_step_ = 0;  // the last one seen
  bool left_ = false;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_OVERLAPPED_SYNC_H_
