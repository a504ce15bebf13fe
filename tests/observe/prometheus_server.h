// A real Prometheus server on loopback for tests, and its HTTP API.
//
// The `prometheus` and `promtool` binaries are Debian's (package prometheus, installed by
// scripts/setup.sh); their paths come from CMake (PSFLOW_PROMETHEUS, PSFLOW_PROMTOOL) and are
// empty when it found none.
#ifndef PSFLOW_TESTS_OBSERVE_PROMETHEUS_SERVER_H_
#define PSFLOW_TESTS_OBSERVE_PROMETHEUS_SERVER_H_

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tests/observe/background_process.h"

namespace psflow::observe {

// Paths of the binaries; empty when CMake found none.
std::string PrometheusBinary();
std::string PromtoolBinary();

// `text` with every byte outside RFC 3986's unreserved set percent-encoded.
std::string UrlEncode(const std::string& text);

class PrometheusServer {
 public:
  // Runs `prometheus --config.file=config_file` with its TSDB in storage_dir on 127.0.0.1:port
  // and waits until /-/ready answers. UNAVAILABLE (with its log) when it exits or is not ready
  // within `timeout`.
  static absl::StatusOr<std::unique_ptr<PrometheusServer>> Start(const std::string& config_file,
                                                                 const std::string& storage_dir,
                                                                 int port,
                                                                 std::chrono::seconds timeout);

  // GET /api/v1/<endpoint>?<params>: the response's "data" when its status is "success"; an
  // error naming the endpoint otherwise (a query Prometheus rejects answers 400).
  absl::StatusOr<nlohmann::json> Api(
      const std::string& endpoint, const std::vector<std::pair<std::string, std::string>>& params);
  // An instant query evaluated at `time` (Unix seconds): the "data" object (resultType, result).
  absl::StatusOr<nlohmann::json> Query(const std::string& expr, double time);

  int port() const { return port_; }
  std::string log() { return process_->output(); }

 private:
  PrometheusServer(std::unique_ptr<BackgroundProcess> process, int port)
      : process_(std::move(process)), port_(port) {}
  std::unique_ptr<BackgroundProcess> process_;
  int port_;
};

}  // namespace psflow::observe

#endif  // PSFLOW_TESTS_OBSERVE_PROMETHEUS_SERVER_H_
