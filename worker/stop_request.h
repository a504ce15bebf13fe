// SIGTERM as a request to stop cleanly, for psflow-worker. The kubelet sends it when the pod is
// deleted (a `kubectl scale` that removes this worker, an eviction, a drain) and SIGKILLs
// terminationGracePeriodSeconds later; psflow run sends it when it stops a replica.
//
// A StopRequest says whether a stop was asked for. Inside its stoppable part (the training loop:
// StoppableScope) a request only sets the flag, so the trainer ends after the step in progress,
// completes its push and leaves the job (sync: the ps stops counting on it, no partial gradient
// applied). Outside it (starting up, evaluating) there is nothing to finish cleanly and the
// process ends at once. InstallStopSignal makes SIGTERM such a request: it blocks the signal in
// the calling thread, so in every thread started later (call it before any), and waits for it on
// a thread of its own; a process still running `grace` after a request ends then (a call that
// hangs must not outlast the kubelet's patience). Either way the worker exits with 143
// (128 + SIGTERM), what a process killed by the signal reports: a stop is not a success, and
// restart rules see what they saw before. Thread-safe.
#ifndef PSFLOW_WORKER_STOP_REQUEST_H_
#define PSFLOW_WORKER_STOP_REQUEST_H_

#include <atomic>
#include <chrono>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace psflow {

// The exit code of a worker stopped by SIGTERM.
inline constexpr int kStoppedExitCode = 128 + 15;

class StopRequest {
 public:
  // Asked for a stop (false until Request).
  bool requested() const { return requested_.load(); }

  // Asks for a stop. True when inside a stoppable part (the caller then gives it time to
  // finish); false when the caller should end the process now.
  bool Request();

  // Marks the stoppable part while it lives.
  class StoppableScope {
   public:
    explicit StoppableScope(StopRequest& stop);
    ~StoppableScope();
    StoppableScope(const StoppableScope&) = delete;
    StoppableScope& operator=(const StoppableScope&) = delete;

   private:
    StopRequest& stop_;
  };

 private:
  std::atomic<bool> requested_{false};
  std::mutex mu_;
  bool stoppable_ ABSL_GUARDED_BY(mu_) = false;
};

// The process's StopRequest, which InstallStopSignal feeds.
StopRequest& ProcessStopRequest();

// Once per process, before any thread starts: SIGTERM becomes ProcessStopRequest().Request(),
// then the process exits with kStoppedExitCode at once or `grace` later (above).
void InstallStopSignal(std::chrono::seconds grace);

}  // namespace psflow

#endif  // PSFLOW_WORKER_STOP_REQUEST_H_
