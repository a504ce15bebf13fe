// `psflow run --prometheus_targets=FILE`: the replicas' metrics endpoints as a Prometheus
// file_sd file, which deploy/prometheus/prometheus-local.yml reads.
#ifndef PSFLOW_OPERATOR_LOCAL_SCRAPE_TARGETS_H_
#define PSFLOW_OPERATOR_LOCAL_SCRAPE_TARGETS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace psflow::local {

struct ScrapeTarget {
  std::string address;  // "host:port" of /metrics
  std::string job;      // the TrainingJob's name: the `job` label, as on the metrics themselves
  std::string replica_type;
  int replica_index = 0;
};

// file_sd JSON: one group per target, labels job, replica_type, replica_index. No targets: "[]".
std::string FileSdJson(const std::vector<ScrapeTarget>& targets);

// Replaces `path` with `content` in one step (a temporary file beside it, renamed over it), so a
// reader that re-reads the file when it changes (Prometheus) never sees it half-written. On
// failure: FAILED_PRECONDITION naming the path and the reason; no temporary file is left.
absl::Status WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_SCRAPE_TARGETS_H_
