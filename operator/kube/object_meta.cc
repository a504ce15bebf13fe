#include "operator/kube/object_meta.h"

namespace psflow::kube {
namespace {

const nlohmann::json& Metadata(const nlohmann::json& object) {
  static const nlohmann::json* empty = new nlohmann::json(nlohmann::json::object());
  if (!object.is_object()) return *empty;
  auto it = object.find("metadata");
  return it != object.end() && it->is_object() ? *it : *empty;
}

std::string MetaString(const nlohmann::json& object, const char* field) {
  return StringField(Metadata(object), field);
}

}  // namespace

std::string StringField(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return "";
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string StringAt(const nlohmann::json& object, const char* a, const char* b) {
  if (!object.is_object()) return "";
  auto outer = object.find(a);
  if (outer == object.end() || !outer->is_object()) return "";
  auto inner = outer->find(b);
  return inner != outer->end() && inner->is_string() ? inner->get<std::string>() : "";
}

std::string Name(const nlohmann::json& object) { return MetaString(object, "name"); }
std::string Namespace(const nlohmann::json& object) { return MetaString(object, "namespace"); }
std::string Uid(const nlohmann::json& object) { return MetaString(object, "uid"); }
std::string ResourceVersion(const nlohmann::json& object) {
  return MetaString(object, "resourceVersion");
}

int64_t Generation(const nlohmann::json& object) {
  const nlohmann::json& meta = Metadata(object);
  auto it = meta.find("generation");
  return it != meta.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
}

bool BeingDeleted(const nlohmann::json& object) {
  const nlohmann::json& meta = Metadata(object);
  auto it = meta.find("deletionTimestamp");
  return it != meta.end() && !it->is_null();
}

std::string Label(const nlohmann::json& object, const std::string& key) {
  const nlohmann::json& meta = Metadata(object);
  auto labels = meta.find("labels");
  if (labels == meta.end() || !labels->is_object()) return "";
  auto it = labels->find(key);
  return it != labels->end() && it->is_string() ? it->get<std::string>() : "";
}

std::string Key(const std::string& ns, const std::string& name) { return ns + "/" + name; }
std::string Key(const nlohmann::json& object) { return Key(Namespace(object), Name(object)); }

std::string ControllerUid(const nlohmann::json& object) {
  const nlohmann::json& meta = Metadata(object);
  auto refs = meta.find("ownerReferences");
  if (refs == meta.end() || !refs->is_array()) return "";
  for (const nlohmann::json& ref : *refs) {
    if (!ref.is_object()) continue;
    auto controller = ref.find("controller");
    if (controller == ref.end() || !controller->is_boolean() || !controller->get<bool>()) continue;
    auto uid = ref.find("uid");
    if (uid != ref.end() && uid->is_string()) return uid->get<std::string>();
  }
  return "";
}

}  // namespace psflow::kube
