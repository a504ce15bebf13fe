// Reading metadata fields of API objects held as JSON. Every accessor tolerates a malformed
// object (missing or mistyped fields read as empty/zero), so one bad object from the API server
// can never crash the operator.
#ifndef PSFLOW_OPERATOR_KUBE_OBJECT_META_H_
#define PSFLOW_OPERATOR_KUBE_OBJECT_META_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace psflow::kube {

// The string at object[key] ("" when `object` is not an object or the field is missing or not a
// string).
std::string StringField(const nlohmann::json& object, const char* key);
// The string at object[a][b] ("" when missing or not a string).
std::string StringAt(const nlohmann::json& object, const char* a, const char* b);

std::string Name(const nlohmann::json& object);
std::string Namespace(const nlohmann::json& object);
std::string Uid(const nlohmann::json& object);
std::string ResourceVersion(const nlohmann::json& object);
int64_t Generation(const nlohmann::json& object);
bool BeingDeleted(const nlohmann::json& object);  // metadata.deletionTimestamp is set
// metadata.labels[key], "" when missing.
std::string Label(const nlohmann::json& object, const std::string& key);
// "<namespace>/<name>": the key objects are cached and queued under.
std::string Key(const nlohmann::json& object);
std::string Key(const std::string& ns, const std::string& name);
// The uid of the ownerReference with controller=true ("" when none).
std::string ControllerUid(const nlohmann::json& object);

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_OBJECT_META_H_
