// Reading values out of Prometheus text exposition (what /metrics serves): enough for the local
// runner's progress line and for tests, not a full parser.
#ifndef PSFLOW_CORE_PROMETHEUS_TEXT_H_
#define PSFLOW_CORE_PROMETHEUS_TEXT_H_

#include <optional>

#include "absl/strings/string_view.h"

namespace psflow {

// Sum of the samples of `metric` over all its label sets; nullopt when it has none. `metric` is
// a full sample name (e.g. "psflow_worker_examples_total", "..._seconds_count").
std::optional<double> SumSamples(absl::string_view exposition, absl::string_view metric);

}  // namespace psflow

#endif  // PSFLOW_CORE_PROMETHEUS_TEXT_H_
