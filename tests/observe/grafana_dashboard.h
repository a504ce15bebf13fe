// Reading psflow's Grafana dashboards (deploy/grafana/*.json) for tests: every panel's PromQL
// targets, and Grafana's template-variable substitution in them.
#ifndef PSFLOW_TESTS_OBSERVE_GRAFANA_DASHBOARD_H_
#define PSFLOW_TESTS_OBSERVE_GRAFANA_DASHBOARD_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace psflow::observe {

// One target (query) of one panel.
struct PanelQuery {
  std::string dashboard;  // the file's name, "psflow-training.json"
  std::string row;        // title of the row the panel sits under ("" before the first row)
  std::string panel;      // the panel's title
  std::string ref_id;     // "A", "B", ...
  std::string expr;       // PromQL with Grafana variables ($job, $__rate_interval, ...)
  std::string unit;       // fieldConfig.defaults.unit

  std::string Describe() const;  // "psflow-training.json: Examples/s per worker (A)"
};

// The dashboard JSON at `path`. INVALID_ARGUMENT when it is not a JSON object.
absl::StatusOr<nlohmann::json> LoadDashboard(const std::string& path);

// Every target of every panel (nested row panels included), in layout order. INVALID_ARGUMENT
// for a panel target without an expr.
absl::StatusOr<std::vector<PanelQuery>> PanelQueries(const nlohmann::json& dashboard,
                                                     const std::string& file_name);

// `expr` with each Grafana variable reference ($name, ${name}, ${name:format}) whose name is in
// `values` replaced by its value; other references are left as they are.
std::string SubstituteVariables(const std::string& expr,
                                const std::map<std::string, std::string>& values);

// A metric selector in PromQL: `psflow_ps_global_step{job=~"$job"}` is {"psflow_ps_global_step",
// `job=~"$job"`}.
struct Selector {
  std::string metric;
  std::string matchers;  // between the braces; "" without braces
};
// The selectors of psflow_* metrics and of `up{...}` in `expr`, in order.
std::vector<Selector> SelectorsIn(const std::string& expr);

}  // namespace psflow::observe

#endif  // PSFLOW_TESTS_OBSERVE_GRAFANA_DASHBOARD_H_
