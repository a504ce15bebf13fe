// Where the API server is and how to authenticate to it: from a kubeconfig file (kubectl's
// format) or from inside a pod (the service account).
//
// Every error is one line naming the file and what is wrong in it. Credential plugins (exec,
// auth-provider) and basic auth are not supported: UNIMPLEMENTED naming the user.
#ifndef PSFLOW_OPERATOR_KUBE_KUBECONFIG_H_
#define PSFLOW_OPERATOR_KUBE_KUBECONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::kube {

struct ClusterConfig {
  // "https://10.0.0.1:6443" (scheme, host, port, optional path prefix; no trailing slash).
  std::string server;
  // Certificate authorities trusted for the server's certificate (PEM). Empty: the system's.
  std::string ca_pem;
  // Client certificate chain and its private key (PEM), both or neither.
  std::string client_cert_pem;
  std::string client_key_pem;
  // Bearer token. When token_file is set, the file's current contents are sent instead (re-read
  // whenever it changes, as projected service-account tokens rotate); `token` is then the
  // fallback while the file cannot be read.
  std::string token;
  std::string token_file;
  bool insecure_skip_tls_verify = false;
  std::string default_namespace = "default";
  // Where this came from, for messages: "kubeconfig /home/a/.kube/config (context kind-a)",
  // "in-cluster service account".
  std::string source;
};

// Reads a kubeconfig. `context_override` names the context to use instead of current-context.
// Relative file paths in it (certificate-authority, client-certificate, client-key, tokenFile)
// are resolved against the kubeconfig's directory; *-data fields take precedence over files.
// NOT_FOUND / PERMISSION_DENIED when the kubeconfig (or a file it names) cannot be read;
// INVALID_ARGUMENT for malformed YAML, a missing context, cluster, user or server, a server that
// is not an http(s) URL with a host, bad base64;
// UNIMPLEMENTED for exec / auth-provider / basic-auth users.
absl::StatusOr<ClusterConfig> LoadKubeconfig(const std::string& path,
                                             absl::string_view context_override = "");

// The pod's service account: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT from the
// environment; token, ca.crt and namespace from <root>/var/run/secrets/kubernetes.io/
// serviceaccount/ (root is "/" except in tests). The namespace file is optional ("default").
// FAILED_PRECONDITION when the variables are not set; the ReadFile error when the token or CA
// cannot be read.
absl::StatusOr<ClusterConfig> LoadInClusterConfig(const std::string& root = "/");

// As kubectl and client-go choose: `kubeconfig_flag` when set; else the first path in
// $KUBECONFIG; else the in-cluster config when KUBERNETES_SERVICE_HOST is set; else
// ~/.kube/config. `context` as in LoadKubeconfig (ignored in-cluster).
absl::StatusOr<ClusterConfig> ResolveClusterConfig(const std::string& kubeconfig_flag,
                                                   absl::string_view context = "");

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_KUBECONFIG_H_
