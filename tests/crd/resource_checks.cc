#include "tests/crd/resource_checks.h"

#include <algorithm>
#include <map>
#include <regex>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tests/crd/go_format.h"

namespace psflow::kubetest {
namespace {

using nlohmann::json;
using Errors = std::vector<FieldError>;

void ListTypesOf(const Schema* s, const json& value, const std::string& path, Errors* errors);

void ListTypesOfObject(const Schema& s, const json& object, const std::string& path,
                       Errors* errors) {
  if (s.additional_properties) {
    for (const auto& [key, item] : object.items()) {
      ListTypesOf(s.additional_properties.get(), item, KeyPath(path, key), errors);
    }
  }
  for (const auto& [key, item] : object.items()) {
    if (auto it = s.properties.find(key); it != s.properties.end()) {
      ListTypesOf(it->second.get(), item, ChildPath(path, key), errors);
    }
  }
}

// A key for "same item": Go compares scalars by type and value, compounds by their JSON.
std::string IdentityOf(const json& item) {
  if (item.is_object() || item.is_array()) return item.dump();
  return absl::StrCat(GoTypeName(item), ":", item.dump());
}

// Indexes of the second appearance of each repeated item (structurallisttype.validateListSet).
std::vector<size_t> Repeats(const std::vector<json>& items) {
  std::map<std::string, int> seen;
  std::vector<size_t> repeats;
  for (size_t i = 0; i < items.size(); ++i) {
    if (++seen[IdentityOf(items[i])] == 2) repeats.push_back(i);
  }
  return repeats;
}

void ListTypesOfArray(const Schema& s, const json& array, const std::string& path, Errors* errors) {
  if (s.list_type == "set") {
    const std::vector<json> items(array.begin(), array.end());
    for (size_t i : Repeats(items)) errors->push_back(Duplicate(IndexPath(path, i), items[i]));
  } else if (s.list_type == "map") {
    bool objects = true;
    for (size_t i = 0; i < array.size() && objects; ++i) {
      if (!array[i].is_null() && !array[i].is_object()) {
        errors->push_back(Invalid(IndexPath(path, i), array[i],
                                  "must be an object for an array of list-type map"));
        objects = false;
      }
    }
    if (objects) {
      // The item's keys; an absent key is distinct from every value (and from null).
      std::vector<json> keys;
      for (const auto& item : array) {
        json key = json::object();
        for (const auto& field : s.list_map_keys) {
          if (item.is_object() && item.contains(field)) key[field] = item[field];
        }
        keys.push_back(std::move(key));
      }
      for (size_t i : Repeats(keys)) errors->push_back(Duplicate(IndexPath(path, i), keys[i]));
    }
  }
  if (s.items) {
    for (size_t i = 0; i < array.size(); ++i) {
      ListTypesOf(s.items.get(), array[i], IndexPath(path, i), errors);
    }
  }
}

void ListTypesOf(const Schema* s, const json& value, const std::string& path, Errors* errors) {
  if (s == nullptr) return;
  if (value.is_array()) ListTypesOfArray(*s, value, path, errors);
  if (value.is_object()) ListTypesOfObject(*s, value, path, errors);
}

// validation.IsDNS1035Label's messages.
std::vector<std::string> Dns1035LabelErrors(const std::string& s) {
  static const auto* kLabel = new std::regex("^[a-z]([-a-z0-9]*[a-z0-9])?$");
  std::vector<std::string> out;
  if (s.size() > 63) out.push_back("must be no more than 63 characters");
  if (!std::regex_match(s, *kLabel)) {
    out.push_back(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with "
        "an alphabetic character, and end with an alphanumeric character (e.g. 'my-name', or "
        "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')");
  }
  return out;
}

void CheckEmbeddedResource(const json& object, const std::string& path, Errors* errors) {
  if (!object.contains("apiVersion")) errors->push_back(Required(ChildPath(path, "apiVersion")));
  if (!object.contains("kind")) errors->push_back(Required(ChildPath(path, "kind")));
  if (auto it = object.find("apiVersion"); it != object.end()) {
    const std::string at = ChildPath(path, "apiVersion");
    if (!it->is_string()) {
      errors->push_back(Invalid(at, *it, "must be a string"));
    } else if (it->get<std::string>().empty()) {
      errors->push_back(Required(at));
    } else if (const std::string v = it->get<std::string>();
               v != "/" && std::count(v.begin(), v.end(), '/') > 1) {
      errors->push_back(Invalid(at, v, absl::StrCat("unexpected GroupVersion string: ", v)));
    }
  }
  if (auto it = object.find("kind"); it != object.end()) {
    const std::string at = ChildPath(path, "kind");
    if (!it->is_string()) {
      errors->push_back(Invalid(at, *it, "must be a string"));
    } else if (it->get<std::string>().empty()) {
      errors->push_back(Required(at));
    } else if (auto problems = Dns1035LabelErrors(absl::AsciiStrToLower(it->get<std::string>()));
               !problems.empty()) {
      errors->push_back(Invalid(at, *it,
                                absl::StrCat("may have mixed case, but should otherwise match: ",
                                             absl::StrJoin(problems, ","))));
    }
  }
}

void EmbeddedResourcesOf(const Schema* s, const json& value, const std::string& path,
                         Errors* errors) {
  if (s == nullptr) return;
  if (value.is_object()) {
    if (s->embedded_resource) CheckEmbeddedResource(value, path, errors);
    for (const auto& [key, item] : value.items()) {
      if (auto it = s->properties.find(key); it != s->properties.end()) {
        EmbeddedResourcesOf(it->second.get(), item, ChildPath(path, key), errors);
      } else if (s->has_additional_properties) {
        EmbeddedResourcesOf(s->additional_properties.get(), item, KeyPath(path, key), errors);
      }
    }
  } else if (value.is_array()) {
    for (size_t i = 0; i < value.size(); ++i) {
      EmbeddedResourcesOf(s->items.get(), value[i], IndexPath(path, i), errors);
    }
  }
}

}  // namespace

void ValidateListTypes(const Schema& root, const json& object, std::vector<FieldError>* errors) {
  if (object.is_object()) ListTypesOfObject(root, object, "", errors);
}

void ValidateEmbeddedResources(const Schema& root, const json& object,
                               std::vector<FieldError>* errors) {
  // The root's own apiVersion and kind are the API server's business, not the schema's.
  if (!object.is_object()) return;
  for (const auto& [key, item] : object.items()) {
    if (auto it = root.properties.find(key); it != root.properties.end()) {
      EmbeddedResourcesOf(it->second.get(), item, key, errors);
    }
  }
}

}  // namespace psflow::kubetest
