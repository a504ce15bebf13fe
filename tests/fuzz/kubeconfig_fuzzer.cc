// libFuzzer target: arbitrary bytes as a kubeconfig file, read as the operator reads one
// (kube::LoadKubeconfig). Beside it lie the files a kubeconfig may name relatively ("ca.crt",
// "client.crt", "client.key", "token"). Any input must end in a configuration or one of the
// errors kubeconfig.h lists, never a crash or an exception; a configuration it accepts has an
// http(s) server without a trailing slash and a client certificate only with its key.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/match.h"
#include "operator/kube/kubeconfig.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

bool ExpectedError(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  static const std::string path = [] {
    fuzz::WriteScratchFile("ca.crt",
                           "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
    fuzz::WriteScratchFile("client.crt", "client certificate");
    fuzz::WriteScratchFile("client.key", "client key");
    fuzz::WriteScratchFile("token", "abc.def.ghi\n");
    return fuzz::ScratchDir() + "/kubeconfig";
  }();
  fuzz::WriteScratchFile("kubeconfig", fuzz::AsText(data, size));
  const absl::StatusOr<kube::ClusterConfig> config = kube::LoadKubeconfig(path);
  fuzz::RecordOutcome(config.ok());
  if (!config.ok()) {
    PSFLOW_FUZZ_CHECK(ExpectedError(config.status().code()));
    return 0;
  }
  PSFLOW_FUZZ_CHECK(absl::StartsWith(config->server, "https://") ||
                    absl::StartsWith(config->server, "http://"));
  PSFLOW_FUZZ_CHECK(!absl::EndsWith(config->server, "/"));
  PSFLOW_FUZZ_CHECK(config->client_cert_pem.empty() == config->client_key_pem.empty());
  PSFLOW_FUZZ_CHECK(!config->default_namespace.empty());
  return 0;
}
