#include "tests/kube/object_rules.h"

#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"

namespace psflow::kubetest {

using Json = nlohmann::json;

absl::Status NotServedError() {
  return absl::NotFoundError("the server could not find the requested resource");
}

std::string QuotedName(const kube::Resource& r, absl::string_view name) {
  return absl::StrCat(r.QualifiedName(), " \"", name, "\"");
}

absl::Status ConflictError(const kube::Resource& r, absl::string_view name) {
  return absl::AbortedError(absl::StrCat(
      "Operation cannot be fulfilled on ", QuotedName(r, name),
      ": the object has been modified; please apply your changes to the latest version and "
      "try again"));
}

absl::Status UidPreconditionError(absl::string_view wanted, absl::string_view actual) {
  return absl::AbortedError(absl::StrCat("Precondition failed: UID in precondition: ", wanted,
                                         ", UID in object meta: ", actual));
}

absl::StatusOr<std::string> ObjectNamespace(const kube::Resource& r, absl::string_view ns) {
  if (!r.namespaced) return std::string();
  if (ns.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(r.plural, " are namespaced: the request needs a namespace"));
  }
  return std::string(ns);
}

absl::Status NormalizeBody(const kube::Resource& r, const std::string& ns, Json& body) {
  if (!body.is_object()) return absl::InvalidArgumentError("the body must be a JSON object");
  if (auto it = body.find("apiVersion");
      it != body.end() && !(it->is_string() && *it == r.ApiVersion())) {
    return absl::InvalidArgumentError(absl::StrCat("the API version in the data (", it->dump(),
                                                   ") does not match the expected API version (",
                                                   r.ApiVersion(), ")"));
  }
  if (auto it = body.find("kind"); it != body.end() && !(it->is_string() && *it == r.kind)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the kind in the data (", it->dump(), ") does not match the expected kind (", r.kind, ")"));
  }
  body["apiVersion"] = r.ApiVersion();
  body["kind"] = r.kind;
  Json& meta = body["metadata"];
  if (meta.is_null()) meta = Json::object();
  if (!meta.is_object()) return absl::InvalidArgumentError("metadata must be an object");
  if (!r.namespaced) {
    meta.erase("namespace");
    return absl::OkStatus();
  }
  const std::string body_ns = kube::StringAt(body, "metadata", "namespace");
  if (!body_ns.empty() && body_ns != ns) {
    return absl::InvalidArgumentError(
        "the namespace of the provided object does not match the namespace sent on the request");
  }
  meta["namespace"] = ns;
  return absl::OkStatus();
}

bool SpecChanged(const Json& a, const Json& b) {
  Json x = a;
  Json y = b;
  for (Json* o : {&x, &y}) {
    o->erase("metadata");
    o->erase("status");
  }
  return x != y;
}

std::vector<std::string> Finalizers(const Json& object) {
  std::vector<std::string> out;
  if (!object.contains("metadata") || !object["metadata"].is_object()) return out;
  const Json& meta = object["metadata"];
  auto it = meta.find("finalizers");
  if (it == meta.end() || !it->is_array()) return out;
  for (const Json& f : *it) {
    if (f.is_string()) out.push_back(f.get<std::string>());
  }
  return out;
}

void KeepMetadataField(const Json& from, Json& to, const char* field) {
  const Json& meta = from["metadata"];
  if (auto it = meta.find(field); it != meta.end()) {
    to["metadata"][field] = *it;
  } else {
    to["metadata"].erase(field);
  }
}

std::vector<std::string> OwnerUids(const Json& object) {
  std::vector<std::string> uids;
  if (!object.contains("metadata") || !object["metadata"].is_object()) return uids;
  const Json& meta = object["metadata"];
  auto refs = meta.find("ownerReferences");
  if (refs == meta.end() || !refs->is_array()) return uids;
  for (const Json& ref : *refs) {
    if (ref.is_object() && ref.contains("uid") && ref["uid"].is_string()) {
      uids.push_back(ref["uid"].get<std::string>());
    }
  }
  return uids;
}

void RemoveOwnerReference(Json& object, const std::string& owner_uid) {
  Json& meta = object["metadata"];
  auto refs = meta.find("ownerReferences");
  if (refs == meta.end() || !refs->is_array()) return;
  Json kept = Json::array();
  for (const Json& ref : *refs) {
    if (!(ref.is_object() && ref.value("uid", "") == owner_uid)) kept.push_back(ref);
  }
  if (kept.empty()) {
    meta.erase("ownerReferences");
  } else {
    *refs = std::move(kept);
  }
}

}  // namespace psflow::kubetest
