#include "core/metrics.h"

#include <cstdlib>
#include <exception>

#include "absl/strings/str_cat.h"

namespace psflow {

Labels StandardLabels(const std::string& replica_type, int replica_index) {
  const char* job = std::getenv("PSFLOW_JOB_NAME");
  return {{"job", job && *job ? job : "local"},
          {"replica_type", replica_type},
          {"replica_index", std::to_string(replica_index)}};
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& bind_address, int port) {
  std::unique_ptr<MetricsEndpoint> m(new MetricsEndpoint());
  m->registry_ = std::make_shared<prometheus::Registry>();
  m->health_ = std::make_shared<prometheus::Registry>();
  try {
    // prometheus-cpp (civetweb) throws when it cannot listen.
    m->exposer_ = std::make_unique<prometheus::Exposer>(absl::StrCat(bind_address, ":", port),
                                                         /*num_threads=*/1);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("metrics endpoint cannot listen on ", bind_address,
                                               ":", port, ": ", e.what()));
  }
  m->exposer_->RegisterCollectable(m->registry_, "/metrics");
  m->exposer_->RegisterCollectable(m->health_, "/healthz");
  const auto ports = m->exposer_->GetListeningPorts();
  m->port_ = ports.empty() ? port : ports.front();
  return m;
}

}  // namespace psflow
