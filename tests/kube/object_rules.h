// The API server's rules for objects written to it, as pure functions: what a create or update
// body must look like, what an update may change, what makes a new generation, and the errors
// it answers with. ObjectStore applies them.
#ifndef PSFLOW_TESTS_KUBE_OBJECT_RULES_H_
#define PSFLOW_TESTS_KUBE_OBJECT_RULES_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "operator/kube/resource.h"

namespace psflow::kubetest {

// NOT_FOUND "the server could not find the requested resource": an unregistered resource (a
// missing CRD), group, version or subresource.
absl::Status NotServedError();
// `pods "x"` or `trainingjobs.psflow.io "x"`: an object as the API server's messages name it.
std::string QuotedName(const kube::Resource& resource, absl::string_view name);
// ABORTED (409 Conflict): "Operation cannot be fulfilled on pods "x": the object has been
// modified; please apply your changes to the latest version and try again".
absl::Status ConflictError(const kube::Resource& resource, absl::string_view name);
// ABORTED (409 Conflict): a uid precondition that does not hold.
absl::Status UidPreconditionError(absl::string_view wanted, absl::string_view actual);

// The namespace objects of `resource` live in for a request naming `ns`: "" for cluster-scoped
// resources; INVALID_ARGUMENT when a namespaced resource's request has none.
absl::StatusOr<std::string> ObjectNamespace(const kube::Resource& resource, absl::string_view ns);

// Checks a create/update body and fills in what the request implies: apiVersion and kind
// (INVALID_ARGUMENT when they name another resource), metadata (an object) and
// metadata.namespace (INVALID_ARGUMENT when the body names another one than `ns`).
absl::Status NormalizeBody(const kube::Resource& resource, const std::string& ns,
                           nlohmann::json& body);

// Whether anything outside metadata and status differs: what makes a new generation.
bool SpecChanged(const nlohmann::json& a, const nlohmann::json& b);

// metadata.finalizers (the strings among them).
std::vector<std::string> Finalizers(const nlohmann::json& object);

// Copies metadata[field] of `from` into `to`, or removes it from `to` when `from` has none.
void KeepMetadataField(const nlohmann::json& from, nlohmann::json& to, const char* field);

// The uids of metadata.ownerReferences.
std::vector<std::string> OwnerUids(const nlohmann::json& object);
// Removes the ownerReferences to `owner_uid` (and the list when it empties).
void RemoveOwnerReference(nlohmann::json& object, const std::string& owner_uid);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_OBJECT_RULES_H_
