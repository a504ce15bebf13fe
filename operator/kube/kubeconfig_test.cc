#include "operator/kube/kubeconfig.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "operator/kube/bearer_token.h"

namespace psflow::kube {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr char kCa[] = "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n";
constexpr char kCert[] = "-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n";
constexpr char kKey[] = "-----BEGIN PRIVATE KEY-----\nKEY\n-----END PRIVATE KEY-----\n";

// A kubeconfig with one cluster "c", one user "u" and one context "ctx"; the placeholders
// $CLUSTER and $USER are replaced by each test's fields.
constexpr char kTemplate[] = R"(apiVersion: v1
kind: Config
current-context: ctx
clusters:
- name: c
  cluster:
    server: https://10.1.2.3:6443/
$CLUSTER
contexts:
- name: ctx
  context:
    cluster: c
    user: u
    namespace: team-a
- name: other
  context:
    cluster: c
users:
- name: u
  user:
$USER
)";

class KubeconfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "kubeconfig_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const fs::path path = dir_ / name;
    fs::create_directories(path.parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path.string();
  }
  std::string Kubeconfig(const std::string& cluster_fields, const std::string& user_fields,
                         const std::string& name = "config") {
    return Write(name, absl::StrReplaceAll(kTemplate,
                                           {{"$CLUSTER", cluster_fields}, {"$USER", user_fields}}));
  }
  // The message of loading a kubeconfig that must fail with `code`.
  std::string Failure(const std::string& path, absl::StatusCode code,
                      absl::string_view context = "") {
    const absl::StatusOr<ClusterConfig> config = LoadKubeconfig(path, context);
    EXPECT_EQ(config.status().code(), code) << config.status();
    EXPECT_THAT(config.status().message(), HasSubstr(path));
    // One line.
    EXPECT_EQ(config.status().message().find('\n'), absl::string_view::npos);
    return std::string(config.status().message());
  }

  fs::path dir_;
};

TEST_F(KubeconfigTest, DataFields) {
  const std::string path = Kubeconfig(
      absl::StrCat("    certificate-authority-data: ", absl::Base64Escape(kCa)),
      absl::StrCat("    client-certificate-data: ", absl::Base64Escape(kCert),
                   "\n    client-key-data: ", absl::Base64Escape(kKey), "\n    token: abc.def"));
  absl::StatusOr<ClusterConfig> config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://10.1.2.3:6443");
  EXPECT_EQ(config->ca_pem, kCa);
  EXPECT_EQ(config->client_cert_pem, kCert);
  EXPECT_EQ(config->client_key_pem, kKey);
  EXPECT_EQ(config->token, "abc.def");
  EXPECT_EQ(config->token_file, "");
  EXPECT_FALSE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->default_namespace, "team-a");
  EXPECT_THAT(config->source, HasSubstr(path));
  EXPECT_THAT(config->source, HasSubstr("ctx"));
}

TEST_F(KubeconfigTest, FileFieldsResolveAgainstTheKubeconfigsDirectory) {
  Write("pki/ca.crt", kCa);
  Write("pki/client.crt", kCert);
  const std::string key = Write("elsewhere/client.key", kKey);
  Write("kube/token", "  file-token\n");
  const std::string path =
      Kubeconfig("    certificate-authority: ../pki/ca.crt",
                 absl::StrCat("    client-certificate: ../pki/client.crt\n",
                              "    client-key: ", key, "\n", "    tokenFile: token"),
                 "kube/config");
  absl::StatusOr<ClusterConfig> config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->ca_pem, kCa);
  EXPECT_EQ(config->client_cert_pem, kCert);
  EXPECT_EQ(config->client_key_pem, kKey);
  EXPECT_EQ(config->token_file, (dir_ / "kube/token").string());
  EXPECT_EQ(BearerToken(config->token, config->token_file).Get().value(), "file-token");
}

TEST_F(KubeconfigTest, DataWinsOverFile) {
  const std::string path =
      Kubeconfig(absl::StrCat("    certificate-authority: /nonexistent/ca.crt\n",
                              "    certificate-authority-data: ", absl::Base64Escape(kCa)),
                 "    token: t");
  absl::StatusOr<ClusterConfig> config = LoadKubeconfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->ca_pem, kCa);
}

TEST_F(KubeconfigTest, ContextOverrideAndAnonymousUser) {
  const std::string path = Kubeconfig("    insecure-skip-tls-verify: true", "    token: t");
  absl::StatusOr<ClusterConfig> config = LoadKubeconfig(path, "other");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->insecure_skip_tls_verify);
  EXPECT_EQ(config->token, "");  // context "other" names no user
  EXPECT_EQ(config->default_namespace, "default");
  EXPECT_THAT(config->source, HasSubstr("other"));
  EXPECT_THAT(Failure(path, absl::StatusCode::kInvalidArgument, "nope"),
              HasSubstr("context \"nope\" not found"));
}

