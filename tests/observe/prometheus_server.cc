#include "tests/observe/prometheus_server.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/http_get.h"
#include "tests/test_util.h"

namespace psflow::observe {

using std::chrono::milliseconds;

std::string PrometheusBinary() { return PSFLOW_PROMETHEUS; }
std::string PromtoolBinary() { return PSFLOW_PROMTOOL; }

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&out, "%%%02X", c);
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PrometheusServer>> PrometheusServer::Start(
    const std::string& config_file, const std::string& storage_dir, int port,
    std::chrono::seconds timeout) {
  absl::StatusOr<std::unique_ptr<BackgroundProcess>> process = BackgroundProcess::Start(
      {PrometheusBinary(), "--config.file=" + config_file, "--storage.tsdb.path=" + storage_dir,
       absl::StrCat("--web.listen-address=127.0.0.1:", port), "--log.level=warn"},
      testing::Environment({}));
  if (!process.ok()) return process.status();
  std::unique_ptr<PrometheusServer> server(new PrometheusServer(*std::move(process), port));
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < give_up) {
    if (HttpGet("127.0.0.1", port, "/-/ready", milliseconds(500)).ok()) return server;
    if (auto exit = server->process_->Wait(milliseconds(100))) {
      return absl::UnavailableError(
          absl::StrCat("prometheus exited (", exit->Describe(), "):\n", server->log()));
    }
  }
  return absl::UnavailableError(
      absl::StrCat("prometheus not ready after ", timeout.count(), " s:\n", server->log()));
}

absl::StatusOr<nlohmann::json> PrometheusServer::Api(
    const std::string& endpoint, const std::vector<std::pair<std::string, std::string>>& params) {
  std::string path = "/api/v1/" + endpoint;
  for (size_t i = 0; i < params.size(); ++i) {
    absl::StrAppend(&path, i == 0 ? "?" : "&", params[i].first, "=", UrlEncode(params[i].second));
  }
  absl::StatusOr<std::string> body = HttpGet("127.0.0.1", port_, path, milliseconds(10000));
  if (!body.ok()) return body.status();
  nlohmann::json response = nlohmann::json::parse(*body, nullptr, /*allow_exceptions=*/false);
  if (response.is_discarded() || !response.is_object()) {
    return absl::InternalError(absl::StrCat(endpoint, ": not JSON: ", *body));
  }
  if (response.value("status", "") != "success" || !response.contains("data")) {
    return absl::InternalError(absl::StrCat(endpoint, ": ", response.dump()));
  }
  return response["data"];
}

absl::StatusOr<nlohmann::json> PrometheusServer::Query(const std::string& expr, double time) {
  return Api("query", {{"query", expr}, {"time", absl::StrFormat("%.3f", time)}});
}

}  // namespace psflow::observe
