// The API server's rules (k8s.io/apimachinery validation, v1.26) for the names a TrainingJob's
// containers carry, so `psflow validate`, `psflow run` and the operator's admission refuse a name
// before the API server refuses the pod. Pure predicates; the parser words the errors.
#ifndef PSFLOW_OPERATOR_API_KUBE_NAMES_H_
#define PSFLOW_OPERATOR_API_KUBE_NAMES_H_

#include "absl/strings/string_view.h"

namespace psflow::api {

// A DNS-1123 label (a container's name): 1-63 of [a-z0-9-], starting and ending alphanumeric.
bool IsDns1123Label(absl::string_view name);

// An IANA service name (a container port's name): 1-15 of [a-z0-9-] with at least one letter,
// not starting or ending with '-', and no "--".
bool IsPortName(absl::string_view name);

// An environment variable's name as every API server takes it: printable ASCII without '=' (an
// '=' would make it another variable). Kubernetes 1.32+ accepts any such name
// (RelaxedEnvironmentVariableValidation); older ones also want [-._a-zA-Z][-._a-zA-Z0-9]* and
// refuse the pod otherwise, which the operator reports (InvalidPodTemplate). Refusing more here
// would fail running jobs that a newer API server accepts.
bool IsEnvVarName(absl::string_view name);

}  // namespace psflow::api

#endif  // PSFLOW_OPERATOR_API_KUBE_NAMES_H_