TEST_F(KubeconfigTest, MalformedYaml) {
  const std::string path = Write("config", "clusters:\n- name: [unclosed\n  cluster: {\n");
  EXPECT_THAT(Failure(path, absl::StatusCode::kInvalidArgument), HasSubstr("malformed YAML"));
  const std::string scalar = Write("scalar", "just a string\n");
  EXPECT_THAT(Failure(scalar, absl::StatusCode::kInvalidArgument), HasSubstr("not a kubeconfig"));
  const std::string typed = Kubeconfig("    insecure-skip-tls-verify: [1, 2]", "    token: t");
  EXPECT_THAT(Failure(typed, absl::StatusCode::kInvalidArgument),
              HasSubstr("malformed kubeconfig at line"));
}

TEST_F(KubeconfigTest, MissingPieces) {
  const std::string no_current =
      Write("no-current", "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n");
  EXPECT_THAT(Failure(no_current, absl::StatusCode::kInvalidArgument),
              HasSubstr("no current-context is set"));

  const std::string missing_cluster = Write("missing-cluster", R"(current-context: x
contexts:
- name: x
  context: {cluster: gone, user: u}
users:
- name: u
  user: {token: t}
)");
  EXPECT_THAT(Failure(missing_cluster, absl::StatusCode::kInvalidArgument),
              HasSubstr("context \"x\" names cluster \"gone\", which is not in clusters"));

  const std::string missing_user = Write("missing-user", R"(current-context: x
clusters:
- name: c
  cluster: {server: "https://k:6443"}
contexts:
- name: x
  context: {cluster: c, user: ghost}
)");
  EXPECT_THAT(Failure(missing_user, absl::StatusCode::kInvalidArgument),
              HasSubstr("context \"x\" names user \"ghost\", which is not in users"));

  const std::string no_server = Write("no-server", R"(current-context: x
clusters:
- name: c
  cluster: {certificate-authority-data: ""}
contexts:
- name: x
  context: {cluster: c}
)");
  EXPECT_THAT(Failure(no_server, absl::StatusCode::kInvalidArgument),
              HasSubstr("cluster \"c\" has no server"));
}

