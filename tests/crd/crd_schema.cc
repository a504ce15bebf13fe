#include "tests/crd/crd_schema.h"

#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "tests/crd/go_format.h"
#include "tests/crd/resource_checks.h"
#include "tests/crd/schema_pruning.h"
#include "tests/crd/schema_validator.h"
#include "tests/crd/structural.h"
#include "tests/crd/yaml_json.h"

namespace psflow::kubetest {
namespace {

using nlohmann::json;

// j[k0][k1]..., or null when a step is missing or not an object.
const json* At(const json& j, std::initializer_list<const char*> keys) {
  const json* at = &j;
  for (const char* key : keys) {
    if (!at->is_object()) return nullptr;
    auto it = at->find(key);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

absl::StatusOr<std::string> RequiredString(const json& j, std::initializer_list<const char*> keys,
                                           absl::string_view what) {
  const json* value = At(j, keys);
  if (value == nullptr || !value->is_string() || value->get<std::string>().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the CRD has no ", what));
  }
  return value->get<std::string>();
}

std::string StringOr(const json* value, std::string fallback) {
  return value != nullptr && value->is_string() ? value->get<std::string>() : fallback;
}

// unstructured.NestedFieldNoCopy: the value at a dotted path (".spec.a.b"), whether it exists,
// and the accessor error when a step on the way is not an object.
struct Lookup {
  const json* value = nullptr;
  std::string error;
};

std::string JsonPath(const std::vector<std::string>& fields, size_t count) {
  std::vector<std::string> head(fields.begin(), fields.begin() + static_cast<ptrdiff_t>(count));
  return absl::StrCat(".", absl::StrJoin(head, "."));
}

Lookup Find(const json& object, const std::string& dotted) {
  const std::vector<std::string> fields = absl::StrSplit(absl::StripPrefix(dotted, "."), '.');
  const json* at = &object;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (at->is_null()) return {};
    if (!at->is_object()) {
      return {nullptr, absl::StrCat(JsonPath(fields, i + 1), " accessor error: ", GoPlain(*at),
                                    " is of the type ", GoTypeName(*at),
                                    ", expected map[string]interface{}")};
    }
    auto it = at->find(fields[i]);
    if (it == at->end()) return {};
    at = &*it;
  }
  return {at, ""};
}

std::string NotOfType(const std::string& dotted, const json& value, const char* expected) {
  return absl::StrCat(".", absl::StripPrefix(dotted, "."), " accessor error: ", GoPlain(value),
                      " is of the type ", GoTypeName(value), ", expected ", expected);
}

// customResourceValidator.ValidateScaleSpec/Status for one replicas path.
void CheckReplicas(const json& object, const std::string& path, std::vector<FieldError>* errors) {
  const Lookup found = Find(object, path);
  if (!found.error.empty()) {
    errors->push_back(Invalid(path, 0, found.error));
  } else if (found.value == nullptr) {
    return;
  } else if (!IsGoInt(*found.value)) {
    errors->push_back(Invalid(path, 0, NotOfType(path, *found.value, "int64")));
  } else if (const int64_t replicas = found.value->get<int64_t>(); replicas < 0) {
    errors->push_back(Invalid(path, replicas, "should be a non-negative integer"));
  } else if (replicas > std::numeric_limits<int32_t>::max()) {
    errors->push_back(Invalid(
        path, replicas,
        absl::StrCat("should be less than or equal to ", std::numeric_limits<int32_t>::max())));
  }
}

}  // namespace

absl::StatusOr<CrdSchema> CrdSchema::Load(const std::string& crd_path, absl::string_view version) {
  ASSIGN_OR_RETURN(json crd, LoadYamlFile(crd_path));
  auto schema = FromDefinition(std::move(crd), version);
  if (!schema.ok()) {
    return absl::Status(schema.status().code(),
                        absl::StrCat(crd_path, ": ", schema.status().message()));
  }
  return schema;
}

absl::StatusOr<CrdSchema> CrdSchema::FromDefinition(json crd, absl::string_view version) {
  if (StringOr(At(crd, {"apiVersion"}), "") != "apiextensions.k8s.io/v1" ||
      StringOr(At(crd, {"kind"}), "") != "CustomResourceDefinition") {
    return absl::InvalidArgumentError("not an apiextensions.k8s.io/v1 CustomResourceDefinition");
  }
  CrdSchema out;
  ASSIGN_OR_RETURN(out.name_, RequiredString(crd, {"metadata", "name"}, "metadata.name"));
  ASSIGN_OR_RETURN(out.group_, RequiredString(crd, {"spec", "group"}, "spec.group"));
  ASSIGN_OR_RETURN(out.kind_, RequiredString(crd, {"spec", "names", "kind"}, "spec.names.kind"));
  ASSIGN_OR_RETURN(out.plural_,
                   RequiredString(crd, {"spec", "names", "plural"}, "spec.names.plural"));
  const json* versions = At(crd, {"spec", "versions"});
  if (versions == nullptr || !versions->is_array()) {
    return absl::InvalidArgumentError("the CRD has no spec.versions");
  }
  std::optional<size_t> index;
  for (size_t i = 0; i < versions->size(); ++i) {
    if (StringOr(At((*versions)[i], {"name"}), "") == version) index = i;
  }
  if (!index) {
    return absl::InvalidArgumentError(absl::StrCat("the CRD has no version ", version));
  }
  const json& entry = (*versions)[*index];
  const std::string path = absl::StrCat("spec.versions[", *index, "].schema.openAPIV3Schema");
  const json* schema = At(entry, {"schema", "openAPIV3Schema"});
  if (schema == nullptr) return absl::InvalidArgumentError(absl::StrCat("the CRD has no ", path));
  ASSIGN_OR_RETURN(Schema parsed, ParseSchema(*schema, path));
  if (const json* scale = At(entry, {"subresources", "scale"})) {
    Scale s;
    ASSIGN_OR_RETURN(s.spec_replicas_path,
                     RequiredString(*scale, {"specReplicasPath"}, "scale.specReplicasPath"));
    ASSIGN_OR_RETURN(s.status_replicas_path,
                     RequiredString(*scale, {"statusReplicasPath"}, "scale.statusReplicasPath"));
    if (const json* selector = At(*scale, {"labelSelectorPath"})) {
      s.label_selector_path = StringOr(selector, "");
    }
    out.scale_ = std::move(s);
  }
  out.version_ = std::string(version);
  out.version_index_ = *index;
  out.schema_ = std::make_shared<const Schema>(std::move(parsed));
  out.definition_ = std::make_shared<const json>(std::move(crd));
  return out;
}

const json& CrdSchema::version_definition() const {
  return (*definition_)["spec"]["versions"][version_index_];
}

void CrdSchema::ValidateScale(const json& object, std::vector<FieldError>* errors) const {
  if (!scale_) return;
  CheckReplicas(object, scale_->spec_replicas_path, errors);
  CheckReplicas(object, scale_->status_replicas_path, errors);
  if (scale_->label_selector_path) {
    const std::string& path = *scale_->label_selector_path;
    const Lookup found = Find(object, path);
    if (!found.error.empty()) {
      errors->push_back(Invalid(path, "", found.error));
    } else if (found.value != nullptr && !found.value->is_string()) {
      errors->push_back(Invalid(path, "", NotOfType(path, *found.value, "string")));
    }
  }
}

std::vector<FieldError> CrdSchema::Violations(const json& object) const {
  std::vector<FieldError> errors;
  // TypeMeta first; when it is wrong nothing else is checked.
  const std::string kind = StringOr(At(object, {"kind"}), "");
  const std::string api_version = StringOr(At(object, {"apiVersion"}), "");
  const std::string want_api_version = absl::StrCat(group_, "/", version_);
  if (kind != kind_) errors.push_back(Invalid("kind", kind, absl::StrCat("must be ", kind_)));
  if (api_version != want_api_version) {
    errors.push_back(
        Invalid("apiVersion", api_version, absl::StrCat("must be ", want_api_version)));
  }
  if (!errors.empty()) return errors;
  ValidateValue(*schema_, object, "", &errors);
  ValidateScale(object, &errors);
  ValidateEmbeddedResources(*schema_, object, &errors);
  ValidateListTypes(*schema_, object, &errors);
  return errors;
}

absl::Status CrdSchema::Validate(const json& object) const {
  const std::vector<FieldError> errors = Violations(object);
  if (errors.empty()) return absl::OkStatus();
  const std::string name = StringOr(At(object, {"metadata", "name"}), "");
  return absl::InvalidArgumentError(InvalidObjectMessage(kind_, group_, name, errors));
}

void CrdSchema::Prune(json& object, std::vector<std::string>* unknown_fields) const {
  PruneUnknownFields(*schema_, object, unknown_fields);
  PruneNulls(*schema_, object);
}

void CrdSchema::Default(json& object) const { ApplyDefaults(*schema_, object); }

absl::Status CrdSchema::CheckStructural() const {
  const std::vector<FieldError> errors = StructuralViolations(
      *schema_, absl::StrCat("spec.versions[", version_index_, "].schema.openAPIV3Schema"));
  if (errors.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      InvalidObjectMessage("CustomResourceDefinition", "apiextensions.k8s.io", name_, errors));
}

}  // namespace psflow::kubetest
