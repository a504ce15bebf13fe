#include "tests/crd/schema.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "core/status_macros.h"

namespace psflow::kubetest {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// String formats the API server validates (apiextensions' supported set, dashes removed as
// go-openapi normalizes names), and the subset this validator implements.
const std::set<std::string>& KubernetesStringFormats() {
  static const auto* formats = new std::set<std::string>{
      "bsonobjectid", "uri",        "email",    "hostname", "ipv4",     "ipv6", "cidr",
      "mac",          "uuid",       "uuid3",    "uuid4",    "uuid5",    "isbn", "isbn10",
      "isbn13",       "creditcard", "ssn",      "hexcolor", "rgbcolor", "byte", "password",
      "date",         "duration",   "datetime", "quantity"};
  return *formats;
}
const std::set<std::string>& ImplementedStringFormats() {
  static const auto* formats = new std::set<std::string>{"date", "datetime", "password"};
  return *formats;
}

// The format the API server keeps for this type (StripUnsupportedFormatsPostProcess).
absl::StatusOr<std::string> EffectiveFormat(const std::string& type, const std::string& format,
                                            const std::string& path) {
  if (format.empty()) return format;
  if (type.empty() || type == "string") {
    const std::string normalized = absl::StrReplaceAll(format, {{"-", ""}});
    if (!KubernetesStringFormats().count(normalized)) return std::string();
    if (!ImplementedStringFormats().count(normalized)) {
      return absl::UnimplementedError(
          absl::StrCat(path, ".format: \"", format,
                       "\" is checked by the API server but not by this validator"));
    }
    return format;
  }
  if (type == "integer") return (format == "int32" || format == "int64") ? format : "";
  if (type == "number") return (format == "float" || format == "double") ? format : "";
  return std::string();
}

absl::StatusOr<std::string> String(const json& value, const std::string& path) {
  if (!value.is_string()) return Bad(path, "must be a string");
  return value.get<std::string>();
}

absl::StatusOr<bool> Bool(const json& value, const std::string& path) {
  if (!value.is_boolean()) return Bad(path, "must be a boolean");
  return value.get<bool>();
}

absl::StatusOr<double> Number(const json& value, const std::string& path) {
  if (!value.is_number()) return Bad(path, "must be a number");
  return value.get<double>();
}

absl::StatusOr<int64_t> Count(const json& value, const std::string& path) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0) {
    return Bad(path, "must be a non-negative integer");
  }
  return value.get<int64_t>();
}

