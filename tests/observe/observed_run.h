// One observed training run for observe_e2e_test, everything real and on loopback:
//   - psflow-operator against the test Kubernetes API server (tests/kube), taking a TrainingJob
//     through Created, Running and Succeeded (this code plays the kubelet, setting pod phases);
//   - `psflow run --prometheus_targets=...` training a small language model (ptb_lstm's `test`
//     config on synthetic data: words and examples both count) with 1 ps + 2 workers for
//     20 s (--train_seconds);
//   - Prometheus with deploy/prometheus/prometheus-local.yml and psflow-alerts.yml, only the
//     file_sd path changed to the run's directory, scraping both every second.
// Run() returns once the training run has ended; Prometheus and the operator keep running (and
// are queried) until the object is destroyed.
#ifndef PSFLOW_TESTS_OBSERVE_OBSERVED_RUN_H_
#define PSFLOW_TESTS_OBSERVE_OBSERVED_RUN_H_

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "operator/local/child_process.h"
#include "tests/kube/object_store.h"
#include "tests/kube/test_api_server.h"
#include "tests/observe/background_process.h"
#include "tests/observe/prometheus_server.h"

namespace psflow::observe {

class ObservedRun {
 public:
  static constexpr char kJobName[] = "observe-lm";        // the `psflow run` job
  static constexpr char kKubeJobName[] = "observe-kube";  // the operator's job
  static constexpr char kOperatorScrapeJob[] = "psflow-operator";

  // Starts everything and trains to the end. Errors for what kept the run from happening.
  static absl::StatusOr<std::unique_ptr<ObservedRun>> Run();
  ~ObservedRun();

  PrometheusServer& prometheus() { return *prometheus_; }
  // `psflow run`'s output and exit.
  const std::string& run_output() const { return run_output_; }
  const local::ExitStatus& run_status() const { return run_status_; }
  // The targets file as read while the job trained, and after the run.
  const std::string& targets_while_training() const { return targets_while_training_; }
  const std::string& targets_after() const { return targets_after_; }
  // /metrics of each replica ("ps-0", "worker-1": the address taken from the targets file) and
  // of "operator", scraped once every worker had trained a while.
  const std::map<std::string, std::string>& scraped() const { return scraped_; }
  // An interval (Unix seconds) in which Prometheus saw both workers' counters rise at every
  // scrape: both trained throughout.
  double window_start() const { return window_start_; }
  double window_end() const { return window_end_; }

 private:
  ObservedRun() = default;
  absl::Status StartOperator();
  absl::Status StartPrometheus(int port);
  absl::Status Train();
  // Plays the kubelet for kKubeJobName: its pods run, then its worker succeeds.
  void DriveKubeJob();
  void ScrapeEveryTarget();
  absl::Status FindTrainingWindow();

  std::filesystem::path dir_;
  int operator_port_ = 0;
  kubetest::ObjectStore store_;
  std::unique_ptr<kubetest::TestApiServer> apiserver_;
  std::unique_ptr<BackgroundProcess> operator_;
  std::unique_ptr<PrometheusServer> prometheus_;
  std::string run_output_;
  local::ExitStatus run_status_;
  std::string targets_while_training_;
  std::string targets_after_;
  std::map<std::string, std::string> scraped_;
  double window_start_ = 0;
  double window_end_ = 0;
};

}  // namespace psflow::observe

#endif  // PSFLOW_TESTS_OBSERVE_OBSERVED_RUN_H_
