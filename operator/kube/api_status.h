// Kubernetes API errors <-> absl::Status, both ways, so the client and the test API server agree.
//
//   HTTP  reason (metav1.Status)   absl code
//   400   BadRequest               INVALID_ARGUMENT
//   401   Unauthorized             UNAUTHENTICATED
//   403   Forbidden                PERMISSION_DENIED
//   404   NotFound                 NOT_FOUND
//   409   AlreadyExists            ALREADY_EXISTS
//   409   Conflict                 ABORTED
//   410   Gone / Expired           OUT_OF_RANGE
//   422   Invalid                  INVALID_ARGUMENT
//   429   TooManyRequests          UNAVAILABLE
//   5xx   InternalError, ...       UNAVAILABLE
#ifndef PSFLOW_OPERATOR_KUBE_API_STATUS_H_
#define PSFLOW_OPERATOR_KUBE_API_STATUS_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow::kube {

// The status for an HTTP answer. `body` is the answer's body: when it is a metav1.Status its
// reason and message are used; otherwise its first 200 bytes. `what` ("GET /api/v1/...") starts
// the message. OK for 2xx.
absl::Status StatusFromHttp(int http_code, absl::string_view body, absl::string_view what);

// The status carried by a watch ERROR event's object (a metav1.Status).
absl::Status StatusFromStatusObject(const nlohmann::json& status_object, absl::string_view what);

// Server side: HTTP code and metav1.Status object for a non-OK status.
int HttpCodeFor(const absl::Status& status);
nlohmann::json StatusObjectFor(const absl::Status& status);

// OUT_OF_RANGE: the resourceVersion asked for is gone; list again.
inline bool IsGone(const absl::Status& status) {
  return status.code() == absl::StatusCode::kOutOfRange;
}
// ABORTED: someone else wrote the object first; read it again and retry.
inline bool IsConflict(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted;
}
// The NamespaceLifecycle admission plugin's refusal of anything new in a namespace being deleted
// (403, "... because it is being terminated"): nothing to retry or report.
bool IsNamespaceTerminating(const absl::Status& status);

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_API_STATUS_H_