TEST_F(KubeconfigTest, BadFieldValues) {
  EXPECT_THAT(Failure(Kubeconfig("    certificate-authority-data: '!!not base64!!'", ""),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("cluster \"c\": certificate-authority-data is not valid base64"));
  EXPECT_THAT(
      Failure(Kubeconfig("", "    client-key-data: '%%%'"), absl::StatusCode::kInvalidArgument),
      HasSubstr("user \"u\": client-key-data is not valid base64"));
  const std::string missing_ca = Kubeconfig("    certificate-authority: missing.crt", "");
  EXPECT_THAT(
      Failure(missing_ca, absl::StatusCode::kNotFound),
      HasSubstr(absl::StrCat("cluster \"c\": certificate-authority: cannot read ",
                             (dir_ / "missing.crt").string(), ": No such file or directory")));
  EXPECT_THAT(
      Failure(Kubeconfig("", "    tokenFile: /nonexistent/token"), absl::StatusCode::kNotFound),
      HasSubstr("user \"u\": tokenFile: cannot read /nonexistent/token"));
  EXPECT_THAT(Failure(Kubeconfig("", absl::StrCat("    client-certificate-data: ",
                                                  absl::Base64Escape(kCert))),
                      absl::StatusCode::kInvalidArgument),
              HasSubstr("user \"u\" has a client certificate but no client key"));
  const std::string ftp = Write("ftp", R"(current-context: x
clusters:
- name: c
  cluster: {server: "ftp://k"}
contexts:
- name: x
  context: {cluster: c}
)");
  EXPECT_THAT(Failure(ftp, absl::StatusCode::kInvalidArgument),
              HasSubstr("server \"ftp://k\" is not an http(s) URL"));
}

TEST_F(KubeconfigTest, UnreadableKubeconfig) {
  const std::string path = (dir_ / "absent").string();
  EXPECT_THAT(
      Failure(path, absl::StatusCode::kNotFound),
      HasSubstr(absl::StrCat("kubeconfig: cannot read ", path, ": No such file or directory")));
  EXPECT_THAT(Failure(dir_.string(), absl::StatusCode::kFailedPrecondition),
              HasSubstr("Is a directory"));
}

TEST_F(KubeconfigTest, CredentialPluginsAreUnimplemented) {
  EXPECT_THAT(
      Failure(Kubeconfig("", "    exec:\n      command: aws\n      apiVersion: v1beta1"),
              absl::StatusCode::kUnimplemented),
      HasSubstr("user \"u\" uses an exec credential plugin, which psflow does not support"));
  EXPECT_THAT(Failure(Kubeconfig("", "    auth-provider:\n      name: gcp"),
                      absl::StatusCode::kUnimplemented),
              HasSubstr("user \"u\" uses an auth-provider plugin"));
  EXPECT_THAT(
      Failure(Kubeconfig("", "    username: a\n    password: b"), absl::StatusCode::kUnimplemented),
      HasSubstr("user \"u\" uses basic authentication"));
}

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
      if (value == nullptr) {
        ::unsetenv(name);
      } else {
        ::setenv(name, value, 1);
      }
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(KubeconfigTest, InClusterServiceAccount) {
  const std::string sa = "var/run/secrets/kubernetes.io/serviceaccount/";
  Write(sa + "token", "sa-token\n");
  Write(sa + "ca.crt", kCa);
  Write(sa + "namespace", "training\n");
  ScopedEnv env({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  absl::StatusOr<ClusterConfig> config = LoadInClusterConfig(dir_.string());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://10.96.0.1:443");
  EXPECT_EQ(config->ca_pem, kCa);
  EXPECT_EQ(config->token_file, (dir_ / sa / "token").string());
  EXPECT_EQ(config->default_namespace, "training");
  EXPECT_EQ(BearerToken(config->token, config->token_file).Get().value(), "sa-token");

  fs::remove(dir_ / sa / "namespace");
  ScopedEnv ipv6({{"KUBERNETES_SERVICE_HOST", "fd00::1"}});
  config = LoadInClusterConfig(dir_.string());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->server, "https://[fd00::1]:443");
  EXPECT_EQ(config->default_namespace, "default");

  fs::remove(dir_ / sa / "token");
  config = LoadInClusterConfig(dir_.string());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(config.status().message(), HasSubstr(absl::StrCat("in-cluster config: cannot read ",
                                                                (dir_ / sa / "token").string())));
}

TEST_F(KubeconfigTest, InClusterNeedsTheServiceVariables) {
  ScopedEnv env({{"KUBERNETES_SERVICE_HOST", nullptr}, {"KUBERNETES_SERVICE_PORT", "443"}});
  const absl::StatusOr<ClusterConfig> config = LoadInClusterConfig(dir_.string());
  EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(config.status().message(), HasSubstr("KUBERNETES_SERVICE_HOST"));
}

TEST_F(KubeconfigTest, ResolveOrder) {
  const std::string from_flag = Kubeconfig("", "    token: flag");
  const std::string from_env = Kubeconfig("", "    token: env", "env-config");
  Kubeconfig("", "    token: home", "home/.kube/config");
  const std::string sa = "var/run/secrets/kubernetes.io/serviceaccount/";
  {
    ScopedEnv env({{"KUBECONFIG", (":" + from_env + ":" + from_flag).c_str()},
                   {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                   {"HOME", (dir_ / "home").c_str()}});
    EXPECT_EQ(ResolveClusterConfig(from_flag).value().token, "flag");
    EXPECT_EQ(ResolveClusterConfig("").value().token, "env");
  }
  {
    // In a pod (the real service-account directory is absent here: the error shows the choice).
    ScopedEnv env({{"KUBECONFIG", nullptr},
                   {"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                   {"KUBERNETES_SERVICE_PORT", "443"},
                   {"HOME", (dir_ / "home").c_str()}});
    if (!fs::exists("/" + sa + "token")) {
      EXPECT_THAT(ResolveClusterConfig("").status().message(), HasSubstr("in-cluster config"));
    }
  }
  {
    ScopedEnv env({{"KUBECONFIG", ""},
                   {"KUBERNETES_SERVICE_HOST", nullptr},
                   {"HOME", (dir_ / "home").c_str()}});
    EXPECT_EQ(ResolveClusterConfig("").value().token, "home");
  }
  {
    ScopedEnv env(
        {{"KUBECONFIG", nullptr}, {"KUBERNETES_SERVICE_HOST", nullptr}, {"HOME", dir_.c_str()}});
    const absl::Status status = ResolveClusterConfig("").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(status.message(), HasSubstr("no Kubernetes configuration: pass --kubeconfig"));
  }
}

TEST_F(KubeconfigTest, BearerTokenFollowsItsFileAsItRotates) {
  const std::string path = Write("token", "first\n");
  BearerToken token("fallback", path);
  EXPECT_EQ(token.Get().value(), "first");
  Write("token", "second-token");  // a different size: noticed whatever the clock's resolution
  EXPECT_EQ(token.Get().value(), "second-token");
  // Rotation by rename, as kubelet's atomic writer does: a new inode.
  Write("token.new", "third-token!");
  fs::rename(dir_ / "token.new", path);
  EXPECT_EQ(token.Get().value(), "third-token!");
  // Gone: the last token read is kept.
  fs::remove(path);
  EXPECT_EQ(token.Get().value(), "third-token!");
}

TEST_F(KubeconfigTest, BearerTokenWithoutAFile) {
  EXPECT_EQ(BearerToken("fixed", "").Get().value(), "fixed");
  EXPECT_EQ(BearerToken("", "").Get().value(), "");
  // A file never readable: the fixed token, or UNAUTHENTICATED when there is none.
  EXPECT_EQ(BearerToken("fixed", (dir_ / "absent").string()).Get().value(), "fixed");
  const absl::StatusOr<std::string> none = BearerToken("", (dir_ / "absent").string()).Get();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(none.status().message(), HasSubstr((dir_ / "absent").string()));
}

}  // namespace
}  // namespace psflow::kube
