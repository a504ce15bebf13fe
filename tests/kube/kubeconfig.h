// A kubeconfig file naming one cluster, user and context, as kubectl and client libraries load it.
#ifndef PSFLOW_TESTS_KUBE_KUBECONFIG_H_
#define PSFLOW_TESTS_KUBE_KUBECONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow::kubetest {

// The YAML text: cluster "psflow-test" at `server` ("http://127.0.0.1:<port>"), user
// "psflow-test" with `token` (none when empty), context "psflow-test" (namespace "default") as
// current-context.
std::string KubeconfigYaml(absl::string_view server, absl::string_view token);

// Writes KubeconfigYaml to `path` (through a temporary file and a rename, so a reader never sees
// half of it), mode 0600. UNAVAILABLE naming the path when it cannot be written.
absl::Status WriteKubeconfigFile(const std::string& path, absl::string_view server,
                                 absl::string_view token);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_KUBECONFIG_H_
