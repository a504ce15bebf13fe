#include "operator/local/ignored_fields.h"

#include "absl/strings/str_cat.h"

namespace psflow::local {

std::vector<std::string> IgnoredContainerFields(const api::ReplicaSpec& spec) {
  std::vector<std::string> lines;
  if (spec.containers.empty()) return lines;
  const api::Container& main = spec.MainContainer();
  for (const api::Container& c : spec.containers) {
    if (&c == &main) continue;
    lines.push_back(absl::StrCat("container \"", c.name, "\" is not started here (psflow run runs ",
                                 "only \"", main.name, "\", the main container)"));
  }
  if (!main.working_dir.empty()) {
    lines.push_back(absl::StrCat("workingDir ", main.working_dir,
                                 " is ignored here: the processes run in the run's directory"));
  }
  for (const api::EnvVar& e : main.env) {
    if (!e.value_from) continue;
    lines.push_back(absl::StrCat("env ", e.name,
                                 " comes from valueFrom, which only a kubelet resolves: not set "
                                 "here (it is as psflow run's own environment has it)"));
  }
  return lines;
}

}  // namespace psflow::local
