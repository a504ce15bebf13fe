#include "operator/controller/expectations.h"

#include <gtest/gtest.h>

namespace psflow::controller {
namespace {

// A pod's deletion is observed once: when it shows a deletionTimestamp, or when it goes without
// having shown one (a forced deletion), never twice for one pod.
TEST(Expectations, APodsDeletionCountsOnceWhetherSeenTerminatingOrGone) {
  Expectations e;
  e.Expect("ns/job", 0, 2);
  e.PodTerminating("ns/job", "uid-a");
  EXPECT_FALSE(e.Satisfied("ns/job"));
  e.PodTerminating("ns/job", "uid-a");  // another update of the same terminating pod
  e.PodGone("ns/job", "uid-a");         // and its final deletion
  EXPECT_FALSE(e.Satisfied("ns/job"));
  e.PodGone("ns/job", "uid-b");  // deleted at once: never seen terminating
  EXPECT_TRUE(e.Satisfied("ns/job"));
}

TEST(Expectations, ForgetDropsTheTerminatingPodsOfTheJob) {
  Expectations e;
  e.Expect("ns/job", 0, 1);
  e.PodTerminating("ns/job", "uid-a");
  EXPECT_TRUE(e.Satisfied("ns/job"));
  e.Forget("ns/job");
  // A job of the same name again: the old pod's final deletion is a deletion observed.
  e.Expect("ns/job", 0, 1);
  e.PodGone("ns/job", "uid-a");
  EXPECT_TRUE(e.Satisfied("ns/job"));
}

TEST(Expectations, CountsExpireAfterTheTtl) {
  absl::Time now = absl::FromUnixSeconds(1000);
  Expectations e(absl::Minutes(5), [&] { return now; });
  e.Expect("ns/job", 1, 0);
  EXPECT_FALSE(e.Satisfied("ns/job"));
  now += absl::Minutes(5) + absl::Seconds(1);
  EXPECT_TRUE(e.Satisfied("ns/job"));
}

}  // namespace
}  // namespace psflow::controller
