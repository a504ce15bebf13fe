// YAML manifests read into JSON the way Kubernetes tools read them (sigs.k8s.io/yaml, which
// resolves plain scalars by YAML 1.1 rules): `yes`/`on` are true, `010` is 8, `1_000` is 1000,
// quoted scalars stay strings.
#ifndef PSFLOW_TESTS_CRD_YAML_JSON_H_
#define PSFLOW_TESTS_CRD_YAML_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::kubetest {

// The first document of `yaml`. INVALID_ARGUMENT (naming `source` and the line) when it is not
// YAML, has a non-scalar map key, or holds a value JSON cannot carry (.inf, .nan).
absl::StatusOr<nlohmann::json> YamlToJson(absl::string_view yaml, absl::string_view source);

// YamlToJson of a file's contents; NOT_FOUND when it cannot be read.
absl::StatusOr<nlohmann::json> LoadYamlFile(const std::string& path);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_YAML_JSON_H_
