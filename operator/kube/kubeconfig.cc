#include "operator/kube/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/read_file.h"
#include "core/status_macros.h"

namespace psflow::kube {
namespace {

constexpr char kServiceAccountDir[] = "var/run/secrets/kubernetes.io/serviceaccount";

// One kubeconfig being read: its path (for messages) and directory (for relative paths).
class KubeconfigReader {
 public:
  explicit KubeconfigReader(std::string path)
      : path_(std::move(path)), dir_(std::filesystem::path(path_).parent_path().string()) {}

  absl::StatusOr<ClusterConfig> Read(absl::string_view context_override) {
    absl::StatusOr<std::string> text = ReadFile(path_);
    if (!text.ok()) {
      return absl::Status(text.status().code(),
                          absl::StrCat("kubeconfig: ", text.status().message()));
    }
    YAML::Node root;
    try {
      root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      return Invalid(absl::StrCat("malformed YAML at line ", e.mark.line + 1, ": ", e.msg));
    }
    if (!root.IsMap()) return Invalid("not a kubeconfig (the file is not a YAML mapping)");
    // yaml-cpp reports wrongly typed fields (a list where a string belongs) by throwing.
    try {
      return FromRoot(root, context_override);
    } catch (const YAML::Exception& e) {
      return Invalid(absl::StrCat("malformed kubeconfig at line ", e.mark.line + 1, ": ", e.msg));
    }
  }

 private:
  absl::Status Invalid(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("kubeconfig ", path_, ": ", what));
  }

  // The string at map[key]; "" when absent or null.
  static std::string Scalar(const YAML::Node& map, const char* key) {
    if (!map.IsMap()) return "";
    const YAML::Node node = map[key];
    if (!node || node.IsNull()) return "";
    return node.as<std::string>();
  }

  // The `item_key` mapping of the entry of root[list_key] named `name`; an undefined node when
  // there is none.
  static YAML::Node FindNamed(const YAML::Node& root, const char* list_key, const char* item_key,
                              const std::string& name) {
    const YAML::Node list = root[list_key];
    if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
    for (const YAML::Node& entry : list) {
      if (Scalar(entry, "name") != name) continue;
      const YAML::Node item = entry[item_key];
      // An entry with no body is an empty one (an anonymous user, say).
      return item && item.IsMap() ? item : YAML::Node(YAML::NodeType::Map);
    }
    return YAML::Node(YAML::NodeType::Undefined);
  }

  std::string Resolve(const std::string& file) const {
    std::filesystem::path p(file);
    if (p.is_relative() && !dir_.empty()) p = std::filesystem::path(dir_) / p;
    return p.lexically_normal().string();
  }

  // The PEM/token of `data_key` (base64) or else of the file named by `file_key`; "" for
  // neither.
  absl::StatusOr<std::string> DataOrFile(const YAML::Node& map, const char* data_key,
                                         const char* file_key, absl::string_view owner) const {
    const std::string data = Scalar(map, data_key);
    if (!data.empty()) {
      std::string decoded;
      if (!absl::Base64Unescape(data, &decoded)) {
        return Invalid(absl::StrCat(owner, ": ", data_key, " is not valid base64"));
      }
      return decoded;
    }
    const std::string file = Scalar(map, file_key);
    if (file.empty()) return std::string();
    absl::StatusOr<std::string> contents = ReadFile(Resolve(file));
    if (!contents.ok()) {
      return absl::Status(contents.status().code(),
                          absl::StrCat("kubeconfig ", path_, ": ", owner, ": ", file_key, ": ",
                                       contents.status().message()));
    }
    return contents;
  }

  absl::StatusOr<ClusterConfig> FromRoot(const YAML::Node& root,
                                         absl::string_view context_override) const {
    std::string context_name(context_override);
    if (context_name.empty()) context_name = Scalar(root, "current-context");
    if (context_name.empty()) {
      return Invalid("no current-context is set (set one, or name a context to use)");
    }
    const YAML::Node context = FindNamed(root, "contexts", "context", context_name);
    if (!context) return Invalid(absl::StrCat("context \"", context_name, "\" not found"));

    ClusterConfig config;
    config.source = absl::StrCat("kubeconfig ", path_, " (context ", context_name, ")");
    const std::string ns = Scalar(context, "namespace");
    if (!ns.empty()) config.default_namespace = ns;

    const std::string cluster_name = Scalar(context, "cluster");
    if (cluster_name.empty()) {
      return Invalid(absl::StrCat("context \"", context_name, "\" names no cluster"));
    }
    const YAML::Node cluster = FindNamed(root, "clusters", "cluster", cluster_name);
    if (!cluster) {
      return Invalid(absl::StrCat("context \"", context_name, "\" names cluster \"", cluster_name,
                                  "\", which is not in clusters"));
    }
    RETURN_IF_ERROR(ReadCluster(cluster, cluster_name, config));

    const std::string user_name = Scalar(context, "user");
    if (user_name.empty()) return config;  // anonymous
    const YAML::Node user = FindNamed(root, "users", "user", user_name);
    if (!user) {
      return Invalid(absl::StrCat("context \"", context_name, "\" names user \"", user_name,
                                  "\", which is not in users"));
    }
    RETURN_IF_ERROR(ReadUser(user, user_name, config));
    return config;
  }

