// Helpers shared by the tests of tests/kube: objects to write and watch events as short strings.
#ifndef PSFLOW_TESTS_KUBE_STORE_TEST_UTIL_H_
#define PSFLOW_TESTS_KUBE_STORE_TEST_UTIL_H_

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "operator/kube/kube_client.h"
#include "tests/kube/object_store.h"
#include "tests/kube/watcher.h"

namespace psflow::kubetest {

// 2024-05-01T12:00:00Z: the fixed clock of the store tests.
inline absl::Time TestNow() { return absl::FromUnixSeconds(1714564800); }

// A store with the builtins and trainingjobs.psflow.io (status subresource), a fixed clock and
// a fixed seed.
ObjectStore::Options TestStoreOptions();
void RegisterTestResources(ObjectStore& store);

// A pod with one container "worker" (image psflow:test), `labels` and `restart_policy` when
// not empty.
nlohmann::json PodObject(const std::string& name,
                         const std::vector<std::pair<std::string, std::string>>& labels = {},
                         const std::string& restart_policy = "");
// A TrainingJob with spec.replicas = `replicas`.
nlohmann::json JobObject(const std::string& name, int replicas = 1);
// Adds an ownerReference (controller when `controller`) to `owner` in `object`.
void AddOwner(nlohmann::json& object, const nlohmann::json& owner, bool controller = true);

// "ADDED default/a 3": type, namespace/name and resourceVersion; "BOOKMARK 7" for bookmarks.
std::string Describe(const kube::WatchEvent& event);
// The next `count` events, described; fewer when the watch ends or 2 s pass without one.
std::vector<std::string> NextEvents(Watcher& watcher, size_t count);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_STORE_TEST_UTIL_H_
