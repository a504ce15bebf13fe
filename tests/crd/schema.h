// One node of a CRD's OpenAPI v3 schema (apiextensions.k8s.io/v1 JSONSchemaProps), parsed once so
// that validation and pruning walk typed fields and precompiled patterns. Immutable after
// ParseSchema, so any number of threads may read it.
#ifndef PSFLOW_TESTS_CRD_SCHEMA_H_
#define PSFLOW_TESTS_CRD_SCHEMA_H_

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow::kubetest {

struct Schema {
  // "object", "array", "string", "integer", "number", "boolean", "null" or "" (unspecified).
  std::string type;
  // As the API server keeps it: only formats it knows for the type ("date-time", "int32", ...);
  // others are dropped, as Kubernetes ignores them.
  std::string format;
  bool nullable = false;
  std::optional<nlohmann::json> default_value;
  std::optional<std::vector<nlohmann::json>> enum_values;

  std::optional<double> maximum;
  bool exclusive_maximum = false;
  std::optional<double> minimum;
  bool exclusive_minimum = false;
  std::optional<double> multiple_of;
  std::optional<int64_t> max_length, min_length;
  std::string pattern;
  std::optional<std::regex> pattern_regex;  // ECMAScript; searched, not anchored, as Go's regexp
  std::optional<int64_t> max_items, min_items;
  bool unique_items = false;
  std::optional<int64_t> max_properties, min_properties;
  std::vector<std::string> required;

  std::map<std::string, std::unique_ptr<Schema>> properties;
  std::unique_ptr<Schema> items;
  // additionalProperties: absent, a bool, or a schema (additional_properties set).
  bool has_additional_properties = false;
  bool additional_properties_allowed = true;
  std::unique_ptr<Schema> additional_properties;

  std::vector<Schema> all_of, any_of, one_of;
  std::unique_ptr<Schema> not_schema;

  std::optional<bool> preserve_unknown_fields;  // explicit false is kept: CRDs reject it
  bool embedded_resource = false;
  bool int_or_string = false;
  std::optional<std::string> list_type;  // atomic, set, map
  std::vector<std::string> list_map_keys;
  std::optional<std::string> map_type;

  // Generic keywords the structural rules care about inside allOf/anyOf/oneOf/not.
  bool has_description = false;
  bool has_title = false;
  bool has_external_docs = false;
  // Keywords a v1 CRD forbids ("$ref", "definitions", ...), for CheckStructural to report.
  std::vector<std::string> unsupported_keywords;
  bool items_is_array = false;

  bool PreservesUnknownFields() const { return preserve_unknown_fields.value_or(false); }
  // The types a value may have: {type}, {"integer", "string"} for x-kubernetes-int-or-string
  // (as the API server converts it), or {} when unspecified.
  std::vector<std::string> Types() const;
  // The schema a field of an object has: properties[key], else additionalProperties' schema, else
  // null.
  const Schema* FieldSchema(const std::string& key) const;
};

// Parses `node`, which sits at `path` ("spec.versions[0].schema.openAPIV3Schema" for the root),
// recursively. INVALID_ARGUMENT for malformed keywords, unknown keywords, unknown types or
// patterns std::regex cannot compile; UNIMPLEMENTED for x-kubernetes-validations (CEL) and string
// formats the API server checks but this validator cannot, so that no rule is silently skipped.
absl::StatusOr<Schema> ParseSchema(const nlohmann::json& node, const std::string& path);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_SCHEMA_H_
