#include "tests/kube/memory_kube_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/kube/store_test_util.h"
#include "tests/kube/verbs.h"

namespace psflow::kubetest {
namespace {

using ::testing::ElementsAre;

// Runs client.Watch on its own thread and collects the events it delivers.
class WatchThread {
 public:
  WatchThread(kube::KubeClient& client, const kube::Resource& resource, kube::ListOptions options)
      : thread_([this, &client, resource, options](std::stop_token stop) {
          absl::Status result =
              client.Watch(resource, "", options, stop, [this](const kube::WatchEvent& event) {
                std::lock_guard lock(mu_);
                events_.push_back(Describe(event));
                changed_.notify_all();
              });
          std::lock_guard lock(mu_);
          result_ = std::move(result);
          done_ = true;
          changed_.notify_all();
        }) {}

  // The events so far, once there are `count` of them (or 10 s passed).
  std::vector<std::string> WaitForEvents(size_t count) {
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(10), [&] { return events_.size() >= count; });
    return events_;
  }
  // What Watch returned, once it has (or an error after 10 s).
  absl::Status WaitForResult() {
    std::unique_lock lock(mu_);
    if (!changed_.wait_for(lock, std::chrono::seconds(10), [&] { return done_; })) {
      return absl::DeadlineExceededError("Watch did not return");
    }
    return result_;
  }
  void Stop() { thread_.request_stop(); }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  absl::Status result_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::jthread thread_;  // last: joins before the members it uses go
};

class MemoryKubeClientTest : public ::testing::Test {
 protected:
  MemoryKubeClientTest() : store_(TestStoreOptions()), client_(&store_) {
    RegisterTestResources(store_);
  }

