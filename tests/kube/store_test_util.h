// Helpers shared by the tests of tests/kube: objects to write and watch events as short strings.
#ifndef PSFLOW_TESTS_KUBE_STORE_TEST_UTIL_H_
#define PSFLOW_TESTS_KUBE_STORE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
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

// A resource without a status subresource whose objects carry a status (example.com/v1 widgets).
const kube::Resource& Widgets();

kube::DeleteOptions Propagate(kube::Propagation propagation);
kube::DeleteOptions WithUid(const std::string& uid);
// Watch options from `version`, without bookmarks.
kube::ListOptions From(const std::string& version);

// A store as TestStoreOptions makes it, with the test resources and Widgets registered, and
// calls that must succeed.
class StoreTest : public ::testing::Test {
 protected:
  StoreTest();

  nlohmann::json MustCreate(const kube::Resource& r, const nlohmann::json& object,
                            const std::string& ns = "default");
  nlohmann::json MustGet(const kube::Resource& r, const std::string& name,
                         const std::string& ns = "default");
  std::unique_ptr<Watcher> MustWatch(const kube::Resource& r, const std::string& ns,
                                     const kube::ListOptions& options);

  ObjectStore store_;
};

// "ADDED default/a 3": type, namespace/name and resourceVersion; "BOOKMARK 7" for bookmarks.
std::string Describe(const kube::WatchEvent& event);
// The next `count` events, described; fewer when the watch ends or 2 s pass without one.
std::vector<std::string> NextEvents(Watcher& watcher, size_t count);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_STORE_TEST_UTIL_H_
