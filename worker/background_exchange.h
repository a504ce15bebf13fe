// Communication overlapped with computation (asynchronous training through ps tasks).
//
// After step t's gradients are computed, the trainer hands them over to a second buffer pair of
// the same layout and goes on computing step t+1 while a background thread pushes step t's
// gradients and then pulls the parameters as they are after that push. At the end of step t+1 the
// trainer takes those parameters and hands over step t+1's gradients. A hand-over swaps the
// buffers (HandOver::kSwap: no copy, for whoever reads the parameter set's host buffers where
// they are at each step: the CPU backend's layers, the CUDA backend's copies, whose pinned memory
// the second buffer pair shares (ParameterSet::SameLayoutAs)) or copies them (kCopy: for a
// recorded CUDA graph, which copies gradients to the host buffer it was recorded with). A step's
// gradients are thus computed on parameters that lack this worker's previous step (a delay of
// one step, like the staleness another asynchronous worker causes), and a step costs
// max(compute, push + pull) instead of their sum.
//
// Synchronous training cannot overlap this way (its pull waits for the aggregate of the step this
// worker has just pushed), nor is there anything to overlap without a ps: the trainer exchanges
// serially there.
//
// Threads: Start and Finish are called by one thread (the trainer's); the ParameterSync is used
// only by the background thread between Start and Finish, and must not be used by anyone while an
// exchange is in flight.
#ifndef PSFLOW_WORKER_BACKGROUND_EXCHANGE_H_
#define PSFLOW_WORKER_BACKGROUND_EXCHANGE_H_

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "worker/nn/parameter_set.h"
#include "worker/parameter_sync.h"

namespace psflow {

// What one exchange did.
struct Exchange {
  SyncResult pushed;
  SyncResult pulled;
  double push_seconds = 0;  // on the background thread
  double pull_seconds = 0;
};

enum class HandOver { kCopy, kSwap };

class BackgroundExchange {
 public:
  // `sync` must outlive this object; `layout` fixes the parameters (it is not kept). The second
  // buffer pair is made in layout's host memory (ParameterSet::SameLayoutAs); where that memory
  // has no room for it, the hand-over copies whatever `hand_over` says.
  BackgroundExchange(ParameterSync& sync, const nn::ParameterSet& layout,
                     HandOver hand_over = HandOver::kCopy);
  // Waits for an exchange in flight (its outcome is dropped), then stops the thread.
  ~BackgroundExchange();
  BackgroundExchange(const BackgroundExchange&) = delete;
  BackgroundExchange& operator=(const BackgroundExchange&) = delete;

  // Takes params' gradients (kCopy: copies them, dense whole, sparse touched rows; kSwap: swaps
  // the gradient buffers, so params then holds an earlier step's, which the next step overwrites)
  // and starts pushing them over `examples`, then pulling (params' rows to pull, when it pulls
  // rows: ParameterSet::pulls_rows). Precondition: no exchange in flight.
  // Allocates nothing in steady state.
  void Start(nn::ParameterSet& params, int64_t examples);

  // Waits for the exchange in flight and, when its pull succeeded, gives params the pulled values
  // (kCopy: copied in; kSwap: the value buffers swapped). The push's or pull's error as the
  // ParameterSync returned it (params untouched then). Precondition: an exchange in flight.
  absl::StatusOr<Exchange> Finish(nn::ParameterSet& params);

  bool in_flight() const { return in_flight_; }

 private:
  void Run();

  ParameterSync& sync_;
  std::unique_ptr<nn::ParameterSet> buffers_;  // the gradients pushed, the values pulled
  const HandOver hand_over_;                   // after buffers_: it depends on their memory
  bool in_flight_ = false;                     // the trainer thread's view

  std::mutex mu_;
  std::condition_variable cv_;
  // The background thread owns buffers_ from Start (started_) until it sets done_; the trainer
  // thread owns them otherwise.
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t examples_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  Exchange result_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_BACKGROUND_EXCHANGE_H_
