// One validation failure in the shape of Kubernetes' field.Error, and the API server's one-line
// message for a rejected object.
#ifndef PSFLOW_TESTS_CRD_FIELD_ERROR_H_
#define PSFLOW_TESTS_CRD_FIELD_ERROR_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace psflow::kubetest {

enum class FieldErrorType {
  kRequired,      // "Required value"
  kInvalid,       // "Invalid value"
  kTypeInvalid,   // "Invalid value" (the schema's type did not match)
  kNotSupported,  // "Unsupported value"
  kDuplicate,     // "Duplicate value"
  kForbidden,     // "Forbidden"
  kTooLong,       // "Too long"
  kTooMany,       // "Too many"
};

struct FieldError {
  FieldErrorType type = FieldErrorType::kInvalid;
  std::string field;     // "spec.replicaSpecs.Chief.replicas"; "" for none
  nlohmann::json value;  // the bad value, printed as Go prints it
  std::string detail;

  // "<field>: <type>[: <value>][: <detail>]", as field.Error.Error().
  std::string ToString() const;
};

FieldError Required(std::string field, std::string detail = "");
FieldError Forbidden(std::string field, std::string detail);
FieldError Invalid(std::string field, nlohmann::json value, std::string detail);
FieldError TypeInvalid(std::string field, nlohmann::json value, std::string detail);
FieldError Duplicate(std::string field, nlohmann::json value);
// Detail "supported values: "a", "b"".
FieldError NotSupported(std::string field, nlohmann::json value,
                        const std::vector<std::string>& supported);
FieldError TooLong(std::string field, int64_t max_bytes);
FieldError TooMany(std::string field, int64_t actual, int64_t max_items);

// field.Path spelling: Child ("a.b"; "b" when `path` is empty), Index ("a[3]"), Key ("a[k]").
std::string ChildPath(const std::string& path, const std::string& name);
std::string IndexPath(const std::string& path, size_t index);
std::string KeyPath(const std::string& path, const std::string& key);

// `<Kind>.<group> "<name>" is invalid: <errors>`: one error as is, several (duplicates dropped)
// as "[e1, e2]" — the message of the API server's 422 Invalid status.
std::string InvalidObjectMessage(absl::string_view kind, absl::string_view group,
                                 absl::string_view name, const std::vector<FieldError>& errors);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_FIELD_ERROR_H_
