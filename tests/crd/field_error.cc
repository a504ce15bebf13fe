#include "tests/crd/field_error.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/crd/go_format.h"

namespace psflow::kubetest {
namespace {

absl::string_view TypeString(FieldErrorType type) {
  switch (type) {
    case FieldErrorType::kRequired:
      return "Required value";
    case FieldErrorType::kInvalid:
    case FieldErrorType::kTypeInvalid:
      return "Invalid value";
    case FieldErrorType::kNotSupported:
      return "Unsupported value";
    case FieldErrorType::kDuplicate:
      return "Duplicate value";
    case FieldErrorType::kForbidden:
      return "Forbidden";
    case FieldErrorType::kTooLong:
      return "Too long";
    case FieldErrorType::kTooMany:
      return "Too many";
  }
  return "Invalid value";
}

// field.Error prints numbers and booleans with %v, strings with %q (a nil value becomes the
// string "null"), everything else with %#v.
std::string BadValue(const nlohmann::json& value) {
  if (value.is_null()) return GoQuote("null");
  if (value.is_string()) return GoQuote(value.get<std::string>());
  if (value.is_number() || value.is_boolean()) return GoPlain(value);
  return GoSyntax(value);
}

FieldError Make(FieldErrorType type, std::string field, nlohmann::json value, std::string detail) {
  FieldError error;
  error.type = type;
  error.field = std::move(field);
  error.value = std::move(value);
  error.detail = std::move(detail);
  return error;
}

}  // namespace

std::string FieldError::ToString() const {
  std::string body(TypeString(type));
  switch (type) {
    case FieldErrorType::kRequired:
    case FieldErrorType::kForbidden:
    case FieldErrorType::kTooLong:
      break;  // these never show the value
    default:
      absl::StrAppend(&body, ": ", BadValue(value));
  }
  if (!detail.empty()) absl::StrAppend(&body, ": ", detail);
  return absl::StrCat(field, ": ", body);
}

FieldError Required(std::string field, std::string detail) {
  return Make(FieldErrorType::kRequired, std::move(field), "", std::move(detail));
}

FieldError Forbidden(std::string field, std::string detail) {
  return Make(FieldErrorType::kForbidden, std::move(field), "", std::move(detail));
}

FieldError Invalid(std::string field, nlohmann::json value, std::string detail) {
  return Make(FieldErrorType::kInvalid, std::move(field), std::move(value), std::move(detail));
}

FieldError TypeInvalid(std::string field, nlohmann::json value, std::string detail) {
  return Make(FieldErrorType::kTypeInvalid, std::move(field), std::move(value), std::move(detail));
}

FieldError Duplicate(std::string field, nlohmann::json value) {
  return Make(FieldErrorType::kDuplicate, std::move(field), std::move(value), "");
}

FieldError NotSupported(std::string field, nlohmann::json value,
                        const std::vector<std::string>& supported) {
  std::string detail;
  if (!supported.empty()) {
    std::vector<std::string> quoted;
    for (const auto& s : supported) quoted.push_back(GoQuote(s));
    detail = absl::StrCat("supported values: ", absl::StrJoin(quoted, ", "));
  }
  return Make(FieldErrorType::kNotSupported, std::move(field), std::move(value), std::move(detail));
}

FieldError TooLong(std::string field, int64_t max_bytes) {
  return Make(FieldErrorType::kTooLong, std::move(field), "",
              absl::StrCat("must have at most ", max_bytes, " bytes"));
}

FieldError TooMany(std::string field, int64_t actual, int64_t max_items) {
  return Make(FieldErrorType::kTooMany, std::move(field), actual,
              absl::StrCat("must have at most ", max_items, " items"));
}

std::string ChildPath(const std::string& path, const std::string& name) {
  return path.empty() ? name : absl::StrCat(path, ".", name);
}

std::string IndexPath(const std::string& path, size_t index) {
  return absl::StrCat(path, "[", index, "]");
}

std::string KeyPath(const std::string& path, const std::string& key) {
  return absl::StrCat(path, "[", key, "]");
}

std::string InvalidObjectMessage(absl::string_view kind, absl::string_view group,
                                 absl::string_view name, const std::vector<FieldError>& errors) {
  std::vector<std::string> messages;
  std::set<std::string> seen;
  for (const auto& error : errors) {
    std::string message = error.ToString();
    if (seen.insert(message).second) messages.push_back(std::move(message));
  }
  std::string list = absl::StrJoin(messages, ", ");
  if (messages.size() > 1) list = absl::StrCat("[", list, "]");
  // schema.GroupKind.String(): "Kind.group", or "Kind" for the core group.
  const std::string qualified = group.empty() ? std::string(kind) : absl::StrCat(kind, ".", group);
  return absl::StrCat(qualified, " ", GoQuote(name), " is invalid: ", list);
}

}  // namespace psflow::kubetest