  absl::Status ReadCluster(const YAML::Node& cluster, const std::string& name,
                           ClusterConfig& config) const {
    const std::string owner = absl::StrCat("cluster \"", name, "\"");
    std::string server = Scalar(cluster, "server");
    if (server.empty()) return Invalid(absl::StrCat(owner, " has no server"));
    if (!absl::StartsWith(server, "https://") && !absl::StartsWith(server, "http://")) {
      return Invalid(absl::StrCat(owner, ": server \"", server, "\" is not an http(s) URL"));
    }
    // "https://" alone (or "https:///path") would otherwise lose its slashes below.
    const size_t host = server.find("://") + 3;
    if (host == server.size() || server[host] == '/') {
      return Invalid(absl::StrCat(owner, ": server \"", server, "\" names no host"));
    }
    while (absl::EndsWith(server, "/")) server.pop_back();
    config.server = server;
    ASSIGN_OR_RETURN(config.ca_pem, DataOrFile(cluster, "certificate-authority-data",
                                               "certificate-authority", owner));
    const YAML::Node insecure = cluster["insecure-skip-tls-verify"];
    config.insecure_skip_tls_verify = insecure && !insecure.IsNull() && insecure.as<bool>();
    return absl::OkStatus();
  }

  absl::Status ReadUser(const YAML::Node& user, const std::string& name,
                        ClusterConfig& config) const {
    const std::string owner = absl::StrCat("user \"", name, "\"");
    const auto unsupported = [&](absl::string_view what) {
      return absl::UnimplementedError(absl::StrCat(
          "kubeconfig ", path_, ": ", owner, " uses ", what,
          ", which psflow does not support; give it a token, tokenFile or client certificate"));
    };
    if (user["exec"]) return unsupported("an exec credential plugin");
    if (user["auth-provider"]) return unsupported("an auth-provider plugin");
    if (user["username"] || user["password"]) return unsupported("basic authentication");

    ASSIGN_OR_RETURN(config.client_cert_pem,
                     DataOrFile(user, "client-certificate-data", "client-certificate", owner));
    ASSIGN_OR_RETURN(config.client_key_pem,
                     DataOrFile(user, "client-key-data", "client-key", owner));
    if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
      return Invalid(absl::StrCat(
          owner, " has a client ", config.client_cert_pem.empty() ? "key" : "certificate",
          " but no client ", config.client_cert_pem.empty() ? "certificate" : "key"));
    }
    config.token = Scalar(user, "token");
    const std::string token_file = Scalar(user, "tokenFile");
    if (!token_file.empty()) {
      config.token_file = Resolve(token_file);
      // Fail now, with the kubeconfig named, rather than on the first request.
      absl::StatusOr<std::string> token = ReadFile(config.token_file);
      if (!token.ok()) {
        return absl::Status(token.status().code(),
                            absl::StrCat("kubeconfig ", path_, ": ", owner,
                                         ": tokenFile: ", token.status().message()));
      }
    }
    return absl::OkStatus();
  }

  const std::string path_;
  const std::string dir_;
};

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

}  // namespace

absl::StatusOr<ClusterConfig> LoadKubeconfig(const std::string& path,
                                             absl::string_view context_override) {
  return KubeconfigReader(path).Read(context_override);
}

absl::StatusOr<ClusterConfig> LoadInClusterConfig(const std::string& root) {
  const std::string host = Env("KUBERNETES_SERVICE_HOST");
  const std::string port = Env("KUBERNETES_SERVICE_PORT");
  if (host.empty() || port.empty()) {
    return absl::FailedPreconditionError(
        "in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set "
        "(is this running in a pod?)");
  }
  const std::string dir = (std::filesystem::path(root) / kServiceAccountDir).string();
  ClusterConfig config;
  config.source = "in-cluster service account";
  // An IPv6 address needs brackets in a URL.
  const bool ipv6 = absl::StrContains(host, ':');
  config.server = absl::StrCat("https://", ipv6 ? "[" : "", host, ipv6 ? "]" : "", ":", port);
  config.token_file = dir + "/token";
  const auto prefix = [](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat("in-cluster config: ", status.message()));
  };
  absl::StatusOr<std::string> token = ReadFile(config.token_file);
  if (!token.ok()) return prefix(token.status());
  absl::StatusOr<std::string> ca = ReadFile(dir + "/ca.crt");
  if (!ca.ok()) return prefix(ca.status());
  config.ca_pem = *std::move(ca);
  absl::StatusOr<std::string> ns = ReadFile(dir + "/namespace");
  if (ns.ok()) {
    const std::string trimmed(absl::StripAsciiWhitespace(*ns));
    if (!trimmed.empty()) config.default_namespace = trimmed;
  }
  return config;
}

absl::StatusOr<ClusterConfig> ResolveClusterConfig(const std::string& kubeconfig_flag,
                                                   absl::string_view context) {
  if (!kubeconfig_flag.empty()) return LoadKubeconfig(kubeconfig_flag, context);
  // client-go merges every file of $KUBECONFIG; psflow reads the first.
  for (absl::string_view path : absl::StrSplit(Env("KUBECONFIG"), ':', absl::SkipEmpty())) {
    return LoadKubeconfig(std::string(path), context);
  }
  if (!Env("KUBERNETES_SERVICE_HOST").empty()) return LoadInClusterConfig();
  const std::string home = Env("HOME");
  if (home.empty()) {
    return absl::NotFoundError(
        "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod");
  }
  absl::StatusOr<ClusterConfig> config = LoadKubeconfig(home + "/.kube/config", context);
  if (absl::IsNotFound(config.status())) {
    return absl::NotFoundError(absl::StrCat(
        "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, or run in a pod (",
        config.status().message(), ")"));
  }
  return config;
}

}  // namespace psflow::kube
