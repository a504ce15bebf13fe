// psflow-operator, the real binary, as a child process of a test, with the flags that make it
// quick to elect and to re-watch; its output is collected on a thread.
#ifndef PSFLOW_TESTS_OPERATOR_PROCESS_H_
#define PSFLOW_TESTS_OPERATOR_PROCESS_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "operator/local/child_process.h"

namespace psflow::testing {

class OperatorProcess {
 public:
  // Runs psflow-operator --kubeconfig=<kubeconfig> --identity=<identity>, its Lease in
  // `lease_namespace`, metrics on a free port, and `extra_flags`.
  OperatorProcess(const std::string& kubeconfig, const std::string& identity,
                  const std::string& lease_namespace, std::vector<std::string> extra_flags = {});
  ~OperatorProcess();  // SIGKILL
  OperatorProcess(const OperatorProcess&) = delete;
  OperatorProcess& operator=(const OperatorProcess&) = delete;

  void Signal(int sig);
  // Waits for the exit; nullopt after `timeout`.
  std::optional<local::ExitStatus> Wait(std::chrono::milliseconds timeout);
  std::string output();
  // The port of its /metrics endpoint, once it has logged it; 0 before.
  int MetricsPort();

 private:
  std::mutex child_mu_;  // the reader and Signal share child_
  std::unique_ptr<local::ChildProcess> child_ ABSL_GUARDED_BY(child_mu_);
  std::thread reader_;
  std::atomic<bool> stop_reading_{false};
  std::mutex mu_;
  std::string output_ ABSL_GUARDED_BY(mu_);
  std::optional<local::ExitStatus> exit_ ABSL_GUARDED_BY(mu_);
};

// A TrainingJob of `ps` ps tasks and `workers` workers under `policy`, each a container
// "psflow" of image psflow/worker:test: what the operator's end-to-end tests create.
nlohmann::json MinimalJob(const std::string& name, int ps, int workers, const std::string& policy);

// Polls `done` every 50 ms for up to `timeout`; the last answer.
bool Eventually(const std::function<bool()>& done,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(20000));

}  // namespace psflow::testing

#endif  // PSFLOW_TESTS_OPERATOR_PROCESS_H_
