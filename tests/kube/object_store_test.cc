#include "tests/kube/object_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
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

using kube::Pods;

class ObjectStoreTest : public StoreTest {};

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

  const Json b = MustCreate(kube::TrainingJobs(), JobObject("b"));
  EXPECT_EQ(kube::ResourceVersion(b), "2");  // one counter for every resource
  EXPECT_NE(kube::Uid(b), kube::Uid(a));
  EXPECT_EQ(store_.CurrentResourceVersion(), 2);
  EXPECT_EQ(store_.WriteCount(), 2);
}

TEST_F(ObjectStoreTest, CreateFillsInKindAndRejectsAnotherOne) {
  Json bare{{"metadata", {{"name", "a"}}}};
  EXPECT_EQ(MustCreate(kube::TrainingJobs(), bare)["apiVersion"], "psflow.io/v1alpha1");
  Json wrong = JobObject("b");
  wrong["apiVersion"] = "psflow.io/v1";
  EXPECT_EQ(store_.Create(kube::TrainingJobs(), "default", wrong).status().code(),
            absl::StatusCode::kInvalidArgument);
  wrong = JobObject("b");
  wrong["kind"] = "Pod";
  EXPECT_EQ(store_.Create(kube::TrainingJobs(), "default", wrong).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.Create(kube::TrainingJobs(), "default", Json::array()).status().code(),
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
  EXPECT_EQ(store_.Create(kube::TrainingJobs(), "default", JobObject("a")).ok(),
            true);                                                   // another resource
  EXPECT_TRUE(store_.Create(Pods(), "other", PodObject("a")).ok());  // another namespace
  EXPECT_EQ(store_.Create(kube::TrainingJobs(), "default", JobObject("a")).status().message(),
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
  EXPECT_FALSE(MustCreate(kube::TrainingJobs(), job).contains("status"));
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
  EXPECT_EQ(bare.Get(kube::TrainingJobs(), "default", "a").status().message(), kMessage);
  EXPECT_EQ(bare.List(kube::TrainingJobs(), "default", {}).status().message(), kMessage);
  EXPECT_EQ(bare.Watch(kube::TrainingJobs(), "default", {}).status().message(), kMessage);
  EXPECT_EQ(bare.Create(kube::TrainingJobs(), "default", JobObject("a")).status().message(),
            kMessage);
  EXPECT_EQ(bare.Update(kube::TrainingJobs(), "default", JobObject("a")).status().message(),
            kMessage);
  EXPECT_EQ(bare.UpdateStatus(kube::TrainingJobs(), "default", JobObject("a")).status().message(),
            kMessage);
  EXPECT_EQ(bare.Delete(kube::TrainingJobs(), "default", "a", {}).status().message(), kMessage);
  EXPECT_EQ(bare.Get(kube::TrainingJobs(), "default", "a").status().code(),
            absl::StatusCode::kNotFound);
  // Another version of a registered resource is not served either.
  kube::Resource v1 = kube::Pods();
  v1.version = "v2";
  EXPECT_EQ(bare.List(v1, "", {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(bare.FindResource("psflow.io", "v1alpha1", "trainingjobs").has_value());
  ASSERT_TRUE(bare.FindResource("", "v1", "pods").has_value());
  EXPECT_TRUE(bare.FindResource("", "v1", "pods")->has_status_subresource);
  EXPECT_FALSE(bare.FindResource("", "v1", "events")->has_status_subresource);
  EXPECT_EQ(bare.Resources().size(), 6u);  // pods, services, secrets, configmaps, events, leases
}

TEST_F(ObjectStoreTest, UnregisterDeletesObjectsAndEndsWatches) {
  const Json job = MustCreate(kube::TrainingJobs(), JobObject("a"));
  Json pod = PodObject("a-worker-0");
  AddOwner(pod, job);
  MustCreate(Pods(), pod);
  auto jobs = MustWatch(kube::TrainingJobs(), "", From("2"));
  auto pods = MustWatch(Pods(), "", From("2"));
  store_.UnregisterResource(kube::TrainingJobs());
  EXPECT_THAT(NextEvents(*jobs, 2), ElementsAre("DELETED default/a 3"));
  EXPECT_TRUE(jobs->closed());
  EXPECT_THAT(NextEvents(*pods, 1), ElementsAre("DELETED default/a-worker-0 4"));
  EXPECT_EQ(store_.Get(kube::TrainingJobs(), "default", "a").status().code(),
            absl::StatusCode::kNotFound);
  store_.RegisterResource(kube::TrainingJobs(), true);  // the CRD again: empty
  EXPECT_THAT(store_.List(kube::TrainingJobs(), "", {})->items, IsEmpty());
}

// ----- Get and List -----

TEST_F(ObjectStoreTest, GetMissingIsNotFound) {
  absl::Status s = store_.Get(Pods(), "default", "x").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "pods \"x\" not found");
  EXPECT_EQ(store_.Get(kube::TrainingJobs(), "default", "x").status().message(),
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
  MustCreate(kube::TrainingJobs(), JobObject("j"));
  EXPECT_EQ(store_.List(Pods(), "", {})->resource_version, "5");  // the store's version
}

// ----- Update -----

TEST_F(ObjectStoreTest, UpdateKeepsIdentityAndCountsGenerations) {
  const Json created = MustCreate(kube::TrainingJobs(), JobObject("a"));
  Json next = created;
  next["spec"]["replicas"] = 3;
  next["metadata"]["uid"] = "";  // cleared fields come back from the stored object
  next["metadata"]["creationTimestamp"] = "2000-01-01T00:00:00Z";
  next["metadata"]["generation"] = 7;
  const Json updated = *store_.Update(kube::TrainingJobs(), "default", next);
  EXPECT_EQ(kube::ResourceVersion(updated), "2");
  EXPECT_EQ(kube::Uid(updated), kube::Uid(created));
  EXPECT_EQ(updated["metadata"]["creationTimestamp"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(kube::Generation(updated), 2);
  EXPECT_EQ(updated["spec"]["replicas"], 3);
  EXPECT_EQ(MustGet(kube::TrainingJobs(), "a"), updated);

  // Metadata alone: a new version, the same generation.
  Json labelled = updated;
  labelled["metadata"]["labels"]["team"] = "ml";
  const Json relabelled = *store_.Update(kube::TrainingJobs(), "default", labelled);
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
  const Json created = MustCreate(kube::TrainingJobs(), JobObject("a"));
  Json with_status = created;
  with_status["status"] = {{"phase", "Running"}};
  const Json status_set = *store_.UpdateStatus(kube::TrainingJobs(), "default", with_status);
  EXPECT_EQ(status_set["status"]["phase"], "Running");
  EXPECT_EQ(kube::ResourceVersion(status_set), "2");
  EXPECT_EQ(kube::Generation(status_set), 1);

  // PUT to the main resource: the status in the body is ignored, so this is a no-op.
  Json overwrite = status_set;
  overwrite["status"] = {{"phase", "Failed"}};
  const Json same = *store_.Update(kube::TrainingJobs(), "default", overwrite);
  EXPECT_EQ(same["status"]["phase"], "Running");
  EXPECT_EQ(kube::ResourceVersion(same), "2");
  overwrite.erase("status");
  EXPECT_EQ((*store_.Update(kube::TrainingJobs(), "default", overwrite))["status"]["phase"],
            "Running");
}

TEST_F(ObjectStoreTest, UpdateStatusChangesOnlyTheStatus) {
  const Json created = MustCreate(kube::TrainingJobs(), JobObject("a"));
  Json body = created;
  body["spec"]["replicas"] = 9;
  body["metadata"]["labels"]["x"] = "y";
  body["status"] = {{"phase", "Running"}};
  const Json updated = *store_.UpdateStatus(kube::TrainingJobs(), "default", body);
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
  const Json created = MustCreate(kube::TrainingJobs(), JobObject("a"));
  auto watcher = MustWatch(kube::TrainingJobs(), "", From("1"));
  const int64_t writes = store_.WriteCount();
  EXPECT_EQ(*store_.Update(kube::TrainingJobs(), "default", created), created);
  Json without_version = created;
  without_version["metadata"].erase("resourceVersion");
  EXPECT_EQ(*store_.Update(kube::TrainingJobs(), "default", without_version), created);
  EXPECT_EQ(*store_.UpdateStatus(kube::TrainingJobs(), "default", created), created);
  EXPECT_EQ(store_.WriteCount(), writes);
  EXPECT_EQ(store_.CurrentResourceVersion(), 1);
  EXPECT_FALSE(watcher->Next(std::chrono::milliseconds(100)).has_value());
  EXPECT_EQ(store_.OperationCount(verb::kUpdate), 2);  // calls are counted all the same
}

TEST_F(ObjectStoreTest, ValidatorSeesEveryWrite) {
  std::vector<std::string> seen;
  store_.SetValidator(kube::TrainingJobs(), [&](const Json& job) {
    seen.push_back(absl::StrCat(kube::Name(job), " ", kube::Generation(job)));
    if (job["spec"]["replicas"].get<int>() < 0) {
      return absl::InvalidArgumentError(
          "TrainingJob.psflow.io \"a\" is invalid: spec.replicas: Invalid value: -1: should be "
          "greater than or equal to 0");
    }
    return absl::OkStatus();
  });
  EXPECT_EQ(store_.Create(kube::TrainingJobs(), "default", JobObject("a", -1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  Json job = MustCreate(kube::TrainingJobs(), JobObject("a", 1));
  job["spec"]["replicas"] = -1;
  EXPECT_THAT(store_.Update(kube::TrainingJobs(), "default", job).status().message(),
              HasSubstr("spec.replicas: Invalid value: -1"));
  job["spec"]["replicas"] = 1;
  job["status"] = {{"phase", "Running"}};
  EXPECT_TRUE(store_.UpdateStatus(kube::TrainingJobs(), "default", job).ok());
  EXPECT_THAT(seen, ElementsAre("a 1", "a 1", "a 2", "a 1"));
  store_.SetValidator(kube::TrainingJobs(), nullptr);
  EXPECT_TRUE(store_.Create(kube::TrainingJobs(), "default", JobObject("b", -1)).ok());
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

}  // namespace
}  // namespace psflow::kubetest
