// A child process whose output a thread collects, so that it never blocks on a full pipe while
// the test does something else (Prometheus, psflow-operator, `psflow run` in tests/observe).
#ifndef PSFLOW_TESTS_OBSERVE_BACKGROUND_PROCESS_H_
#define PSFLOW_TESTS_OBSERVE_BACKGROUND_PROCESS_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "operator/local/child_process.h"

namespace psflow::observe {

class BackgroundProcess {
 public:
  // Spawns argv with exactly `env` (see local::ChildProcess::Spawn). Call from a thread that
  // outlives the process (the child gets SIGTERM when its spawning thread exits).
  static absl::StatusOr<std::unique_ptr<BackgroundProcess>> Start(
      const std::vector<std::string>& argv, const std::vector<std::string>& env);
  // SIGKILLs the process group if the child still runs, and reaps it.
  ~BackgroundProcess();
  BackgroundProcess(const BackgroundProcess&) = delete;
  BackgroundProcess& operator=(const BackgroundProcess&) = delete;

  // Sends `sig` to the child's process group (a no-op once it has been reaped). Thread-safe.
  void Signal(int sig);
  // The exit status once the child has exited; nullopt when `timeout` passes first.
  std::optional<local::ExitStatus> Wait(std::chrono::milliseconds timeout);
  // Everything it wrote so far (stdout and stderr). Thread-safe.
  std::string output();

 private:
  explicit BackgroundProcess(std::unique_ptr<local::ChildProcess> child);
  void Read();

  std::mutex child_mu_;  // ChildProcess is not thread-safe: the reader and Signal share it
  std::unique_ptr<local::ChildProcess> child_ ABSL_GUARDED_BY(child_mu_);
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::string output_ ABSL_GUARDED_BY(mu_);
  std::optional<local::ExitStatus> exit_ ABSL_GUARDED_BY(mu_);
  std::thread reader_;
};

}  // namespace psflow::observe

#endif  // PSFLOW_TESTS_OBSERVE_BACKGROUND_PROCESS_H_