  ObjectStore store_;
  MemoryKubeClient client_;
};

TEST_F(MemoryKubeClientTest, CallsReachTheStore) {
  absl::StatusOr<Json> created = client_.Create(kube::TrainingJobs(), "default", JobObject("j"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(kube::ResourceVersion(*created), "1");
  EXPECT_EQ(*client_.Get(kube::TrainingJobs(), "default", "j"), *created);

  Json job = *created;
  job["spec"]["replicas"] = 2;
  EXPECT_EQ(kube::Generation(*client_.Update(kube::TrainingJobs(), "default", job)), 2);
  EXPECT_EQ(client_.Update(kube::TrainingJobs(), "default", job).status().code(),
            absl::StatusCode::kAborted);  // job carries version 1
  job = *client_.Get(kube::TrainingJobs(), "default", "j");
  job["status"] = {{"phase", "Running"}};
  EXPECT_EQ((*client_.UpdateStatus(kube::TrainingJobs(), "default", job))["status"]["phase"],
            "Running");
  absl::StatusOr<kube::ObjectList> list = client_.List(kube::TrainingJobs(), "", {});
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->items.size(), 1u);
  EXPECT_EQ(list->resource_version, "3");

  EXPECT_TRUE(client_.Delete(kube::TrainingJobs(), "default", "j", {}).ok());
  EXPECT_EQ(client_.Delete(kube::TrainingJobs(), "default", "j", {}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client_.Get(kube::TrainingJobs(), "default", "j").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(MemoryKubeClientTest, CountsCallsPerVerb) {
  ASSERT_TRUE(client_.Create(kube::Pods(), "default", PodObject("a")).ok());
  ASSERT_TRUE(client_.Get(kube::Pods(), "default", "a").ok());
  EXPECT_FALSE(client_.Get(kube::Pods(), "default", "b").ok());  // failures count too
  ASSERT_TRUE(client_.List(kube::Pods(), "default", {}).ok());
  EXPECT_EQ(client_.CallCount(verb::kCreate), 1);
  EXPECT_EQ(client_.CallCount(verb::kGet), 2);
  EXPECT_EQ(client_.CallCount(verb::kList), 1);
  EXPECT_EQ(client_.CallCount(verb::kUpdate), 0);
  EXPECT_EQ(client_.TotalCalls(), 4);
}

TEST_F(MemoryKubeClientTest, FaultsReplaceTheCall) {
  ASSERT_TRUE(client_.Create(kube::Pods(), "default", PodObject("a")).ok());
  std::vector<std::string> asked;
  client_.SetFault(
      [&](absl::string_view verb, const kube::Resource& resource, absl::string_view name) {
        asked.push_back(absl::StrCat(verb, " ", resource.plural, " ", name));
        if (verb == verb::kUpdate && name == "a") return absl::UnavailableError("connection reset");
        return absl::OkStatus();
      });
  Json pod = *client_.Get(kube::Pods(), "default", "a");
  pod["metadata"]["labels"]["x"] = "1";
  const int64_t writes = store_.WriteCount();
  EXPECT_EQ(client_.Update(kube::Pods(), "default", pod).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_.WriteCount(), writes);  // the call never happened
  ASSERT_TRUE(client_.Create(kube::Pods(), "default", PodObject("b")).ok());
  ASSERT_TRUE(client_.List(kube::Pods(), "", {}).ok());
  EXPECT_THAT(asked, ElementsAre("get pods a", "update pods a", "create pods b", "list pods "));
  EXPECT_EQ(client_.CallCount(verb::kUpdate), 1);

  client_.SetFault(nullptr);
  EXPECT_TRUE(client_.Update(kube::Pods(), "default", pod).ok());
}

TEST_F(MemoryKubeClientTest, WatchDeliversChangesUntilStopped) {
  ASSERT_TRUE(client_.Create(kube::Pods(), "default", PodObject("a")).ok());
  kube::ListOptions options;
  options.allow_bookmarks = false;
  WatchThread watch(client_, kube::Pods(), options);
  EXPECT_THAT(watch.WaitForEvents(1), ElementsAre("ADDED default/a 1"));
  ASSERT_TRUE(store_.SetPodPhase("default", "a", "Running").ok());
  EXPECT_THAT(watch.WaitForEvents(2), ElementsAre("ADDED default/a 1", "MODIFIED default/a 2"));
  watch.Stop();
  EXPECT_EQ(watch.WaitForResult().code(), absl::StatusCode::kCancelled);
}

TEST_F(MemoryKubeClientTest, WatchReturnsOkWhenTheServerEndsIt) {
  kube::ListOptions options;
  options.timeout_seconds = 1;
  WatchThread timed_out(client_, kube::Pods(), options);
  EXPECT_TRUE(timed_out.WaitForResult().ok());
  // The final bookmark came before the end.
  EXPECT_THAT(timed_out.WaitForEvents(1), ElementsAre("BOOKMARK 0"));

  WatchThread closed(client_, kube::Pods(), {});
  while (store_.OpenWatchCount() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  store_.CloseWatches();
  EXPECT_TRUE(closed.WaitForResult().ok());
}

TEST_F(MemoryKubeClientTest, WatchIsGoneAfterCompaction) {
  ASSERT_TRUE(client_.Create(kube::Pods(), "default", PodObject("a")).ok());
  ASSERT_TRUE(client_.Create(kube::Pods(), "default", PodObject("b")).ok());
  kube::ListOptions options;
  options.resource_version = "1";
  WatchThread open(client_, kube::Pods(), options);
  EXPECT_THAT(open.WaitForEvents(1), ElementsAre("ADDED default/b 2"));
  store_.Compact();
  absl::Status ended = open.WaitForResult();
  EXPECT_EQ(ended.code(), absl::StatusCode::kOutOfRange) << ended;

  // Resuming from where it was is 410 too: the caller lists again.
  WatchThread resumed(client_, kube::Pods(), options);
  EXPECT_EQ(resumed.WaitForResult().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(client_.CallCount(verb::kWatch), 2);
}

TEST_F(MemoryKubeClientTest, WatchFaultsAndErrorsReturnAtOnce) {
  client_.SetFault([](absl::string_view verb, const kube::Resource&, absl::string_view) {
    return verb == verb::kWatch ? absl::PermissionDeniedError("forbidden") : absl::OkStatus();
  });
  WatchThread denied(client_, kube::Pods(), {});
  EXPECT_EQ(denied.WaitForResult().code(), absl::StatusCode::kPermissionDenied);
  client_.SetFault(nullptr);
  kube::ListOptions bad;
  bad.label_selector = "a in (b)";
  WatchThread invalid(client_, kube::Pods(), bad);
  EXPECT_EQ(invalid.WaitForResult().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psflow::kubetest
