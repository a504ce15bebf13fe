#include "tests/crd/structural.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "tests/crd/schema_pruning.h"
#include "tests/crd/schema_validator.h"

namespace psflow::kubetest {
namespace {

using nlohmann::json;
using Errors = std::vector<FieldError>;

enum class Level { kRoot, kItem, kField };

std::string Prop(const std::string& path, const std::string& name) {
  return KeyPath(ChildPath(path, "properties"), name);
}

bool HasValueValidation(const Schema& s) {
  return !s.format.empty() || s.enum_values || s.maximum || s.exclusive_maximum || s.minimum ||
         s.exclusive_minimum || s.multiple_of || s.max_length || s.min_length ||
         !s.pattern.empty() || s.max_items || s.min_items || s.unique_items || s.max_properties ||
         s.min_properties || !s.required.empty() || !s.all_of.empty() || !s.any_of.empty() ||
         !s.one_of.empty() || s.not_schema;
}

bool HasExtensions(const Schema& s) {
  return s.PreservesUnknownFields() || s.embedded_resource || s.int_or_string || s.list_type ||
         !s.list_map_keys.empty() || s.map_type;
}

// {type: <type>} and nothing else: the alternatives of the int-or-string patterns.
bool IsOnlyType(const Schema& s, const std::string& type) {
  return s.type == type && !s.has_description && !s.has_title && !s.has_external_docs &&
         !s.default_value && !s.nullable && !HasValueValidation(s) && !HasExtensions(s) &&
         s.properties.empty() && !s.items && !s.has_additional_properties;
}

bool IsIntOrStringAnyOf(const std::vector<Schema>& any_of) {
  return any_of.size() == 2 && IsOnlyType(any_of[0], "integer") && IsOnlyType(any_of[1], "string");
}

void ValueValidation(const Schema& s, bool skip_any_of, bool skip_first_all_of_any_of,
                     const std::string& path, Errors* errors);

// A schema under allOf/anyOf/oneOf/not may only restrict values.
void Nested(const Schema& v, bool skip_any_of, const std::string& path, Errors* errors) {
  ValueValidation(v, skip_any_of, false, path, errors);
  if (v.items) Nested(*v.items, false, ChildPath(path, "items"), errors);
  for (const auto& [name, property] : v.properties) {
    Nested(*property, false, Prop(path, name), errors);
  }
  struct Rule {
    bool broken;
    const char* keyword;
    const char* what;
  };
  const Rule rules[] = {
      {!v.type.empty(), "type", "must be empty to be structural"},
      {v.has_additional_properties, "additionalProperties", "must be undefined to be structural"},
      {v.default_value.has_value(), "default", "must be undefined to be structural"},
      {v.has_title, "title", "must be empty to be structural"},
      {v.has_description, "description", "must be empty to be structural"},
      {v.nullable, "nullable", "must be false to be structural"},
      {v.has_external_docs, "externalDocs", "must be undefined to be structural"},
      {v.PreservesUnknownFields(), "x-kubernetes-preserve-unknown-fields",
       "must be false to be structural"},
      {v.embedded_resource, "x-kubernetes-embedded-resource", "must be false to be structural"},
      {v.int_or_string, "x-kubernetes-int-or-string", "must be false to be structural"},
      {!v.list_map_keys.empty(), "x-kubernetes-list-map-keys", "must be empty to be structural"},
      {v.list_type.has_value(), "x-kubernetes-list-type", "must be undefined to be structural"},
      {v.map_type.has_value(), "x-kubernetes-map-type", "must be undefined to be structural"},
  };
  for (const Rule& rule : rules) {
    if (rule.broken) errors->push_back(Forbidden(ChildPath(path, rule.keyword), rule.what));
  }
  if (v.properties.count("metadata")) {
    errors->push_back(
        Forbidden(Prop(path, "metadata"), "must not be specified in a nested context"));
  }
}

void ValueValidation(const Schema& s, bool skip_any_of, bool skip_first_all_of_any_of,
                     const std::string& path, Errors* errors) {
  if (!skip_any_of) {
    for (size_t i = 0; i < s.any_of.size(); ++i) {
      Nested(s.any_of[i], false, IndexPath(ChildPath(path, "anyOf"), i), errors);
    }
  }
  for (size_t i = 0; i < s.all_of.size(); ++i) {
    Nested(s.all_of[i], skip_first_all_of_any_of && i == 0, IndexPath(ChildPath(path, "allOf"), i),
           errors);
  }
  for (size_t i = 0; i < s.one_of.size(); ++i) {
    Nested(s.one_of[i], false, IndexPath(ChildPath(path, "oneOf"), i), errors);
  }
  if (s.not_schema) Nested(*s.not_schema, false, ChildPath(path, "not"), errors);
}

void Metadata(const Schema& meta, bool check, Level level, const std::string& path,
              Errors* errors) {
  if (check && meta.type != "object") {
    errors->push_back(Invalid(ChildPath(path, "type"), meta.type, "must be object"));
  }
  if (level != Level::kRoot) return;
  bool other_properties = false;
  for (const auto& [name, property] : meta.properties) {
    other_properties |= name != "name" && name != "generateName";
  }
  if (other_properties || meta.has_description || meta.has_title || meta.has_external_docs ||
      meta.nullable || HasValueValidation(meta) || HasExtensions(meta) || meta.items ||
      meta.has_additional_properties) {
    errors->push_back(Forbidden(path,
                                "must not specify anything other than name and generateName, but "
                                "metadata is implicitly specified"));
  }
}

// validateStructuralInvariants.
void Invariants(const Schema& s, Level level, const std::string& path, Errors* errors) {
  if (s.type == "array" && !s.items && !s.items_is_array) {
    errors->push_back(Required(ChildPath(path, "items"), "must be specified"));
  }
  if (s.items) Invariants(*s.items, Level::kItem, ChildPath(path, "items"), errors);
  for (const auto& [name, property] : s.properties) {
    Invariants(*property, Level::kField, Prop(path, name), errors);
  }
  if (s.has_additional_properties) {
    if (level == Level::kRoot) {
      errors->push_back(
          Forbidden(ChildPath(path, "additionalProperties"), "must not be used at the root"));
    }
    if (s.additional_properties) {
      Invariants(*s.additional_properties, Level::kField, ChildPath(path, "additionalProperties"),
                 errors);
    }
  }
  if (s.int_or_string && s.PreservesUnknownFields()) {
    errors->push_back(Invalid(ChildPath(path, "x-kubernetes-preserve-unknown-fields"), true,
                              "must be false if x-kubernetes-int-or-string is true"));
  }
  if (s.int_or_string && s.embedded_resource) {
    errors->push_back(Invalid(ChildPath(path, "x-kubernetes-embedded-resource"), true,
                              "must be false if x-kubernetes-int-or-string is true"));
  }
  const bool skip_first_all_of_any_of = !s.all_of.empty() && IsIntOrStringAnyOf(s.all_of[0].any_of);
  ValueValidation(s, IsIntOrStringAnyOf(s.any_of), skip_first_all_of_any_of, path, errors);

  const bool check_metadata = level == Level::kRoot || s.embedded_resource;
  if (s.embedded_resource && s.type != "object") {
    const char* what = "must be object if x-kubernetes-embedded-resource is true";
    errors->push_back(s.type.empty() ? Required(ChildPath(path, "type"), what)
                                     : Invalid(ChildPath(path, "type"), s.type, what));
  } else if (s.type.empty() && !s.int_or_string && !s.PreservesUnknownFields()) {
    const char* what = level == Level::kRoot   ? "must not be empty at the root"
                       : level == Level::kItem ? "must not be empty for specified array items"
                                               : "must not be empty for specified object fields";
    errors->push_back(Required(ChildPath(path, "type"), what));
  }
  if (s.embedded_resource && s.has_additional_properties) {
    errors->push_back(Forbidden(ChildPath(path, "additionalProperties"),
                                "must not be used if x-kubernetes-embedded-resource is set"));
  }
  if (level == Level::kRoot && !s.type.empty() && s.type != "object") {
    errors->push_back(Invalid(ChildPath(path, "type"), s.type, "must be object at the root"));
  }
  for (const char* meta_field : {"kind", "apiVersion"}) {
    auto it = s.properties.find(meta_field);
    if (check_metadata && it != s.properties.end() && it->second->type != "string") {
      errors->push_back(
          Invalid(ChildPath(Prop(path, meta_field), "type"), it->second->type, "must be string"));
    }
  }
  if (auto it = s.properties.find("metadata"); it != s.properties.end()) {
    Metadata(*it->second, check_metadata, level, Prop(path, "metadata"), errors);
  }
  if (s.embedded_resource && !s.PreservesUnknownFields() && s.properties.empty()) {
    errors->push_back(Required(ChildPath(path, "properties"),
                               "must not be empty if x-kubernetes-embedded-resource is true "
                               "without x-kubernetes-preserve-unknown-fields"));
  }
}

void NestedCompleteness(const Schema& v, const Schema* s, const std::string& s_path,
                        const std::string& v_path, Errors* errors);

// Every field and items a junctor names exists in the structural schema `s`.
void JunctorCompleteness(const Schema& v, const Schema& s, const std::string& s_path,
                         const std::string& v_path, Errors* errors) {
  if (v.not_schema) NestedCompleteness(*v.not_schema, &s, s_path, ChildPath(v_path, "not"), errors);
  const auto each = [&](const std::vector<Schema>& list, const char* name) {
    for (size_t i = 0; i < list.size(); ++i) {
      NestedCompleteness(list[i], &s, s_path, IndexPath(ChildPath(v_path, name), i), errors);
    }
  };
  each(v.all_of, "allOf");
  each(v.any_of, "anyOf");
  each(v.one_of, "oneOf");
}

void NestedCompleteness(const Schema& v, const Schema* s, const std::string& s_path,
                        const std::string& v_path, Errors* errors) {
  if (s == nullptr) {
    errors->push_back(Required(s_path, absl::StrCat("because it is defined in ", v_path)));
    return;
  }
  JunctorCompleteness(v, *s, s_path, v_path, errors);
  if (v.items) {
    NestedCompleteness(*v.items, s->items.get(), ChildPath(s_path, "items"),
                       ChildPath(v_path, "items"), errors);
  }
  for (const auto& [name, property] : v.properties) {
    auto it = s->properties.find(name);
    if (it == s->properties.end()) {
      errors->push_back(Required(Prop(s_path, name),
                                 absl::StrCat("because it is defined in ", Prop(v_path, name))));
    } else {
      NestedCompleteness(*property, it->second.get(), Prop(s_path, name), Prop(v_path, name),
                         errors);
    }
  }
}

// Completeness at every structural node.
void Completeness(const Schema& s, const std::string& path, Errors* errors) {
  JunctorCompleteness(s, s, path, path, errors);
  if (s.items) Completeness(*s.items, ChildPath(path, "items"), errors);
  for (const auto& [name, property] : s.properties) {
    Completeness(*property, Prop(path, name), errors);
  }
  if (s.additional_properties) {
    Completeness(*s.additional_properties, ChildPath(path, "additionalProperties"), errors);
  }
}

void ListTypeRules(const Schema& s, const std::string& path, Errors* errors) {
  const std::string type_key = ChildPath(path, "x-kubernetes-list-type");
  const std::string keys_key = ChildPath(path, "x-kubernetes-list-map-keys");
  if (s.list_type) {
    if (*s.list_type != "atomic" && *s.list_type != "set" && *s.list_type != "map") {
      errors->push_back(NotSupported(type_key, *s.list_type, {"atomic", "set", "map"}));
    }
    if (s.type != "array") {
      errors->push_back(Invalid(ChildPath(path, "type"), s.type,
                                "must be array if x-kubernetes-list-type is specified"));
    }
  }
  const bool is_map = s.list_type == "map";
  if (!is_map && !s.list_map_keys.empty()) {
    errors->push_back(Forbidden(keys_key, "must not be set if x-kubernetes-list-type is not map"));
  }
  if (!is_map) return;
  if (s.list_map_keys.empty()) {
    errors->push_back(Required(keys_key, "must not be empty if x-kubernetes-list-type is map"));
  }
  if (!s.items || s.items->type != "object") {
    errors->push_back(Invalid(ChildPath(ChildPath(path, "items"), "type"),
                              s.items ? s.items->type : "",
                              "must be object when x-kubernetes-list-type is map"));
    return;
  }
  const Schema& items = *s.items;
  for (const auto& key : s.list_map_keys) {
    const std::string at = Prop(ChildPath(path, "items"), key);
    auto it = items.properties.find(key);
    if (it == items.properties.end()) {
      errors->push_back(
          Required(at, "entries mentioned in x-kubernetes-list-map-keys must be specified"));
      continue;
    }
    const std::string& t = it->second->type;
    if (t != "string" && t != "integer" && t != "number" && t != "boolean") {
      errors->push_back(
          Invalid(ChildPath(at, "type"), t, "must be a scalar type if used as list map key"));
    }
    const bool required =
        std::find(items.required.begin(), items.required.end(), key) != items.required.end();
    if (!required && !it->second->default_value) {
      errors->push_back(Required(at,
                                 "entries mentioned in x-kubernetes-list-map-keys must be "
                                 "required or have a default"));
    }
  }
}

void DefaultRules(const Schema& s, const std::string& path, Errors* errors) {
  if (!s.default_value) return;
  const std::string at = ChildPath(path, "default");
  ValidateValue(s, *s.default_value, at, errors);
  json pruned = *s.default_value;
  PruneUnknownFields(s, pruned, nullptr);
  if (pruned != *s.default_value) {
    errors->push_back(Invalid(at, *s.default_value, "must not have fields the schema prunes"));
  }
}

// The schema rules of CRD validation, at every node (junctors included).
void CrdRules(const Schema& s, const std::string& path, Errors* errors) {
  if (s.unique_items) {
    errors->push_back(Forbidden(ChildPath(path, "uniqueItems"),
                                "uniqueItems cannot be set to true since the runtime complexity "
                                "becomes quadratic"));
  }
  if (!s.properties.empty() && s.has_additional_properties &&
      (!s.additional_properties_allowed || s.additional_properties)) {
    errors->push_back(Forbidden(ChildPath(path, "additionalProperties"),
                                "additionalProperties and properties are mutual exclusive"));
  }
  for (const auto& keyword : s.unsupported_keywords) {
    errors->push_back(
        Forbidden(ChildPath(path, keyword), absl::StrCat(keyword, " is not supported")));
  }
  if (s.type == "null") {
    errors->push_back(Forbidden(ChildPath(path, "type"),
                                "type cannot be set to null, use nullable as an alternative"));
  }
  if (s.items_is_array) {
    errors->push_back(
        Forbidden(ChildPath(path, "items"), "items must be a schema object and not an array"));
  }
  if (s.preserve_unknown_fields == false) {
    errors->push_back(Invalid(ChildPath(path, "x-kubernetes-preserve-unknown-fields"), false,
                              "must be true or undefined"));
  }
  if (s.map_type && *s.map_type != "granular" && *s.map_type != "atomic") {
    errors->push_back(NotSupported(ChildPath(path, "x-kubernetes-map-type"), *s.map_type,
                                   {"granular", "atomic"}));
  }
  ListTypeRules(s, path, errors);
  DefaultRules(s, path, errors);

  if (s.items) CrdRules(*s.items, ChildPath(path, "items"), errors);
  for (const auto& [name, property] : s.properties) CrdRules(*property, Prop(path, name), errors);
  if (s.additional_properties) {
    CrdRules(*s.additional_properties, ChildPath(path, "additionalProperties"), errors);
  }
  for (size_t i = 0; i < s.all_of.size(); ++i) {
    CrdRules(s.all_of[i], IndexPath(ChildPath(path, "allOf"), i), errors);
  }
  for (size_t i = 0; i < s.any_of.size(); ++i) {
    CrdRules(s.any_of[i], IndexPath(ChildPath(path, "anyOf"), i), errors);
  }
  for (size_t i = 0; i < s.one_of.size(); ++i) {
    CrdRules(s.one_of[i], IndexPath(ChildPath(path, "oneOf"), i), errors);
  }
  if (s.not_schema) CrdRules(*s.not_schema, ChildPath(path, "not"), errors);
}

}  // namespace

std::vector<FieldError> StructuralViolations(const Schema& root, const std::string& path) {
  Errors errors;
  Invariants(root, Level::kRoot, path, &errors);
  Completeness(root, path, &errors);
  CrdRules(root, path, &errors);
  // Sorted, as the API server sorts them (its maps iterate in random order).
  std::stable_sort(errors.begin(), errors.end(), [](const FieldError& a, const FieldError& b) {
    return a.ToString() < b.ToString();
  });
  return errors;
}

}  // namespace psflow::kubetest
