// RestKubeClient over TLS: certificates made with the openssl command-line tool, served by the
// scripted server with OpenSSL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/read_file.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/rest_client.h"
#include "tests/kube/scripted_http_server.h"

namespace psflow::kube {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A CA, a server certificate it signed for IP 127.0.0.1 only, a client certificate it signed,
// and an unrelated CA.
class RestClientTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = (fs::temp_directory_path() / "rest_client_tls_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = new fs::path(pattern);
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    const std::string script = absl::StrCat(
        "set -e\n", "printf 'subjectAltName=IP:127.0.0.1\\n' > server.ext\n",
        "printf 'extendedKeyUsage=clientAuth\\n' > client.ext\n", "openssl req -x509 ", key,
        " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca\n", "openssl req -x509 ", key,
        " -keyout other.key -out other.crt -days 2 -subj /CN=other\n", "openssl req ", key,
        " -keyout server.key -out server.csr -subj /CN=apiserver\n",
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 ",
        "-extfile server.ext -out server.crt\n", "openssl req ", key,
        " -keyout client.key -out client.csr -subj /CN=psflow-operator\n",
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 ",
        "-extfile client.ext -out client.crt\n");
    std::ofstream(*dir_ / "make_certs.sh") << script;
    const int rc = std::system(
        absl::StrCat("cd '", dir_->string(), "' && sh make_certs.sh >openssl.log 2>&1").c_str());
    openssl_ok_ = rc == 0 && fs::exists(*dir_ / "client.crt");
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
  }

  void SetUp() override {
    if (!openssl_ok_) GTEST_SKIP() << "the openssl command could not make test certificates";
    ScriptedHttpServer::Tls tls{Path("server.crt"), Path("server.key"), Path("ca.crt")};
    absl::StatusOr<std::unique_ptr<ScriptedHttpServer>> server = ScriptedHttpServer::Start(
        [](const HttpExchange& exchange, ScriptedHttpServer::Responder& r) {
          if (absl::StrContains(exchange.target, "watch=true")) {
            r.StartChunked(200);
            r.Chunk(R"({"type":"ADDED","object":{"metadata":{"name":"w"}}})"
                    "\n");
            r.WaitForClientClose(std::chrono::seconds(30));
            return;
          }
          r.Send(200, Json{{"metadata", {{"name", "p"}}},
                           {"token", exchange.headers.count("authorization")
                                         ? exchange.headers.at("authorization")
                                         : ""}}
                          .dump());
        },
        &tls);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  static std::string Path(const char* name) { return (*dir_ / name).string(); }
  static std::string Pem(const char* name) { return ReadFile(Path(name)).value(); }

  // A config trusting the test CA, with the client certificate.
  ClusterConfig Config() const {
    ClusterConfig config;
    config.server = server_->url();
    config.ca_pem = Pem("ca.crt");
    config.client_cert_pem = Pem("client.crt");
    config.client_key_pem = Pem("client.key");
    config.token = "tls-token";
    config.source = "tls test";
    return config;
  }

  static absl::StatusOr<Json> GetPod(const ClusterConfig& config) {
    RestKubeClient::Options options;
    options.request_timeout = std::chrono::seconds(10);
    absl::StatusOr<std::unique_ptr<RestKubeClient>> client =
        RestKubeClient::Create(config, options);
    if (!client.ok()) return client.status();
    return (*client)->Get(Pods(), "ns", "p");
  }

  static fs::path* dir_;
  static bool openssl_ok_;
  std::unique_ptr<ScriptedHttpServer> server_;
};

fs::path* RestClientTlsTest::dir_ = nullptr;
bool RestClientTlsTest::openssl_ok_ = false;

TEST_F(RestClientTlsTest, VerifiedServerAndClientCertificate) {
  absl::StatusOr<Json> pod = GetPod(Config());
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(Name(*pod), "p");
  EXPECT_EQ((*pod)["token"], "Bearer tls-token");
}

TEST_F(RestClientTlsTest, WatchStreamsAndStopsOverTls) {
  absl::StatusOr<std::unique_ptr<RestKubeClient>> client = RestKubeClient::Create(Config(), {});
  ASSERT_TRUE(client.ok()) << client.status();
  std::stop_source stop;
  std::vector<std::string> names;
  const absl::Status status =
      (*client)->Watch(Pods(), "ns", {}, stop.get_token(), [&](const WatchEvent& event) {
        names.push_back(Name(event.object));
        stop.request_stop();  // from the watching thread itself
      });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_EQ(names, std::vector<std::string>{"w"});
}

TEST_F(RestClientTlsTest, ServerCertificateFromAnotherCaIsRejected) {
  ClusterConfig config = Config();
  config.ca_pem = Pem("other.crt");
  const absl::Status status = GetPod(config).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr(server_->url()));
  // Without a CA the system's roots are used; they do not know the test CA either.
  config.ca_pem.clear();
  EXPECT_EQ(GetPod(config).status().code(), absl::StatusCode::kUnavailable);
  // Unless verification is off.
  config.insecure_skip_tls_verify = true;
  EXPECT_TRUE(GetPod(config).ok());
}

TEST_F(RestClientTlsTest, HostNameMustMatchTheCertificate) {
  // The certificate names IP 127.0.0.1 only; "localhost" reaches the same server but does not
  // match it.
  ClusterConfig config = Config();
  config.server = absl::StrCat("https://localhost:", server_->port());
  EXPECT_EQ(GetPod(config).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RestClientTlsTest, ServerRequiringAClientCertificateRefusesNone) {
  ClusterConfig config = Config();
  config.client_cert_pem.clear();
  config.client_key_pem.clear();
  EXPECT_EQ(GetPod(config).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RestClientTlsTest, BadPemsAreRejectedAtCreate) {
  ClusterConfig config = Config();
  config.ca_pem = "-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n";
  absl::Status status = RestKubeClient::Create(config, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("tls test: certificate authority"));

  config = Config();
  config.client_key_pem = Pem("server.key");  // not the client certificate's key
  status = RestKubeClient::Create(config, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("client key: key values mismatch"));

  config = Config();
  config.client_cert_pem = "garbage";
  status = RestKubeClient::Create(config, {}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("client certificate"));
}

}  // namespace
}  // namespace psflow::kube
