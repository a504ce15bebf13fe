#include "worker/stop_request.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "core/log.h"

namespace psflow {

bool StopRequest::Request() {
  std::lock_guard lock(mu_);
  requested_.store(true);
  return stoppable_;
}

StopRequest::StoppableScope::StoppableScope(StopRequest& stop) : stop_(stop) {
  std::lock_guard lock(stop_.mu_);
  stop_.stoppable_ = true;
}

StopRequest::StoppableScope::~StoppableScope() {
  std::lock_guard lock(stop_.mu_);
  stop_.stoppable_ = false;
}

StopRequest& ProcessStopRequest() {
  static StopRequest* const stop = new StopRequest;  // never destroyed: the signal thread reads it
  return *stop;
}

void InstallStopSignal(std::chrono::seconds grace) {
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &term, nullptr);
  StopRequest& stop = ProcessStopRequest();
  std::thread([term, grace, &stop] {
    int sig = 0;
    while (sigwait(&term, &sig) != 0) {
    }
    if (!stop.Request()) {
      PSFLOW_LOG(WARNING) << "SIGTERM: exiting (not training: nothing to finish)";
      _exit(kStoppedExitCode);
    }
    PSFLOW_LOG(WARNING) << "SIGTERM: stopping after the step in progress (its push completes, then "
                           "this worker leaves the job); exiting within "
                        << grace.count() << " s";
    std::this_thread::sleep_for(grace);
    PSFLOW_LOG(WARNING) << "still running " << grace.count() << " s after SIGTERM: exiting now";
    _exit(kStoppedExitCode);
  }).detach();
}

}  // namespace psflow
