// docs/metrics.md's reference tables, and the two things they must agree with: the metric
// families psflow's sources register, and what a live /metrics endpoint serves.
#ifndef PSFLOW_TESTS_OBSERVE_METRICS_REFERENCE_H_
#define PSFLOW_TESTS_OBSERVE_METRICS_REFERENCE_H_

#include <map>
#include <set>
#include <string>

#include "absl/status/statusor.h"

namespace psflow::observe {

struct MetricFamily {
  std::string type;              // "counter", "gauge", "histogram"; "" where unknown
  std::set<std::string> labels;  // label names, without a histogram's `le`
  bool operator==(const MetricFamily&) const = default;
};
using MetricFamilies = std::map<std::string, MetricFamily>;  // by family name

// The rows "| `psflow_...` | type | label, label | meaning |" of the markdown's tables ("-" for
// no labels). INVALID_ARGUMENT for a malformed or repeated row; NOT_FOUND when there is none.
absl::StatusOr<MetricFamilies> ParseMetricsTable(const std::string& markdown);

// The families registered through prometheus-cpp in the non-test .cc files under `source_dir`'s
// core/, ps/, worker/ and operator/ (AddCounter/AddGauge(r, "name"), Counter/Gauge/Histogram(r,
// "name"), BuildCounter/BuildGauge/BuildHistogram().Name("name")); labels left empty.
absl::StatusOr<MetricFamilies> RegisteredInSources(const std::string& source_dir);

// Every "psflow_<ps|worker|operator>_..." string literal in those same files, registered or not.
absl::StatusOr<std::set<std::string>> MetricNameLiteralsInSources(const std::string& source_dir);

// The families in Prometheus text exposition: type from "# TYPE", labels from the samples.
MetricFamilies ParseExposition(const std::string& text);

}  // namespace psflow::observe

#endif  // PSFLOW_TESTS_OBSERVE_METRICS_REFERENCE_H_
