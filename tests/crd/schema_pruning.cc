#include "tests/crd/schema_pruning.h"

#include "tests/crd/field_error.h"

namespace psflow::kubetest {
namespace {

using nlohmann::json;

bool IsMetaField(const std::string& key) {
  return key == "apiVersion" || key == "kind" || key == "metadata";
}

void Removed(std::vector<std::string>* removed, const std::string& path) {
  if (removed != nullptr) removed->push_back(path);
}

void Prune(json& value, const Schema* s, bool root, const std::string& path,
           std::vector<std::string>* removed);

// An object's field: its property, else additionalProperties (whose schema may be absent:
// `additionalProperties: true` prunes everything below it). False when the field is unknown.
bool PruneField(json& item, const Schema& s, const std::string& key, const std::string& path,
                std::vector<std::string>* removed) {
  if (auto it = s.properties.find(key); it != s.properties.end()) {
    Prune(item, it->second.get(), false, ChildPath(path, key), removed);
    return true;
  }
  if (s.has_additional_properties) {
    Prune(item, s.additional_properties.get(), false, KeyPath(path, key), removed);
    return true;
  }
  return false;
}

// Below x-kubernetes-preserve-unknown-fields: unknown fields stay, specified ones are pruned.
void SkipPrune(json& value, const Schema& s, bool keep_meta, const std::string& path,
               std::vector<std::string>* removed) {
  if (value.is_object()) {
    for (auto& [key, item] : value.items()) {
      if (!(keep_meta && IsMetaField(key))) PruneField(item, s, key, path, removed);
    }
  } else if (value.is_array() && s.items) {
    for (size_t i = 0; i < value.size(); ++i) {
      SkipPrune(value[i], *s.items, s.items->embedded_resource, IndexPath(path, i), removed);
    }
  }
}

void Prune(json& value, const Schema* s, bool root, const std::string& path,
           std::vector<std::string>* removed) {
  // A resource keeps its apiVersion, kind and metadata: the root, and embedded resources.
  const bool keep_meta = root || (s != nullptr && s->embedded_resource);
  if (s != nullptr && s->PreservesUnknownFields()) {
    SkipPrune(value, *s, keep_meta, path, removed);
    return;
  }
  if (value.is_object()) {
    std::vector<std::string> unknown;
    for (auto& [key, item] : value.items()) {
      if (s != nullptr && keep_meta && IsMetaField(key)) continue;
      if (s == nullptr || !PruneField(item, *s, key, path, removed)) unknown.push_back(key);
    }
    for (const auto& key : unknown) {
      Removed(removed, ChildPath(path, key));
      value.erase(key);
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      Prune(value[i], s == nullptr ? nullptr : s->items.get(), false, IndexPath(path, i), removed);
    }
  }
}

bool IsNonNullableNull(const json& value, const Schema* s) {
  return value.is_null() && s != nullptr && !s->nullable;
}

void PruneNullsIn(json& value, const Schema* s) {
  if (value.is_object()) {
    std::vector<std::string> nulls;
    for (auto& [key, item] : value.items()) {
      const Schema* field = s == nullptr ? nullptr : s->FieldSchema(key);
      if (IsNonNullableNull(item, field) && !field->default_value) {
        nulls.push_back(key);
      } else {
        PruneNullsIn(item, field);
      }
    }
    for (const auto& key : nulls) value.erase(key);
  } else if (value.is_array()) {
    for (auto& item : value) PruneNullsIn(item, s == nullptr ? nullptr : s->items.get());
  }
}

void Default(json& value, const Schema* s) {
  if (s == nullptr) return;
  if (value.is_object()) {
    for (const auto& [key, property] : s->properties) {
      if (!property->default_value) continue;
      auto it = value.find(key);
      if (it == value.end() || IsNonNullableNull(*it, property.get())) {
        value[key] = *property->default_value;
      }
    }
    for (auto& [key, item] : value.items()) {
      if (auto it = s->properties.find(key); it != s->properties.end()) {
        Default(item, it->second.get());
      } else if (const Schema* a = s->additional_properties.get()) {
        if (IsNonNullableNull(item, a)) item = a->default_value.value_or(json(nullptr));
        Default(item, a);
      }
    }
  } else if (value.is_array()) {
    const Schema* items = s->items.get();
    for (auto& item : value) {
      if (IsNonNullableNull(item, items)) item = items->default_value.value_or(json(nullptr));
      Default(item, items);
    }
  }
}

}  // namespace

void PruneUnknownFields(const Schema& root, json& object, std::vector<std::string>* removed) {
  // The root is a resource: its apiVersion, kind and metadata are never pruned by the schema.
  Prune(object, &root, /*root=*/true, "", removed);
}

void PruneNulls(const Schema& root, json& object) { PruneNullsIn(object, &root); }

void ApplyDefaults(const Schema& root, json& object) { Default(object, &root); }

}  // namespace psflow::kubetest
