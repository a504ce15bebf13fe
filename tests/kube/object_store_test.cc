#include "tests/kube/object_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/kube/store_test_util.h"
#include "tests/kube/verbs.h"

namespace psflow::kubetest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;

const kube::Resource& Pods() { return kube::Pods(); }
const kube::Resource& Jobs() { return kube::TrainingJobs(); }
// A resource without a status subresource whose objects carry a status.
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

class ObjectStoreTest : public ::testing::Test {
 protected:
  ObjectStoreTest() : store_(TestStoreOptions()) {
    RegisterTestResources(store_);
    store_.RegisterResource(Widgets(), /*has_status_subresource=*/false);
  }

  Json MustCreate(const kube::Resource& r, const Json& object, const std::string& ns = "default") {
    absl::StatusOr<Json> created = store_.Create(r, ns, object);
    EXPECT_TRUE(created.ok()) << created.status();
    return created.ok() ? *created : Json();
  }
  Json MustGet(const kube::Resource& r, const std::string& name,
               const std::string& ns = "default") {
    absl::StatusOr<Json> got = store_.Get(r, ns, name);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *got : Json();
  }
  std::unique_ptr<Watcher> MustWatch(const kube::Resource& r, const std::string& ns,
                                     kube::ListOptions options) {
    absl::StatusOr<std::unique_ptr<Watcher>> watcher = store_.Watch(r, ns, options);
    EXPECT_TRUE(watcher.ok()) << watcher.status();
    return watcher.ok() ? std::move(*watcher) : nullptr;
  }
  static kube::ListOptions From(const std::string& version) {
    kube::ListOptions options;
    options.resource_version = version;
    options.allow_bookmarks = false;
    return options;
  }

  ObjectStore store_;
};

// ----- Create -----

