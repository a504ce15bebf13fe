// The Prometheus endpoint every psflow process serves: /metrics (text exposition of `registry()`)
// and /healthz (200 with an empty body while the process is up).
//
// Metric names follow psflow_<component>_<name>_<unit>[_total]; labels come from
// StandardLabels() and other small fixed sets, never step numbers.
#ifndef PSFLOW_CORE_METRICS_H_
#define PSFLOW_CORE_METRICS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"

namespace psflow {

using Labels = std::map<std::string, std::string>;

// {job, replica_type, replica_index} for this process: job from $PSFLOW_JOB_NAME ("local" when
// unset), the others from the task.
Labels StandardLabels(const std::string& replica_type, int replica_index);

class MetricsEndpoint {
 public:
  // Listens on bind_address:port (port 0 picks a free one). UNAVAILABLE when the port is taken.
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& bind_address,
                                                                int port);

  // Thread-safe, as prometheus-cpp's registry is; lives as long as the endpoint.
  prometheus::Registry& registry() { return *registry_; }
  int port() const { return port_; }

 private:
  MetricsEndpoint() = default;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<prometheus::Registry> health_;  // empty: /healthz answers 200 with no body
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_METRICS_H_