absl::StatusOr<std::vector<std::string>> Strings(const json& value, const std::string& path) {
  if (!value.is_array()) return Bad(path, "must be a list of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    ASSIGN_OR_RETURN(std::string s, String(value[i], absl::StrCat(path, "[", i, "]")));
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Schema>> Child(const json& value, const std::string& path) {
  ASSIGN_OR_RETURN(Schema child, ParseSchema(value, path));
  return std::make_unique<Schema>(std::move(child));
}

absl::StatusOr<std::vector<Schema>> Children(const json& value, const std::string& path) {
  if (!value.is_array()) return Bad(path, "must be a list of schemas");
  std::vector<Schema> out;
  for (size_t i = 0; i < value.size(); ++i) {
    ASSIGN_OR_RETURN(Schema child, ParseSchema(value[i], absl::StrCat(path, "[", i, "]")));
    out.push_back(std::move(child));
  }
  return out;
}

}  // namespace

std::vector<std::string> Schema::Types() const {
  if (int_or_string) return {"integer", "string"};
  if (type.empty()) return {};
  return {type};
}

const Schema* Schema::FieldSchema(const std::string& key) const {
  if (auto it = properties.find(key); it != properties.end()) return it->second.get();
  return additional_properties.get();
}

absl::StatusOr<Schema> ParseSchema(const json& node, const std::string& path) {
  if (!node.is_object()) return Bad(path, "must be a schema object");
  static const auto* kForbidden = new std::set<std::string>{
      "id",           "$schema",           "$ref",           "definitions",
      "dependencies", "patternProperties", "additionalItems"};
  static const auto* kTypes = new std::set<std::string>{"object", "array",   "string", "integer",
                                                        "number", "boolean", "null"};
  Schema s;
  std::string format;
  for (const auto& [key, value] : node.items()) {
    const std::string at = absl::StrCat(path, ".", key);
    if (key == "type") {
      ASSIGN_OR_RETURN(s.type, String(value, at));
      if (!kTypes->count(s.type)) return Bad(at, absl::StrCat("unknown type \"", s.type, "\""));
    } else if (key == "format") {
      ASSIGN_OR_RETURN(format, String(value, at));
    } else if (key == "title") {
      s.has_title = true;
    } else if (key == "description") {
      s.has_description = true;
    } else if (key == "externalDocs") {
      s.has_external_docs = true;
    } else if (key == "example") {
      // Documentation only.
    } else if (key == "default") {
      s.default_value = value;
    } else if (key == "enum") {
      if (!value.is_array()) return Bad(at, "must be a list");
      s.enum_values = std::vector<json>(value.begin(), value.end());
    } else if (key == "maximum") {
      ASSIGN_OR_RETURN(s.maximum, Number(value, at));
    } else if (key == "exclusiveMaximum") {
      ASSIGN_OR_RETURN(s.exclusive_maximum, Bool(value, at));
    } else if (key == "minimum") {
      ASSIGN_OR_RETURN(s.minimum, Number(value, at));
    } else if (key == "exclusiveMinimum") {
      ASSIGN_OR_RETURN(s.exclusive_minimum, Bool(value, at));
    } else if (key == "multipleOf") {
      ASSIGN_OR_RETURN(s.multiple_of, Number(value, at));
      if (*s.multiple_of <= 0) return Bad(at, "must be positive");
    } else if (key == "maxLength") {
      ASSIGN_OR_RETURN(s.max_length, Count(value, at));
    } else if (key == "minLength") {
      ASSIGN_OR_RETURN(s.min_length, Count(value, at));
    } else if (key == "maxItems") {
      ASSIGN_OR_RETURN(s.max_items, Count(value, at));
    } else if (key == "minItems") {
      ASSIGN_OR_RETURN(s.min_items, Count(value, at));
    } else if (key == "maxProperties") {
      ASSIGN_OR_RETURN(s.max_properties, Count(value, at));
    } else if (key == "minProperties") {
      ASSIGN_OR_RETURN(s.min_properties, Count(value, at));
    } else if (key == "uniqueItems") {
      ASSIGN_OR_RETURN(s.unique_items, Bool(value, at));
    } else if (key == "pattern") {
      ASSIGN_OR_RETURN(s.pattern, String(value, at));
      try {
        s.pattern_regex.emplace(s.pattern, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return Bad(at, absl::StrCat("std::regex cannot compile '", s.pattern, "': ", e.what()));
      }
    } else if (key == "required") {
      ASSIGN_OR_RETURN(s.required, Strings(value, at));
    } else if (key == "nullable") {
      ASSIGN_OR_RETURN(s.nullable, Bool(value, at));
    } else if (key == "properties") {
      if (!value.is_object()) return Bad(at, "must map names to schemas");
      for (const auto& [name, child] : value.items()) {
        ASSIGN_OR_RETURN(s.properties[name],
                         Child(child, absl::StrCat(path, ".properties[", name, "]")));
      }
    } else if (key == "items") {
      if (value.is_array()) {
        s.items_is_array = true;  // a tuple; CheckStructural reports it
      } else {
        ASSIGN_OR_RETURN(s.items, Child(value, at));
      }
    } else if (key == "additionalProperties") {
      s.has_additional_properties = true;
      if (value.is_boolean()) {
        s.additional_properties_allowed = value.get<bool>();
      } else {
        ASSIGN_OR_RETURN(s.additional_properties, Child(value, at));
      }
    } else if (key == "allOf") {
      ASSIGN_OR_RETURN(s.all_of, Children(value, at));
    } else if (key == "anyOf") {
      ASSIGN_OR_RETURN(s.any_of, Children(value, at));
    } else if (key == "oneOf") {
      ASSIGN_OR_RETURN(s.one_of, Children(value, at));
    } else if (key == "not") {
      ASSIGN_OR_RETURN(s.not_schema, Child(value, at));
    } else if (key == "x-kubernetes-preserve-unknown-fields") {
      ASSIGN_OR_RETURN(s.preserve_unknown_fields, Bool(value, at));
    } else if (key == "x-kubernetes-embedded-resource") {
      ASSIGN_OR_RETURN(s.embedded_resource, Bool(value, at));
    } else if (key == "x-kubernetes-int-or-string") {
      ASSIGN_OR_RETURN(s.int_or_string, Bool(value, at));
    } else if (key == "x-kubernetes-list-type") {
      ASSIGN_OR_RETURN(s.list_type, String(value, at));
    } else if (key == "x-kubernetes-list-map-keys") {
      ASSIGN_OR_RETURN(s.list_map_keys, Strings(value, at));
    } else if (key == "x-kubernetes-map-type") {
      ASSIGN_OR_RETURN(s.map_type, String(value, at));
    } else if (key == "x-kubernetes-validations") {
      return absl::UnimplementedError(
          absl::StrCat(at, ": CEL validation rules are not implemented by this validator"));
    } else if (kForbidden->count(key)) {
      s.unsupported_keywords.push_back(key);
    } else {
      return Bad(path, absl::StrCat("unknown field \"", key, "\""));
    }
  }
  ASSIGN_OR_RETURN(s.format, EffectiveFormat(s.type, format, absl::StrCat(path, ".format")));
  return s;
}

}  // namespace psflow::kubetest