TEST_F(ObjectStoreTest, CreateFillsInMetadata) {
  const Json a = MustCreate(Pods(), PodObject("a"));
  EXPECT_EQ(kube::Name(a), "a");
  EXPECT_EQ(kube::Namespace(a), "default");
  EXPECT_THAT(kube::Uid(a),
              MatchesRegex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"));
  EXPECT_EQ(kube::ResourceVersion(a), "1");
  EXPECT_EQ(a["metadata"]["creationTimestamp"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(kube::Generation(a), 1);
  EXPECT_EQ(a["kind"], "Pod");
  EXPECT_EQ(a["apiVersion"], "v1");
  EXPECT_EQ(MustGet(Pods(), "a"), a);

  const Json b = MustCreate(Jobs(), JobObject("b"));
  EXPECT_EQ(kube::ResourceVersion(b), "2");  // one counter for every resource
  EXPECT_NE(kube::Uid(b), kube::Uid(a));
  EXPECT_EQ(store_.CurrentResourceVersion(), 2);
  EXPECT_EQ(store_.WriteCount(), 2);
}

TEST_F(ObjectStoreTest, CreateFillsInKindAndRejectsAnotherOne) {
  Json bare{{"metadata", {{"name", "a"}}}};
  EXPECT_EQ(MustCreate(Jobs(), bare)["apiVersion"], "psflow.io/v1alpha1");
  Json wrong = JobObject("b");
  wrong["apiVersion"] = "psflow.io/v1";
  EXPECT_EQ(store_.Create(Jobs(), "default", wrong).status().code(),
            absl::StatusCode::kInvalidArgument);
  wrong = JobObject("b");
  wrong["kind"] = "Pod";
  EXPECT_EQ(store_.Create(Jobs(), "default", wrong).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.Create(Jobs(), "default", Json::array()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, CreateWithGenerateName) {
  Json pod = PodObject("");
  pod["metadata"].erase("name");
  pod["metadata"]["generateName"] = "job-worker-";
  const Json a = MustCreate(Pods(), pod);
  const Json b = MustCreate(Pods(), pod);
  EXPECT_THAT(kube::Name(a), MatchesRegex("job-worker-[bcdfghjklmnpqrstvwxz2456789]{5}"));
  EXPECT_NE(kube::Name(a), kube::Name(b));
  EXPECT_EQ(a["metadata"]["generateName"], "job-worker-");
}

TEST_F(ObjectStoreTest, CreateValidatesNames) {
  for (const std::string bad : {"Foo", "-a", "a-", "a_b", "a..b", ""}) {
    absl::Status s = store_.Create(Pods(), "default", PodObject(bad)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(store_.Create(Pods(), "default", PodObject("Foo")).status().message(),
            "Pod \"Foo\" is invalid: metadata.name: Invalid value: \"Foo\": a lowercase RFC 1123 "
            "subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'example.com', regex used for "
            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
  EXPECT_THAT(store_.Create(Pods(), "default", PodObject(std::string(254, 'a'))).status().message(),
              HasSubstr("must be no more than 253 characters"));
  EXPECT_TRUE(store_.Create(Pods(), "default", PodObject(std::string(253, 'a'))).ok());
  EXPECT_TRUE(store_.Create(Pods(), "default", PodObject("job-1.ps-0")).ok());
  // Service names are DNS-1035 labels.
  Json service{{"metadata", {{"name", "job-1.ps"}}}, {"spec", Json::object()}};
  EXPECT_THAT(store_.Create(kube::Services(), "default", service).status().message(),
              HasSubstr("a DNS-1035 label"));
  service["metadata"]["name"] = "1job";
  EXPECT_EQ(store_.Create(kube::Services(), "default", service).status().code(),
            absl::StatusCode::kInvalidArgument);
  service["metadata"]["name"] = "job-1-ps-0";
  EXPECT_TRUE(store_.Create(kube::Services(), "default", service).ok());
  EXPECT_EQ(store_.WriteCount(), 3);  // failed creates write nothing
}

TEST_F(ObjectStoreTest, CreateExistingIsAlreadyExists) {
  MustCreate(Pods(), PodObject("a"));
  absl::Status s = store_.Create(Pods(), "default", PodObject("a")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(s.message(), "pods \"a\" already exists");
  EXPECT_EQ(store_.Create(Jobs(), "default", JobObject("a")).ok(), true);  // another resource
  EXPECT_TRUE(store_.Create(Pods(), "other", PodObject("a")).ok());        // another namespace
  EXPECT_EQ(store_.Create(Jobs(), "default", JobObject("a")).status().message(),
            "trainingjobs.psflow.io \"a\" already exists");
}

TEST_F(ObjectStoreTest, CreateChecksTheNamespace) {
  Json pod = PodObject("a");
  pod["metadata"]["namespace"] = "other";
  EXPECT_EQ(store_.Create(Pods(), "default", pod).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kube::Namespace(MustCreate(Pods(), pod, "other")), "other");
  EXPECT_EQ(store_.Create(Pods(), "", PodObject("b")).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, CreateRejectsAResourceVersion) {
  Json pod = PodObject("a");
  pod["metadata"]["resourceVersion"] = "5";
  EXPECT_EQ(store_.Create(Pods(), "default", pod).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, CreateIgnoresStatusOfStatusSubresources) {
  Json job = JobObject("a");
  job["status"] = {{"phase", "Succeeded"}};
  EXPECT_FALSE(MustCreate(Jobs(), job).contains("status"));
  Json pod = PodObject("p");
  pod["status"] = {{"phase", "Running"}};
  EXPECT_EQ(MustCreate(Pods(), pod)["status"]["phase"], "Pending");
  Json widget{{"metadata", {{"name", "w"}}}, {"status", {{"ok", true}}}};
  EXPECT_EQ(MustCreate(Widgets(), widget)["status"]["ok"], true);
}

// ----- Unregistered resources -----

TEST_F(ObjectStoreTest, UnregisteredResourceIsNotFoundForEveryVerb) {
  ObjectStore bare(TestStoreOptions());
  bare.RegisterBuiltins();
  const std::string kMessage = "the server could not find the requested resource";
  EXPECT_EQ(bare.Get(Jobs(), "default", "a").status().message(), kMessage);
  EXPECT_EQ(bare.List(Jobs(), "default", {}).status().message(), kMessage);
  EXPECT_EQ(bare.Watch(Jobs(), "default", {}).status().message(), kMessage);
  EXPECT_EQ(bare.Create(Jobs(), "default", JobObject("a")).status().message(), kMessage);
  EXPECT_EQ(bare.Update(Jobs(), "default", JobObject("a")).status().message(), kMessage);
  EXPECT_EQ(bare.UpdateStatus(Jobs(), "default", JobObject("a")).status().message(), kMessage);
  EXPECT_EQ(bare.Delete(Jobs(), "default", "a", {}).status().message(), kMessage);
  EXPECT_EQ(bare.Get(Jobs(), "default", "a").status().code(), absl::StatusCode::kNotFound);
  // Another version of a registered resource is not served either.
  kube::Resource v1 = kube::Pods();
  v1.version = "v2";
  EXPECT_EQ(bare.List(v1, "", {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(bare.FindResource("psflow.io", "v1alpha1", "trainingjobs").has_value());
  ASSERT_TRUE(bare.FindResource("", "v1", "pods").has_value());
  EXPECT_TRUE(bare.FindResource("", "v1", "pods")->has_status_subresource);
  EXPECT_FALSE(bare.FindResource("", "v1", "events")->has_status_subresource);
  EXPECT_EQ(bare.Resources().size(), 4u);
}

TEST_F(ObjectStoreTest, UnregisterDeletesObjectsAndEndsWatches) {
  const Json job = MustCreate(Jobs(), JobObject("a"));
  Json pod = PodObject("a-worker-0");
  AddOwner(pod, job);
  MustCreate(Pods(), pod);
  auto jobs = MustWatch(Jobs(), "", From("2"));
  auto pods = MustWatch(Pods(), "", From("2"));
  store_.UnregisterResource(Jobs());
  EXPECT_THAT(NextEvents(*jobs, 2), ElementsAre("DELETED default/a 3"));
  EXPECT_TRUE(jobs->closed());
  EXPECT_THAT(NextEvents(*pods, 1), ElementsAre("DELETED default/a-worker-0 4"));
  EXPECT_EQ(store_.Get(Jobs(), "default", "a").status().code(), absl::StatusCode::kNotFound);
  store_.RegisterResource(Jobs(), true);  // the CRD again: empty
  EXPECT_THAT(store_.List(Jobs(), "", {})->items, IsEmpty());
}

// ----- Get and List -----

TEST_F(ObjectStoreTest, GetMissingIsNotFound) {
  absl::Status s = store_.Get(Pods(), "default", "x").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "pods \"x\" not found");
  EXPECT_EQ(store_.Get(Jobs(), "default", "x").status().message(),
            "trainingjobs.psflow.io \"x\" not found");
  MustCreate(Pods(), PodObject("x"), "other");
  EXPECT_EQ(store_.Get(Pods(), "default", "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.Get(Pods(), "", "x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, ListFiltersByNamespaceAndSelector) {
  MustCreate(Pods(), PodObject("b", {{"app", "x"}, {"tier", "web"}}), "ns1");
  MustCreate(Pods(), PodObject("a", {{"app", "x"}, {"tier", "db"}}), "ns1");
  MustCreate(Pods(), PodObject("c", {{"app", "y"}}), "ns2");
  MustCreate(Pods(), PodObject("d"), "ns2");
  auto names = [&](const std::string& ns, const std::string& selector) {
    kube::ListOptions options;
    options.label_selector = selector;
    absl::StatusOr<kube::ObjectList> list = store_.List(Pods(), ns, options);
    EXPECT_TRUE(list.ok()) << list.status();
    std::vector<std::string> out;
    if (list.ok()) {
      for (const Json& item : list->items) out.push_back(kube::Key(item));
    }
    return out;
  };
  EXPECT_THAT(names("ns1", ""), ElementsAre("ns1/a", "ns1/b"));
  EXPECT_THAT(names("", ""), ElementsAre("ns1/a", "ns1/b", "ns2/c", "ns2/d"));
  EXPECT_THAT(names("", "app=x,tier!=db"), ElementsAre("ns1/b"));
  EXPECT_THAT(names("", "app"), ElementsAre("ns1/a", "ns1/b", "ns2/c"));
  EXPECT_THAT(names("", "!app"), ElementsAre("ns2/d"));
  EXPECT_THAT(names("ns2", "app==y"), ElementsAre("ns2/c"));
  kube::ListOptions set_based;
  set_based.label_selector = "app in (x)";
  EXPECT_EQ(store_.List(Pods(), "", set_based).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.List(Pods(), "", {})->resource_version, "4");
  MustCreate(Jobs(), JobObject("j"));
  EXPECT_EQ(store_.List(Pods(), "", {})->resource_version, "5");  // the store's version
}

// ----- Update -----

TEST_F(ObjectStoreTest, UpdateKeepsIdentityAndCountsGenerations) {
  const Json created = MustCreate(Jobs(), JobObject("a"));
  Json next = created;
  next["spec"]["replicas"] = 3;
  next["metadata"]["uid"] = "";  // cleared fields come back from the stored object
  next["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z";
  next["metadata"]["generation"] = 7;
  const Json updated = *store_.Update(Jobs(), "default", next);
  EXPECT_EQ(kube::ResourceVersion(updated), "2");
  EXPECT_EQ(kube::Uid(updated), kube::Uid(created));
  EXPECT_EQ(updated["metadata"]["creationTimestamp"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(kube::Generation(updated), 2);
  EXPECT_EQ(updated["spec"]["replicas"], 3);
  EXPECT_EQ(MustGet(Jobs(), "a"), updated);

  // Metadata alone: a new version, the same generation.
  Json labelled = updated;
  labelled["metadata"]["labels"]["team"] = "ml";
  const Json relabelled = *store_.Update(Jobs(), "default", labelled);
  EXPECT_EQ(kube::ResourceVersion(relabelled), "3");
  EXPECT_EQ(kube::Generation(relabelled), 2);
}

TEST_F(ObjectStoreTest, StaleResourceVersionConflicts) {
  const Json created = MustCreate(Pods(), PodObject("x"));
  Json first = created;
  first["metadata"]["labels"]["a"] = "1";
  ASSERT_TRUE(store_.Update(Pods(), "default", first).ok());
  Json second = created;  // read before the first write
  second["metadata"]["labels"]["b"] = "2";
  absl::Status s = store_.Update(Pods(), "default", second).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(),
            "Operation cannot be fulfilled on pods \"x\": the object has been modified; please "
            "apply your changes to the latest version and try again");
  EXPECT_EQ(store_.UpdateStatus(Pods(), "default", second).status().code(),
            absl::StatusCode::kAborted);
  // Without a resourceVersion the write is unconditional.
  second["metadata"].erase("resourceVersion");
  const Json forced = *store_.Update(Pods(), "default", second);
  EXPECT_EQ(kube::Label(forced, "b"), "2");
  EXPECT_EQ(kube::Label(forced, "a"), "");
  EXPECT_EQ(kube::ResourceVersion(forced), "3");
}

TEST_F(ObjectStoreTest, UpdateOfAnotherUidConflicts) {
  MustCreate(Pods(), PodObject("x"));
  Json other = PodObject("x");
  other["metadata"]["uid"] = "00000000-0000-4000-8000-000000000000";
  EXPECT_EQ(store_.Update(Pods(), "default", other).status().code(), absl::StatusCode::kAborted);
}

TEST_F(ObjectStoreTest, UpdateMissingIsNotFound) {
  absl::Status s = store_.Update(Pods(), "default", PodObject("x")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "pods \"x\" not found");
  EXPECT_EQ(store_.UpdateStatus(Pods(), "default", PodObject("x")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(store_.Update(Pods(), "default", Json{{"metadata", Json::object()}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, UpdateLeavesTheStatusAlone) {
  const Json created = MustCreate(Jobs(), JobObject("a"));
  Json with_status = created;
  with_status["status"] = {{"phase", "Running"}};
  const Json status_set = *store_.UpdateStatus(Jobs(), "default", with_status);
  EXPECT_EQ(status_set["status"]["phase"], "Running");
  EXPECT_EQ(kube::ResourceVersion(status_set), "2");
  EXPECT_EQ(kube::Generation(status_set), 1);

  // PUT to the main resource: the status in the body is ignored, so this is a no-op.
  Json overwrite = status_set;
  overwrite["status"] = {{"phase", "Failed"}};
  const Json same = *store_.Update(Jobs(), "default", overwrite);
  EXPECT_EQ(same["status"]["phase"], "Running");
  EXPECT_EQ(kube::ResourceVersion(same), "2");
  overwrite.erase("status");
  EXPECT_EQ((*store_.Update(Jobs(), "default", overwrite))["status"]["phase"], "Running");
}

TEST_F(ObjectStoreTest, UpdateStatusChangesOnlyTheStatus) {
  const Json created = MustCreate(Jobs(), JobObject("a"));
  Json body = created;
  body["spec"]["replicas"] = 9;
  body["metadata"]["labels"]["x"] = "y";
  body["status"] = {{"phase", "Running"}};
  const Json updated = *store_.UpdateStatus(Jobs(), "default", body);
  EXPECT_EQ(updated["spec"]["replicas"], 1);
  EXPECT_EQ(kube::Label(updated, "x"), "");
  EXPECT_EQ(updated["status"]["phase"], "Running");
  EXPECT_EQ(kube::Generation(updated), 1);
  EXPECT_EQ(store_.OperationCount(verb::kUpdateStatus), 1);
}

TEST_F(ObjectStoreTest, UpdateStatusNeedsAStatusSubresource) {
  Json widget = MustCreate(Widgets(), Json{{"metadata", {{"name", "w"}}}});
  widget["status"] = {{"ok", true}};
  EXPECT_EQ(store_.UpdateStatus(Widgets(), "default", widget).status().code(),
            absl::StatusCode::kNotFound);
  // Without one, a PUT writes the status (and a status change is no new generation).
  const Json updated = *store_.Update(Widgets(), "default", widget);
  EXPECT_EQ(updated["status"]["ok"], true);
  EXPECT_EQ(kube::Generation(updated), 1);
}

TEST_F(ObjectStoreTest, NoOpUpdateKeepsTheVersionAndEmitsNothing) {
  const Json created = MustCreate(Jobs(), JobObject("a"));
  auto watcher = MustWatch(Jobs(), "", From("1"));
  const int64_t writes = store_.WriteCount();
  EXPECT_EQ(*store_.Update(Jobs(), "default", created), created);
  Json without_version = created;
  without_version["metadata"].erase("resourceVersion");
  EXPECT_EQ(*store_.Update(Jobs(), "default", without_version), created);
  EXPECT_EQ(*store_.UpdateStatus(Jobs(), "default", created), created);
  EXPECT_EQ(store_.WriteCount(), writes);
  EXPECT_EQ(store_.CurrentResourceVersion(), 1);
  EXPECT_FALSE(watcher->Next(std::chrono::milliseconds(100)).has_value());
  EXPECT_EQ(store_.OperationCount(verb::kUpdate), 2);  // calls are counted all the same
}

TEST_F(ObjectStoreTest, ValidatorSeesEveryWrite) {
  std::vector<std::string> seen;
  store_.SetValidator(Jobs(), [&](const Json& job) {
    seen.push_back(absl::StrCat(kube::Name(job), " ", kube::Generation(job)));
    if (job["spec"]["replicas"].get<int>() < 0) {
      return absl::InvalidArgumentError(
          "TrainingJob.psflow.io \"a\" is invalid: spec.replicas: Invalid value: -1: should be "
          "greater than or equal to 0");
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(store_.Create(Jobs(), "default", JobObject("a", -1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  Json job = MustCreate(Jobs(), JobObject("a", 1));
  job["spec"]["replicas"] = -1;
  EXPECT_THAT(store_.Update(Jobs(), "default", job).status().message(),
              HasSubstr("spec.replicas: Invalid value: -1"));
  job["spec"]["replicas"] = 1;
  job["status"] = {{"phase", "Running"}};
  EXPECT_TRUE(store_.UpdateStatus(Jobs(), "default", job).ok());
  EXPECT_THAT(seen, ElementsAre("a 1", "a 1", "a 2", "a 1"));
  store_.SetValidator(Jobs(), nullptr);
  EXPECT_TRUE(store_.Create(Jobs(), "default", JobObject("b", -1)).ok());
}

// ----- Delete and garbage collection -----

TEST_F(ObjectStoreTest, DeleteRemovesTheObject) {
  const Json created = MustCreate(Pods(), PodObject("a"));
  absl::StatusOr<Json> deleted = store_.Delete(Pods(), "default", "a", {});
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(kube::Uid(*deleted), kube::Uid(created));
  EXPECT_EQ(kube::ResourceVersion(*deleted), "2");
  EXPECT_EQ(store_.Get(Pods(), "default", "a").status().code(), absl::StatusCode::kNotFound);
  absl::Status again = store_.Delete(Pods(), "default", "a", {}).status();
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(again.message(), "pods \"a\" not found");
}

TEST_F(ObjectStoreTest, DeleteChecksTheUidPrecondition) {
  const Json created = MustCreate(Pods(), PodObject("a"));
  absl::Status s = store_.Delete(Pods(), "default", "a", WithUid("not-the-uid")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), absl::StrCat("Precondition failed: UID in precondition: not-the-uid, UID "
                                      "in object meta: ",
                                      kube::Uid(created)));
  EXPECT_TRUE(store_.Delete(Pods(), "default", "a", WithUid(kube::Uid(created))).ok());
}

class GarbageCollectionTest : public ObjectStoreTest {
 protected:
  // Job "j" owns pods "j-0" and "j-1"; pod "j-0" owns service "j-0" (dependents of dependents).
  void SetUp() override {
    job_ = MustCreate(Jobs(), JobObject("j"));  // rv 1
    for (const char* name : {"j-0", "j-1"}) {
      Json pod = PodObject(name);
      AddOwner(pod, job_);
      pods_.push_back(MustCreate(Pods(), pod));  // rv 2, 3
    }
    Json service{{"metadata", {{"name", "j-0"}}}, {"spec", Json::object()}};
    AddOwner(service, pods_[0]);
    MustCreate(kube::Services(), service);  // rv 4
    jobs_watch_ = MustWatch(Jobs(), "", From("4"));
    pods_watch_ = MustWatch(Pods(), "", From("4"));
    services_watch_ = MustWatch(kube::Services(), "", From("4"));
  }

  Json job_;
  std::vector<Json> pods_;
  std::unique_ptr<Watcher> jobs_watch_, pods_watch_, services_watch_;
};

TEST_F(GarbageCollectionTest, BackgroundDeletesTheOwnerThenItsDependents) {
  ASSERT_TRUE(store_.Delete(Jobs(), "default", "j", {}).ok());
  EXPECT_THAT(NextEvents(*jobs_watch_, 1), ElementsAre("DELETED default/j 5"));
  EXPECT_THAT(NextEvents(*pods_watch_, 2),
              ElementsAre("DELETED default/j-0 6", "DELETED default/j-1 8"));
  EXPECT_THAT(NextEvents(*services_watch_, 1), ElementsAre("DELETED default/j-0 7"));
  EXPECT_THAT(store_.List(Pods(), "", {})->items, IsEmpty());
  EXPECT_THAT(store_.List(kube::Services(), "", {})->items, IsEmpty());
}

TEST_F(GarbageCollectionTest, ForegroundDeletesTheDependentsFirst) {
  ASSERT_TRUE(
      store_.Delete(Jobs(), "default", "j", Propagate(kube::Propagation::kForeground)).ok());
  EXPECT_THAT(NextEvents(*services_watch_, 1), ElementsAre("DELETED default/j-0 5"));
  EXPECT_THAT(NextEvents(*pods_watch_, 2),
              ElementsAre("DELETED default/j-0 6", "DELETED default/j-1 7"));
  EXPECT_THAT(NextEvents(*jobs_watch_, 1), ElementsAre("DELETED default/j 8"));
}

TEST_F(GarbageCollectionTest, OrphanRemovesTheOwnerReference) {
  Json pod = MustGet(Pods(), "j-1");
  AddOwner(pod, MustCreate(Jobs(), JobObject("other")), /*controller=*/false);  // rv 5
  ASSERT_TRUE(store_.Update(Pods(), "default", pod).ok());                      // rv 6
  ASSERT_TRUE(store_.Delete(Jobs(), "default", "j", Propagate(kube::Propagation::kOrphan)).ok());
  EXPECT_THAT(
      NextEvents(*pods_watch_, 3),
      ElementsAre("MODIFIED default/j-1 6", "MODIFIED default/j-0 8", "MODIFIED default/j-1 9"));
  const Json orphan = MustGet(Pods(), "j-0");
  EXPECT_FALSE(orphan["metadata"].contains("ownerReferences"));
  EXPECT_EQ(kube::Generation(orphan), 1);
  const Json other_owned = MustGet(Pods(), "j-1");
  ASSERT_EQ(other_owned["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(other_owned["metadata"]["ownerReferences"][0]["name"], "other");
  EXPECT_EQ(MustGet(kube::Services(), "j-0")["metadata"]["ownerReferences"].size(), 1u);
}

TEST_F(GarbageCollectionTest, AnotherLiveOwnerKeepsTheDependent) {
  Json pod = MustGet(Pods(), "j-1");
  AddOwner(pod, MustCreate(Jobs(), JobObject("other")), /*controller=*/false);
  ASSERT_TRUE(store_.Update(Pods(), "default", pod).ok());
  ASSERT_TRUE(store_.Delete(Jobs(), "default", "j", {}).ok());
  EXPECT_EQ(store_.Get(Pods(), "default", "j-0").status().code(), absl::StatusCode::kNotFound);
  const Json kept = MustGet(Pods(), "j-1");
  ASSERT_EQ(kept["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(kept["metadata"]["ownerReferences"][0]["name"], "other");
}

TEST_F(GarbageCollectionTest, FinalizersHoldTheObjectUntilEmptied) {
  Json job = job_;
  job["metadata"]["finalizers"] = {"psflow.io/cleanup"};
  job = *store_.Update(Jobs(), "default", job);  // rv 5
  const Json marked = *store_.Delete(Jobs(), "default", "j", {});
  EXPECT_EQ(marked["metadata"]["deletionTimestamp"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(kube::ResourceVersion(marked), "6");
  EXPECT_TRUE(kube::BeingDeleted(MustGet(Jobs(), "j")));
  EXPECT_EQ(MustGet(Pods(), "j-0")["metadata"]["name"], "j-0");   // dependents wait
  EXPECT_EQ(*store_.Delete(Jobs(), "default", "j", {}), marked);  // already being deleted

  Json more = marked;
  more["metadata"]["finalizers"].push_back("another");
  EXPECT_THAT(store_.Update(Jobs(), "default", more).status().message(),
              HasSubstr("no new finalizers can be added if the object is being deleted"));
  Json cleared = marked;
  cleared["metadata"]["deletionTimestamp"] = nullptr;  // cannot be unset by an update
  cleared["metadata"]["finalizers"] = Json::array();
  ASSERT_TRUE(store_.Update(Jobs(), "default", cleared).ok());
  EXPECT_THAT(NextEvents(*jobs_watch_, 3),
              ElementsAre("MODIFIED default/j 5", "MODIFIED default/j 6", "DELETED default/j 7"));
  EXPECT_EQ(store_.Get(Jobs(), "default", "j").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(store_.List(Pods(), "", {})->items, IsEmpty());
}

// ----- Watch -----

TEST_F(ObjectStoreTest, WatchFromZeroStartsWithTheCurrentObjects) {
  MustCreate(Pods(), PodObject("b"));  // rv 1
  MustCreate(Pods(), PodObject("a"));  // rv 2
  MustCreate(Jobs(), JobObject("j"));  // rv 3
  for (const std::string version : {"0", ""}) {
    auto watcher = MustWatch(Pods(), "default", From(version));
    EXPECT_THAT(NextEvents(*watcher, 2), ElementsAre("ADDED default/a 2", "ADDED default/b 1"));
    EXPECT_FALSE(watcher->Next(std::chrono::milliseconds(50)).has_value());
    EXPECT_FALSE(watcher->closed());
  }
  auto watcher = MustWatch(Pods(), "default", From("0"));
  NextEvents(*watcher, 2);
  Json c = MustCreate(Pods(), PodObject("c"));  // rv 4
  c["metadata"]["labels"]["x"] = "1";
  ASSERT_TRUE(store_.Update(Pods(), "default", c).ok());        // rv 5
  ASSERT_TRUE(store_.Delete(Pods(), "default", "a", {}).ok());  // rv 6
  MustCreate(Pods(), PodObject("z"), "other");                  // rv 7: another namespace
  EXPECT_THAT(NextEvents(*watcher, 3),
              ElementsAre("ADDED default/c 4", "MODIFIED default/c 5", "DELETED default/a 6"));
  EXPECT_FALSE(watcher->Next(std::chrono::milliseconds(50)).has_value());
}

TEST_F(ObjectStoreTest, WatchFromAVersionReplaysTheHistory) {
  Json a = MustCreate(Pods(), PodObject("a"));  // rv 1
  MustCreate(Pods(), PodObject("b"));           // rv 2
  a["metadata"]["labels"]["x"] = "1";
  ASSERT_TRUE(store_.Update(Pods(), "default", a).ok());        // rv 3
  ASSERT_TRUE(store_.Delete(Pods(), "default", "b", {}).ok());  // rv 4
  auto watcher = MustWatch(Pods(), "", From("1"));
  EXPECT_THAT(NextEvents(*watcher, 3),
              ElementsAre("ADDED default/b 2", "MODIFIED default/a 3", "DELETED default/b 4"));
  MustCreate(Pods(), PodObject("c"));
  EXPECT_THAT(NextEvents(*watcher, 1), ElementsAre("ADDED default/c 5"));
  auto latest = MustWatch(Pods(), "", From("5"));
  EXPECT_FALSE(latest->Next(std::chrono::milliseconds(50)).has_value());
}

TEST_F(ObjectStoreTest, WatchFromAFutureVersionWaitsForIt) {
  auto watcher = MustWatch(Pods(), "", From("2"));
  MustCreate(Pods(), PodObject("a"));  // rv 1
  MustCreate(Pods(), PodObject("b"));  // rv 2
  MustCreate(Pods(), PodObject("c"));  // rv 3
  EXPECT_THAT(NextEvents(*watcher, 1), ElementsAre("ADDED default/c 3"));
}

TEST_F(ObjectStoreTest, WatchRejectsBadArguments) {
  EXPECT_EQ(store_.Watch(Pods(), "", From("abc")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.Watch(Pods(), "", From("-1")).status().code(),
            absl::StatusCode::kInvalidArgument);
  kube::ListOptions options = From("0");
  options.label_selector = "a notin (b)";
  EXPECT_EQ(store_.Watch(Pods(), "", options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, SelectorWatchSeesObjectsStartAndStopMatching) {
  kube::ListOptions options = From("0");
  options.label_selector = "app=x";
  auto watcher = MustWatch(Pods(), "default", options);
  Json pod = MustCreate(Pods(), PodObject("a"));  // rv 1: not selected
  pod["metadata"]["labels"]["app"] = "x";
  pod = *store_.Update(Pods(), "default", pod);  // rv 2: selected now
  pod["metadata"]["labels"]["tier"] = "web";
  pod = *store_.Update(Pods(), "default", pod);  // rv 3
  pod["metadata"]["labels"]["app"] = "y";
  pod = *store_.Update(Pods(), "default", pod);                 // rv 4: not any more
  ASSERT_TRUE(store_.Delete(Pods(), "default", "a", {}).ok());  // rv 5: unseen
  std::vector<kube::WatchEvent> events;
  while (auto e = watcher->Next(std::chrono::milliseconds(200))) events.push_back(*e);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(Describe(events[0]), "ADDED default/a 2");
  EXPECT_EQ(Describe(events[1]), "MODIFIED default/a 3");
  // The last state the watch could see, at the version that made it stop matching.
  EXPECT_EQ(Describe(events[2]), "DELETED default/a 4");
  EXPECT_EQ(kube::Label(events[2].object, "app"), "x");

  // A watch resuming from history applies the same rules.
  auto replay = MustWatch(Pods(), "default", [] {
    kube::ListOptions o = From("1");
    o.label_selector = "app=x";
    return o;
  }());
  EXPECT_THAT(NextEvents(*replay, 3),
              ElementsAre("ADDED default/a 2", "MODIFIED default/a 3", "DELETED default/a 4"));
}

TEST_F(ObjectStoreTest, HistoryKeepsAWindowOfChanges) {
  ObjectStore::Options options = TestStoreOptions();
  options.history_window = 3;
  ObjectStore store(options);
  RegisterTestResources(store);
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    ASSERT_TRUE(store.Create(Pods(), "default", PodObject(name)).ok());
  }
  // Versions 3, 4 and 5 are kept: a watch from 2 misses nothing.
  auto watcher = std::move(*store.Watch(Pods(), "", From("2")));
  EXPECT_THAT(NextEvents(*watcher, 3),
              ElementsAre("ADDED default/c 3", "ADDED default/d 4", "ADDED default/e 5"));
  absl::Status gone = store.Watch(Pods(), "", From("1")).status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(gone.message(), "too old resource version: 1 (2)");
  EXPECT_TRUE(store.Watch(Pods(), "", From("0")).ok());
}

TEST_F(ObjectStoreTest, CompactEndsOpenWatchesAndOldVersionsAreGone) {
  MustCreate(Pods(), PodObject("a"));  // rv 1
  MustCreate(Pods(), PodObject("b"));  // rv 2
  kube::ListOptions options = From("1");
  options.allow_bookmarks = true;
  auto watcher = MustWatch(Pods(), "", options);
  store_.Compact();
  // What was queued before is still delivered, then the watch ends with 410 and no bookmark.
  EXPECT_THAT(NextEvents(*watcher, 2), ElementsAre("ADDED default/b 2"));
  EXPECT_TRUE(watcher->closed());
  EXPECT_EQ(watcher->status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(store_.Watch(Pods(), "", From("1")).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(store_.Watch(Pods(), "", From("2")).ok());  // nothing after 2 was dropped
  EXPECT_TRUE(store_.Watch(Pods(), "", From("0")).ok());
  EXPECT_EQ(store_.OpenWatchCount(), 0u);
}

TEST_F(ObjectStoreTest, CloseWatchesEndsThemWithAFinalBookmark) {
  kube::ListOptions options = From("0");
  options.allow_bookmarks = true;
  auto with_bookmarks = MustWatch(Pods(), "", options);
  auto without = MustWatch(Pods(), "", From("0"));
  MustCreate(Pods(), PodObject("a"));  // rv 1
  MustCreate(Jobs(), JobObject("j"));  // rv 2: moves the bookmark too
  EXPECT_EQ(store_.OpenWatchCount(), 2u);
  store_.CloseWatches();
  EXPECT_THAT(NextEvents(*with_bookmarks, 3), ElementsAre("ADDED default/a 1", "BOOKMARK 2"));
  EXPECT_TRUE(with_bookmarks->closed());
  EXPECT_TRUE(with_bookmarks->status().ok());
  EXPECT_THAT(NextEvents(*without, 2), ElementsAre("ADDED default/a 1"));
  EXPECT_TRUE(without->closed());
  EXPECT_EQ(store_.OpenWatchCount(), 0u);
}

TEST_F(ObjectStoreTest, BookmarksComeEveryIntervalWithTheLatestVersion) {
  ObjectStore::Options options = TestStoreOptions();
  options.bookmark_interval = std::chrono::milliseconds(50);
  ObjectStore store(options);
  RegisterTestResources(store);
  kube::ListOptions watch = From("0");
  watch.allow_bookmarks = true;
  auto watcher = std::move(*store.Watch(Pods(), "", watch));
  ASSERT_TRUE(store.Create(Jobs(), "default", JobObject("j")).ok());  // rv 1, another resource
  std::optional<kube::WatchEvent> bookmark = watcher->Next(std::chrono::seconds(5));
  ASSERT_TRUE(bookmark.has_value());
  EXPECT_EQ(bookmark->type, kube::WatchEventType::kBookmark);
  EXPECT_EQ(
      bookmark->object,
      Json({{"kind", "Pod"}, {"apiVersion", "v1"}, {"metadata", {{"resourceVersion", "1"}}}}));
  ASSERT_TRUE(store.Create(Pods(), "default", PodObject("a")).ok());  // rv 2
  EXPECT_THAT(NextEvents(*watcher, 2), ElementsAre("ADDED default/a 2", "BOOKMARK 2"));

  auto quiet = std::move(*store.Watch(Pods(), "", From("0")));  // no bookmarks asked for
  EXPECT_THAT(NextEvents(*quiet, 1), ElementsAre("ADDED default/a 2"));
  EXPECT_FALSE(quiet->Next(std::chrono::milliseconds(200)).has_value());
}

TEST_F(ObjectStoreTest, WatchEndsAfterItsTimeout) {
  kube::ListOptions options = From("0");
  options.timeout_seconds = 1;
  auto watcher = MustWatch(Pods(), "", options);
  MustCreate(Pods(), PodObject("a"));
  EXPECT_THAT(NextEvents(*watcher, 1), ElementsAre("ADDED default/a 1"));
  // Next waits no longer than the watch lasts.
  EXPECT_FALSE(watcher->Next(std::chrono::seconds(30)).has_value());
  EXPECT_TRUE(watcher->closed());
  EXPECT_TRUE(watcher->status().ok());

  options.allow_bookmarks = true;
  auto with_bookmark = MustWatch(Pods(), "", options);
  EXPECT_THAT(NextEvents(*with_bookmark, 1), ElementsAre("ADDED default/a 1"));
  std::optional<kube::WatchEvent> last = with_bookmark->Next(std::chrono::seconds(30));
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(Describe(*last), "BOOKMARK 1");
  EXPECT_FALSE(with_bookmark->Next(std::chrono::seconds(30)).has_value());
  EXPECT_TRUE(with_bookmark->closed());
}

TEST_F(ObjectStoreTest, DefaultWatchTimeoutApplies) {
  ObjectStore::Options options = TestStoreOptions();
  options.default_watch_timeout = std::chrono::seconds(1);
  ObjectStore store(options);
  RegisterTestResources(store);
  auto watcher = std::move(*store.Watch(Pods(), "", From("0")));
  EXPECT_FALSE(watcher->Next(std::chrono::seconds(30)).has_value());
  EXPECT_TRUE(watcher->closed());
}

TEST_F(ObjectStoreTest, SlowWatcherIsCutOff) {
  ObjectStore::Options options = TestStoreOptions();
  options.max_pending_events = 3;
  ObjectStore store(options);
  RegisterTestResources(store);
  kube::ListOptions watch = From("0");
  watch.allow_bookmarks = true;
  auto watcher = std::move(*store.Watch(Pods(), "", watch));
  for (const char* name : {"a", "b", "c", "d"}) {
    ASSERT_TRUE(store.Create(Pods(), "default", PodObject(name)).ok());
  }
  // Its undelivered events are dropped and no bookmark claims them: it resumes from history.
  EXPECT_THAT(NextEvents(*watcher, 1), IsEmpty());
  EXPECT_TRUE(watcher->closed());
  EXPECT_TRUE(watcher->status().ok());
  auto resumed = std::move(*store.Watch(Pods(), "", From("0")));
  EXPECT_EQ(NextEvents(*resumed, 4).size(), 4u);
}

TEST_F(ObjectStoreTest, WatcherMayOutliveTheStore) {
  auto store = std::make_unique<ObjectStore>(TestStoreOptions());
  RegisterTestResources(*store);
  auto watcher = std::move(*store->Watch(Pods(), "", From("0")));
  store.reset();
  EXPECT_FALSE(watcher->Next(std::chrono::seconds(5)).has_value());
  EXPECT_TRUE(watcher->closed());
}

TEST_F(ObjectStoreTest, DestroyedWatcherIsForgotten) {
  auto watcher = MustWatch(Pods(), "", From("0"));
  EXPECT_EQ(store_.OpenWatchCount(), 1u);
  watcher.reset();
  EXPECT_EQ(store_.OpenWatchCount(), 0u);
}

TEST_F(ObjectStoreTest, ConcurrentWritersAndWatchers) {
  constexpr int kWriters = 4;
  constexpr int kObjectsPerWriter = 50;
  auto watcher = MustWatch(Pods(), "", From("0"));
  std::vector<std::thread> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.emplace_back([this, w] {
      for (int i = 0; i < kObjectsPerWriter; ++i) {
        const std::string name = absl::StrCat("w", w, "-", i);
        absl::StatusOr<Json> pod = store_.Create(Pods(), "default", PodObject(name));
        ASSERT_TRUE(pod.ok()) << pod.status();
        (*pod)["metadata"]["labels"]["n"] = "1";
        ASSERT_TRUE(store_.Update(Pods(), "default", *pod).ok());
        ASSERT_TRUE(store_.SetPodPhase("default", name, "Running").ok());
        ASSERT_TRUE(store_.List(Pods(), "default", {}).ok());
      }
    });
  }
  int64_t last = 0;
  int events = 0;
  while (events < kWriters * kObjectsPerWriter * 3) {
    std::optional<kube::WatchEvent> e = watcher->Next(std::chrono::seconds(5));
    ASSERT_TRUE(e.has_value()) << "after " << events << " events";
    const int64_t version = std::stoll(kube::ResourceVersion(e->object));
    EXPECT_GT(version, last);
    last = version;
    ++events;
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(last, kWriters * kObjectsPerWriter * 3);
  EXPECT_EQ(store_.WriteCount(), last);
  EXPECT_EQ(store_.OperationCount(verb::kCreate), kWriters * kObjectsPerWriter);
}

// ----- Kubelet stand-ins -----

TEST_F(ObjectStoreTest, PodPhasesLookAsTheKubeletWritesThem) {
  Json pod = PodObject("p");
  pod["spec"]["containers"].push_back({{"name", "sidecar"}, {"image", "busybox"}});
  MustCreate(Pods(), pod);

  Json status = (*store_.SetPodPhase("default", "p", "Pending"))["status"];
  EXPECT_EQ(status["phase"], "Pending");
  EXPECT_EQ(status["containerStatuses"][0]["state"]["waiting"]["reason"], "ContainerCreating");
  EXPECT_FALSE(status.contains("podIP"));

  status = (*store_.SetPodPhase("default", "p", "Running"))["status"];
  EXPECT_EQ(status["phase"], "Running");
  EXPECT_EQ(status["startTime"], "2024-05-01T12:00:00Z");
  EXPECT_THAT(status["podIP"].get<std::string>(), MatchesRegex("10\\.244\\.[0-9]+\\.[0-9]+"));
  ASSERT_EQ(status["containerStatuses"].size(), 2u);
  for (const Json& c : status["containerStatuses"]) {
    EXPECT_EQ(c["state"]["running"]["startedAt"], "2024-05-01T12:00:00Z");
    EXPECT_EQ(c["ready"], true);
    EXPECT_EQ(c["restartCount"], 0);
  }
  EXPECT_EQ(status["containerStatuses"][0]["name"], "worker");
  EXPECT_EQ(status["containerStatuses"][1]["name"], "sidecar");
  EXPECT_EQ(status["containerStatuses"][1]["image"], "busybox");
  const Json ready = status["conditions"][1];
  EXPECT_EQ(ready["type"], "Ready");
  EXPECT_EQ(ready["status"], "True");

  status = (*store_.SetPodPhase("default", "p", "Failed", 137, "OOMKilled"))["status"];
  EXPECT_EQ(status["phase"], "Failed");
  const Json terminated = status["containerStatuses"][0]["state"]["terminated"];
  EXPECT_EQ(terminated["exitCode"], 137);
  EXPECT_EQ(terminated["reason"], "OOMKilled");
  EXPECT_EQ(terminated["finishedAt"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(status["containerStatuses"][0]["ready"], false);
  EXPECT_FALSE(status.contains("reason"));
  // Kubelet writes are writes, not calls of the operator.
  EXPECT_EQ(store_.WriteCount(), 4);
  EXPECT_EQ(store_.OperationCount(verb::kUpdateStatus), 0);
}

TEST_F(ObjectStoreTest, TerminalPhasesPickTheKubeletsReasons) {
  for (const char* name : {"ok", "error", "evicted", "bad"}) MustCreate(Pods(), PodObject(name));
  auto terminated = [](const Json& pod) {
    return pod["status"]["containerStatuses"][0]["state"]["terminated"];
  };
  const Json ok = *store_.SetPodPhase("default", "ok", "Succeeded");
  EXPECT_EQ(terminated(ok)["reason"], "Completed");
  EXPECT_EQ(terminated(ok)["exitCode"], 0);
  EXPECT_EQ(terminated(*store_.SetPodPhase("default", "error", "Failed", 1))["reason"], "Error");
  const Json evicted = *store_.SetPodPhase("default", "evicted", "Failed", 137, "Evicted");
  EXPECT_EQ(evicted["status"]["phase"], "Failed");
  EXPECT_EQ(evicted["status"]["reason"], "Evicted");
  EXPECT_EQ(evicted["status"]["message"], "The node was low on resource: memory. ");
  EXPECT_EQ(terminated(evicted)["exitCode"], 137);
  EXPECT_EQ(terminated(evicted)["reason"], "Error");

  EXPECT_EQ(store_.SetPodPhase("default", "bad", "Succeeded", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.SetPodPhase("default", "bad", "Running", 0, "Evicted").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.SetPodPhase("default", "bad", "Done").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.SetPodPhase("default", "missing", "Running").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ObjectStoreTest, RestartContainerCountsRestarts) {
  MustCreate(Pods(), PodObject("p"));
  ASSERT_TRUE(store_.SetPodPhase("default", "p", "Running").ok());
  ASSERT_TRUE(store_.RestartContainer("default", "p", 1, "Error").ok());
  const Json pod = *store_.RestartContainer("default", "p", 137, "OOMKilled");
  const Json c = pod["status"]["containerStatuses"][0];
  EXPECT_EQ(c["restartCount"], 2);
  EXPECT_EQ(c["lastState"]["terminated"]["exitCode"], 137);
  EXPECT_EQ(c["lastState"]["terminated"]["reason"], "OOMKilled");
  EXPECT_EQ(c["state"]["running"]["startedAt"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(c["ready"], true);
  EXPECT_EQ(pod["status"]["phase"], "Running");
  // Later phases keep the count.
  EXPECT_EQ((*store_.SetPodPhase("default", "p", "Failed",
                                 1))["status"]["containerStatuses"][0]["restartCount"],
            2);
  EXPECT_EQ(store_.RestartContainer("default", "p", 1, "", "nope").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ObjectStoreTest, RestartPolicyDecidesWhetherTheKubeletRestarts) {
  MustCreate(Pods(), PodObject("never", {}, "Never"));
  MustCreate(Pods(), PodObject("on-failure", {}, "OnFailure"));
  EXPECT_EQ(store_.RestartContainer("default", "never", 1, "Error").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_.RestartContainer("default", "on-failure", 0, "Completed").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_.RestartContainer("default", "on-failure", 1, "Error").ok());
}

}  // namespace
}  // namespace psflow::kubetest
