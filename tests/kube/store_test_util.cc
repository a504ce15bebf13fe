#include "tests/kube/store_test_util.h"

#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"

namespace psflow::kubetest {

ObjectStore::Options TestStoreOptions() {
  ObjectStore::Options options;
  options.clock = [] { return TestNow(); };
  options.seed = 42;
  return options;
}

void RegisterTestResources(ObjectStore& store) {
  store.RegisterBuiltins();
  store.RegisterResource(kube::TrainingJobs(), /*has_status_subresource=*/true);
}

nlohmann::json PodObject(const std::string& name,
                         const std::vector<std::pair<std::string, std::string>>& labels,
                         const std::string& restart_policy) {
  nlohmann::json pod{{"apiVersion", "v1"},
                     {"kind", "Pod"},
                     {"metadata", {{"name", name}}},
                     {"spec", {{"containers", {{{"name", "worker"}, {"image", "psflow:test"}}}}}}};
  for (const auto& [key, value] : labels) pod["metadata"]["labels"][key] = value;
  if (!restart_policy.empty()) pod["spec"]["restartPolicy"] = restart_policy;
  return pod;
}

nlohmann::json JobObject(const std::string& name, int replicas) {
  return {{"apiVersion", "psflow.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", name}}},
          {"spec", {{"replicas", replicas}}}};
}

void AddOwner(nlohmann::json& object, const nlohmann::json& owner, bool controller) {
  object["metadata"]["ownerReferences"].push_back({{"apiVersion", owner["apiVersion"]},
                                                   {"kind", owner["kind"]},
                                                   {"name", kube::Name(owner)},
                                                   {"uid", kube::Uid(owner)},
                                                   {"controller", controller}});
}

const kube::Resource& Widgets() {
  static const kube::Resource* r =
      new kube::Resource{"example.com", "v1", "widgets", "Widget", true};
  return *r;
}

kube::DeleteOptions Propagate(kube::Propagation propagation) {
  kube::DeleteOptions options;
  options.propagation = propagation;
  return options;
}

kube::DeleteOptions WithUid(const std::string& uid) {
  kube::DeleteOptions options;
  options.precondition_uid = uid;
  return options;
}

kube::ListOptions From(const std::string& version) {
  kube::ListOptions options;
  options.resource_version = version;
  options.allow_bookmarks = false;
  return options;
}

StoreTest::StoreTest() : store_(TestStoreOptions()) {
  RegisterTestResources(store_);
  store_.RegisterResource(Widgets(), /*has_status_subresource=*/false);
}

nlohmann::json StoreTest::MustCreate(const kube::Resource& r, const nlohmann::json& object,
                                     const std::string& ns) {
  absl::StatusOr<nlohmann::json> created = store_.Create(r, ns, object);
  EXPECT_TRUE(created.ok()) << created.status();
  return created.ok() ? *created : nlohmann::json();
}

nlohmann::json StoreTest::MustGet(const kube::Resource& r, const std::string& name,
                                  const std::string& ns) {
  absl::StatusOr<nlohmann::json> got = store_.Get(r, ns, name);
  EXPECT_TRUE(got.ok()) << got.status();
  return got.ok() ? *got : nlohmann::json();
}

std::unique_ptr<Watcher> StoreTest::MustWatch(const kube::Resource& r, const std::string& ns,
                                              const kube::ListOptions& options) {
  absl::StatusOr<std::unique_ptr<Watcher>> watcher = store_.Watch(r, ns, options);
  EXPECT_TRUE(watcher.ok()) << watcher.status();
  return watcher.ok() ? std::move(*watcher) : nullptr;
}

std::string Describe(const kube::WatchEvent& event) {
  const char* type = "";
  switch (event.type) {
    case kube::WatchEventType::kAdded:
      type = "ADDED";
      break;
    case kube::WatchEventType::kModified:
      type = "MODIFIED";
      break;
    case kube::WatchEventType::kDeleted:
      type = "DELETED";
      break;
    case kube::WatchEventType::kBookmark:
      return absl::StrCat("BOOKMARK ", kube::ResourceVersion(event.object));
  }
  return absl::StrCat(type, " ", kube::Key(event.object), " ", kube::ResourceVersion(event.object));
}

std::vector<std::string> NextEvents(Watcher& watcher, size_t count) {
  std::vector<std::string> out;
  while (out.size() < count) {
    std::optional<kube::WatchEvent> event = watcher.Next(std::chrono::seconds(2));
    if (!event.has_value()) break;
    out.push_back(Describe(*event));
  }
  return out;
}

}  // namespace psflow::kubetest
