#include "operator/kube/api_status.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psflow::kube {
namespace {

absl::Status Make(absl::StatusCode code, absl::string_view what, int http_code,
                  absl::string_view reason, absl::string_view message) {
  return absl::Status(
      code, absl::StrCat(what, ": ", http_code, " ", reason, message.empty() ? "" : ": ", message));
}

absl::StatusCode CodeFor(int http_code, absl::string_view reason) {
  switch (http_code) {
    case 400:
    case 422:
      return absl::StatusCode::kInvalidArgument;
    case 401:
      return absl::StatusCode::kUnauthenticated;
    case 403:
      return absl::StatusCode::kPermissionDenied;
    case 404:
      return absl::StatusCode::kNotFound;
    case 409:
      return reason == "AlreadyExists" ? absl::StatusCode::kAlreadyExists
                                       : absl::StatusCode::kAborted;
    case 410:
      return absl::StatusCode::kOutOfRange;
    case 429:
      return absl::StatusCode::kUnavailable;
    default:
      break;
  }
  if (http_code >= 500) return absl::StatusCode::kUnavailable;
  return absl::StatusCode::kUnknown;
}

}  // namespace

absl::Status StatusFromStatusObject(const nlohmann::json& status_object, absl::string_view what) {
  int code = 500;
  std::string reason = "Unknown";
  std::string message;
  if (status_object.is_object()) {
    if (auto it = status_object.find("code");
        it != status_object.end() && it->is_number_integer()) {
      code = it->get<int>();
    }
    if (auto it = status_object.find("reason"); it != status_object.end() && it->is_string()) {
      reason = it->get<std::string>();
    }
    if (auto it = status_object.find("message"); it != status_object.end() && it->is_string()) {
      message = it->get<std::string>();
    }
  }
  return Make(CodeFor(code, reason), what, code, reason, message);
}

absl::Status StatusFromHttp(int http_code, absl::string_view body, absl::string_view what) {
  if (http_code >= 200 && http_code < 300) return absl::OkStatus();
  nlohmann::json parsed = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  // Only a "kind" that is the string "Status": json::value would throw on another type.
  const auto kind = parsed.is_object() ? parsed.find("kind") : parsed.end();
  if (parsed.is_object() && kind != parsed.end() && kind->is_string() && *kind == "Status") {
    parsed["code"] = http_code;  // the HTTP code is the authority
    return StatusFromStatusObject(parsed, what);
  }
  std::string snippet(body.substr(0, 200));
  return Make(CodeFor(http_code, ""), what, http_code, "", snippet);
}

int HttpCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
      return 422;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kOutOfRange:
      return 410;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

nlohmann::json StatusObjectFor(const absl::Status& status) {
  const int code = HttpCodeFor(status);
  std::string reason;
  switch (code) {
    case 401:
      reason = "Unauthorized";
      break;
    case 403:
      reason = "Forbidden";
      break;
    case 404:
      reason = "NotFound";
      break;
    case 409:
      reason = status.code() == absl::StatusCode::kAlreadyExists ? "AlreadyExists" : "Conflict";
      break;
    case 410:
      reason = "Expired";
      break;
    case 422:
      reason = "Invalid";
      break;
    case 429:
      reason = "TooManyRequests";
      break;
    case 503:
      reason = "ServiceUnavailable";
      break;
    default:
      reason = "InternalError";
      break;
  }
  return {{"kind", "Status"},
          {"apiVersion", "v1"},
          {"metadata", nlohmann::json::object()},
          {"status", "Failure"},
          {"message", std::string(status.message())},
          {"reason", reason},
          {"code", code}};
}

bool IsNamespaceTerminating(const absl::Status& status) {
  return status.code() == absl::StatusCode::kPermissionDenied &&
         absl::StrContains(status.message(), "because it is being terminated");
}

}  // namespace psflow::kube
