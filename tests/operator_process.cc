#include "tests/operator_process.h"

#include <signal.h>

#include <utility>

#include "tests/test_util.h"

namespace psflow::testing {

using std::chrono::milliseconds;

OperatorProcess::OperatorProcess(const std::string& kubeconfig, const std::string& identity,
                                 const std::string& lease_namespace,
                                 std::vector<std::string> extra_flags) {
  std::vector<std::string> argv = {Binary("psflow-operator"), "--kubeconfig=" + kubeconfig,
                                   "--identity=" + identity, "--metrics_address=127.0.0.1",
                                   "--metrics_port=0", "--lease_namespace=" + lease_namespace,
                                   // Short for quick takeovers, and a renew deadline a
                                   // loaded machine's slowest renewal stays well within.
                                   "--lease_duration_s=4", "--renew_deadline_s=3",
                                   "--retry_period_s=0.25", "--watch_timeout_s=5", "--workers=2"};
  for (std::string& flag : extra_flags) argv.push_back(std::move(flag));
  auto child = local::ChildProcess::Spawn(argv, Environment({}, {"KUBECONFIG"}));
  if (!child.ok()) {
    output_ = std::string(child.status().message());
    exit_ = local::ExitStatus{127, 0};
    return;
  }
  child_ = *std::move(child);
  reader_ = std::thread([this] {
    std::string chunk;
    while (true) {
      chunk.clear();
      std::optional<local::ExitStatus> exit;
      {
        std::lock_guard<std::mutex> lock(child_mu_);  // ChildProcess is not thread-safe
        exit = child_->WaitWithOutput(milliseconds(100), &chunk);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        output_ += chunk;
        if (exit) {
          exit_ = exit;
          return;
        }
      }
      if (stop_reading_) return;
    }
  });
}

OperatorProcess::~OperatorProcess() {
  Signal(SIGKILL);
  stop_reading_ = true;
  if (reader_.joinable()) reader_.join();
}

void OperatorProcess::Signal(int sig) {
  std::lock_guard<std::mutex> lock(child_mu_);
  if (child_) child_->Signal(sig);  // a no-op once the child has been reaped
}

std::optional<local::ExitStatus> OperatorProcess::Wait(milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (true) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (exit_) return exit_;
    }
    if (std::chrono::steady_clock::now() >= end) return std::nullopt;
    std::this_thread::sleep_for(milliseconds(20));
  }
}

std::string OperatorProcess::output() {
  std::lock_guard<std::mutex> lock(mu_);
  return output_;
}

int OperatorProcess::MetricsPort() {
  int port = 0;
  for (const std::string& line : LinesWith(output(), "serving /metrics")) {
    port = std::stoi(line.substr(line.rfind(':') + 1));
  }
  return port;
}

nlohmann::json MinimalJob(const std::string& name, int ps, int workers, const std::string& policy) {
  using nlohmann::json;
  auto replica = [&](int n) {
    return json{{"replicas", n},
                {"restartPolicy", policy},
                {"template",
                 {{"spec",
                   {{"containers",
                     json::array({{{"name", "psflow"}, {"image", "psflow/worker:test"}}})}}}}}};
  };
  return {{"apiVersion", "psflow.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"replicaSpecs", {{"PS", replica(ps)}, {"Worker", replica(workers)}}}}}};
}

bool Eventually(const std::function<bool()>& done, milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(milliseconds(50));
  }
  return done();
}

}  // namespace psflow::testing
