// The controller's queue of object keys ("namespace/name"), with client-go's rate-limited
// workqueue semantics (util/workqueue: queue.go, delaying_queue.go, default_rate_limiters.go):
//
//  - Dedup: a key waiting to be handed out is queued once, however often it is added.
//  - Exclusivity: a key handed out by Get is "processing" until Done; it is never handed to a
//    second worker meanwhile. Added again while processing, it is handed out again after Done.
//  - Delays: AddAfter holds a key back until its time (the earliest of several AddAfters wins),
//    then adds it as Add does. AddRateLimited delays by base_delay * 2^failures (capped at
//    max_delay) and counts a failure; Forget clears the count once the key succeeds.
//  - Order: ready keys are handed out first in, first out.
//
// A reconciler worker loops:
//   while (auto key = queue.Get()) {
//     absl::Status s = Reconcile(*key);
//     if (s.ok()) queue.Forget(*key); else queue.AddRateLimited(*key);
//     queue.Done(*key);
//   }
//
// ShutDown: adds and delays are ignored from then on; keys still waiting for their delay are
// dropped; Get hands out the keys already ready (drains), then returns nullopt to every caller.
//
// Thread-safe: every method may be called from any thread.
#ifndef PSFLOW_OPERATOR_CONTROLLER_WORK_QUEUE_H_
#define PSFLOW_OPERATOR_CONTROLLER_WORK_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "absl/base/thread_annotations.h"

namespace psflow::controller {

// WorkQueue::Options (declared here so that it can be a default argument of the constructor).
struct WorkQueueOptions {
  // AddRateLimited's first delay; each further failure of the key doubles it, up to max_delay.
  std::chrono::milliseconds base_delay{5};
  std::chrono::milliseconds max_delay{std::chrono::seconds(300)};
  // The clock delays are measured with; empty: std::chrono::steady_clock::now. Tests pass a fake
  // one and call Depth()/Get() once it has moved (a blocked Get notices a fake clock's move only
  // when it wakes up on its own, after the real time left before the earliest delayed key).
  std::function<std::chrono::steady_clock::time_point()> now;
};

class WorkQueue {
 public:
  using Options = WorkQueueOptions;
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit WorkQueue(Options options = {});
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues `key` unless it is already waiting to be handed out; a key being processed is handed
  // out again after its Done. Ignored after ShutDown.
  void Add(const std::string& key);
  // Add(key) once `delay` has passed (at once when delay <= 0). A key already delayed keeps the
  // earlier of the two times. Ignored after ShutDown.
  void AddAfter(const std::string& key, std::chrono::milliseconds delay);
  // AddAfter(key, min(base_delay * 2^NumRequeues(key), max_delay)), then counts one more failure.
  void AddRateLimited(const std::string& key);
  // Clears the key's failure count (it does not remove the key from the queue).
  void Forget(const std::string& key);
  // The key's failures since its last Forget.
  int NumRequeues(const std::string& key) const;

  // The next ready key, blocking until there is one; the caller must call Done(key) when it has
  // handled it. nullopt once ShutDown has been called and no key is ready.
  std::optional<std::string> Get();
  // The caller has finished with a key Get gave it. A no-op for a key not being processed.
  void Done(const std::string& key);

  // Wakes every blocked Get; see the file comment. Idempotent.
  void ShutDown();
  bool ShuttingDown() const;

  // Keys ready to be handed out now (not those still delayed, nor those being processed).
  size_t Depth() const;

 private:
  TimePoint Now() const;
  // Add's body; caller holds mu_.
  void AddLocked(const std::string& key);
  // Adds every delayed key whose time has come, earliest first; caller holds mu_.
  void PromoteDueLocked(TimePoint now);

  const Options options_;

  mutable std::mutex mu_;
  // Signalled when a key becomes ready, a delay is shortened, and on shutdown.
  std::condition_variable cv_;
  // Ready keys, each once, first in first out.
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  // Keys that need processing: those in queue_, and those added again while being processed.
  std::unordered_set<std::string> dirty_ ABSL_GUARDED_BY(mu_);
  // Keys handed out by Get and not yet Done.
  std::unordered_set<std::string> processing_ ABSL_GUARDED_BY(mu_);
  // Delayed keys: when each is to be added, and the same ordered by time.
  std::map<std::string, TimePoint> delayed_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<TimePoint, std::string>> delayed_order_ ABSL_GUARDED_BY(mu_);
  // AddRateLimited calls since the last Forget.
  std::unordered_map<std::string, int> failures_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_WORK_QUEUE_H_
