// Garbage collection by ownerReferences and deletion held by finalizers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/kube/object_store.h"
#include "tests/kube/store_test_util.h"
#include "tests/kube/verbs.h"

namespace psflow::kubetest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using kube::Pods;

class GarbageCollectionTest : public StoreTest {
 protected:
  // Job "j" owns pods "j-0" and "j-1"; pod "j-0" owns service "j-0" (dependents of dependents).
  void SetUp() override {
    job_ = MustCreate(kube::TrainingJobs(), JobObject("j"));  // rv 1
    for (const char* name : {"j-0", "j-1"}) {
      Json pod = PodObject(name);
      AddOwner(pod, job_);
      pods_.push_back(MustCreate(Pods(), pod));  // rv 2, 3
    }
    Json service{{"metadata", {{"name", "j-0"}}}, {"spec", Json::object()}};
    AddOwner(service, pods_[0]);
    MustCreate(kube::Services(), service);  // rv 4
    jobs_watch_ = MustWatch(kube::TrainingJobs(), "", From("4"));
    pods_watch_ = MustWatch(Pods(), "", From("4"));
    services_watch_ = MustWatch(kube::Services(), "", From("4"));
  }

  Json job_;
  std::vector<Json> pods_;
  std::unique_ptr<Watcher> jobs_watch_, pods_watch_, services_watch_;
};

TEST_F(GarbageCollectionTest, BackgroundDeletesTheOwnerThenItsDependents) {
  ASSERT_TRUE(store_.Delete(kube::TrainingJobs(), "default", "j", {}).ok());
  EXPECT_THAT(NextEvents(*jobs_watch_, 1), ElementsAre("DELETED default/j 5"));
  EXPECT_THAT(NextEvents(*pods_watch_, 2),
              ElementsAre("DELETED default/j-0 6", "DELETED default/j-1 8"));
  EXPECT_THAT(NextEvents(*services_watch_, 1), ElementsAre("DELETED default/j-0 7"));
  EXPECT_THAT(store_.List(Pods(), "", {})->items, IsEmpty());
  EXPECT_THAT(store_.List(kube::Services(), "", {})->items, IsEmpty());
}

TEST_F(GarbageCollectionTest, ForegroundDeletesTheDependentsFirst) {
  ASSERT_TRUE(
      store_.Delete(kube::TrainingJobs(), "default", "j", Propagate(kube::Propagation::kForeground))
          .ok());
  EXPECT_THAT(NextEvents(*services_watch_, 1), ElementsAre("DELETED default/j-0 5"));
  EXPECT_THAT(NextEvents(*pods_watch_, 2),
              ElementsAre("DELETED default/j-0 6", "DELETED default/j-1 7"));
  EXPECT_THAT(NextEvents(*jobs_watch_, 1), ElementsAre("DELETED default/j 8"));
}

TEST_F(GarbageCollectionTest, OrphanRemovesTheOwnerReference) {
  Json pod = MustGet(Pods(), "j-1");
  AddOwner(pod, MustCreate(kube::TrainingJobs(), JobObject("other")),
           /*controller=*/false);                           // rv 5
  ASSERT_TRUE(store_.Update(Pods(), "default", pod).ok());  // rv 6
  ASSERT_TRUE(
      store_.Delete(kube::TrainingJobs(), "default", "j", Propagate(kube::Propagation::kOrphan))
          .ok());
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
  AddOwner(pod, MustCreate(kube::TrainingJobs(), JobObject("other")), /*controller=*/false);
  ASSERT_TRUE(store_.Update(Pods(), "default", pod).ok());
  ASSERT_TRUE(store_.Delete(kube::TrainingJobs(), "default", "j", {}).ok());
  EXPECT_EQ(store_.Get(Pods(), "default", "j-0").status().code(), absl::StatusCode::kNotFound);
  const Json kept = MustGet(Pods(), "j-1");
  ASSERT_EQ(kept["metadata"]["ownerReferences"].size(), 1u);
  EXPECT_EQ(kept["metadata"]["ownerReferences"][0]["name"], "other");
}

TEST_F(GarbageCollectionTest, FinalizersHoldTheObjectUntilEmptied) {
  Json job = job_;
  job["metadata"]["finalizers"] = {"psflow.io/cleanup"};
  job = *store_.Update(kube::TrainingJobs(), "default", job);  // rv 5
  const Json marked = *store_.Delete(kube::TrainingJobs(), "default", "j", {});
  EXPECT_EQ(marked["metadata"]["deletionTimestamp"], "2024-05-01T12:00:00Z");
  EXPECT_EQ(kube::ResourceVersion(marked), "6");
  EXPECT_TRUE(kube::BeingDeleted(MustGet(kube::TrainingJobs(), "j")));
  EXPECT_EQ(MustGet(Pods(), "j-0")["metadata"]["name"], "j-0");  // dependents wait
  EXPECT_EQ(*store_.Delete(kube::TrainingJobs(), "default", "j", {}),
            marked);  // already being deleted

  Json more = marked;
  more["metadata"]["finalizers"].push_back("another");
  EXPECT_THAT(store_.Update(kube::TrainingJobs(), "default", more).status().message(),
              HasSubstr("no new finalizers can be added if the object is being deleted"));
  Json cleared = marked;
  cleared["metadata"]["deletionTimestamp"] = nullptr;  // cannot be unset by an update
  cleared["metadata"]["finalizers"] = Json::array();
  ASSERT_TRUE(store_.Update(kube::TrainingJobs(), "default", cleared).ok());
  EXPECT_THAT(NextEvents(*jobs_watch_, 3),
              ElementsAre("MODIFIED default/j 5", "MODIFIED default/j 6", "DELETED default/j 7"));
  EXPECT_EQ(store_.Get(kube::TrainingJobs(), "default", "j").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(store_.List(Pods(), "", {})->items, IsEmpty());
}

}  // namespace
}  // namespace psflow::kubetest
