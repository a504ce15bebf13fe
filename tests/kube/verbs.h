// The verbs the test API server, the object store and the in-memory client count, forbid and
// inject faults into. They are Kubernetes' RBAC verbs, plus "update_status" for a PUT to the
// status subresource (RBAC calls that "update" on "<plural>/status").
#ifndef PSFLOW_TESTS_KUBE_VERBS_H_
#define PSFLOW_TESTS_KUBE_VERBS_H_

#include "absl/strings/string_view.h"

namespace psflow::kubetest::verb {

inline constexpr absl::string_view kGet = "get";
inline constexpr absl::string_view kList = "list";
inline constexpr absl::string_view kWatch = "watch";
inline constexpr absl::string_view kCreate = "create";
inline constexpr absl::string_view kUpdate = "update";
inline constexpr absl::string_view kUpdateStatus = "update_status";
inline constexpr absl::string_view kDelete = "delete";

inline constexpr absl::string_view kAll[] = {kGet,    kList,         kWatch, kCreate,
                                             kUpdate, kUpdateStatus, kDelete};

}  // namespace psflow::kubetest::verb

#endif  // PSFLOW_TESTS_KUBE_VERBS_H_
