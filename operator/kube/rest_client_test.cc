// RestKubeClient against the test API server (tests/kube): real REST semantics over HTTP.
#include "operator/kube/rest_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/api_status.h"
#include "operator/kube/kubeconfig.h"
#include "operator/kube/object_meta.h"
#include "tests/kube/object_store.h"
#include "tests/kube/test_api_server.h"
#include "tests/kube/verbs.h"

namespace psflow::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr char kToken[] = "test-token";

int64_t Version(const Json& object) {
  int64_t version = 0;
  EXPECT_TRUE(absl::SimpleAtoi(ResourceVersion(object), &version)) << object.dump();
  return version;
}

Json PodObject(const std::string& name, const std::map<std::string, std::string>& labels = {}) {
  return {{"metadata", {{"name", name}, {"labels", labels}}},
          {"spec", {{"containers", {{{"name", "main"}, {"image", "psflow/worker:1"}}}}}}};
}

std::string TypeName(WatchEventType type) {
  switch (type) {
    case WatchEventType::kAdded:
      return "ADDED";
    case WatchEventType::kModified:
      return "MODIFIED";
    case WatchEventType::kDeleted:
      return "DELETED";
    case WatchEventType::kBookmark:
      return "BOOKMARK";
  }
  return "?";
}

// A watch on its own thread, recording what it sees.
class BackgroundWatch {
 public:
  BackgroundWatch(RestKubeClient& client, const Resource& resource, ListOptions options)
      : thread_([this, &client, resource, options] {
          const absl::Status status = client.Watch(resource, "default", options, stop_.get_token(),
                                                   [this](const WatchEvent& event) {
                                                     std::lock_guard<std::mutex> lock(mutex_);
                                                     events_.push_back(event);
                                                     changed_.notify_all();
                                                   });
          result_.set_value(status);
        }) {}
  ~BackgroundWatch() {
    stop_.request_stop();
    thread_.join();
  }

  // Waits (up to 30 s) until `count` events other than bookmarks have arrived.
  std::vector<WatchEvent> WaitForEvents(size_t count, bool bookmarks_too = false) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(30),
                      [&] { return Matching(bookmarks_too).size() >= count; });
    return Matching(bookmarks_too);
  }
  // Waits (up to 30 s) for the watch to end.
  absl::Status Result() {
    if (future_.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
      return absl::DeadlineExceededError("the watch did not end");
    }
    return future_.get();
  }
  void Stop() { stop_.request_stop(); }

 private:
  std::vector<WatchEvent> Matching(bool bookmarks_too) {
    std::vector<WatchEvent> matching;
    for (const WatchEvent& event : events_) {
      if (bookmarks_too == (event.type == WatchEventType::kBookmark)) matching.push_back(event);
    }
    return matching;
  }

  std::stop_source stop_;
  std::promise<absl::Status> result_;
  std::future<absl::Status> future_ = result_.get_future();
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<WatchEvent> events_;
  std::thread thread_;  // last: starts once everything above exists
};

class RestClientTest : public ::testing::Test {
 protected:
  RestClientTest() : store_(StoreOptions()) {
    store_.RegisterBuiltins();
    store_.RegisterResource(TrainingJobs(), /*has_status_subresource=*/true);
  }

  static kubetest::ObjectStore::Options StoreOptions() {
    kubetest::ObjectStore::Options options;
    options.bookmark_interval = std::chrono::milliseconds(50);
    return options;
  }

  void SetUp() override {
    kubetest::TestApiServer::Options options;
    options.bearer_token = kToken;
    absl::StatusOr<std::unique_ptr<kubetest::TestApiServer>> server =
        kubetest::TestApiServer::Start(&store_, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);

    // The client is configured the way the operator is: from a kubeconfig.
    std::string dir = (fs::temp_directory_path() / "rest_client_test.XXXXXX").string();
    ASSERT_NE(::mkdtemp(dir.data()), nullptr);
    dir_ = dir;
    ASSERT_TRUE(server_->WriteKubeconfig((dir_ / "kubeconfig").string()).ok());
    absl::StatusOr<ClusterConfig> config = LoadKubeconfig((dir_ / "kubeconfig").string());
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
    client_ = NewClient(config_);
    ASSERT_NE(client_, nullptr);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }

  std::unique_ptr<RestKubeClient> NewClient(const ClusterConfig& config) {
    RestKubeClient::Options options;
    options.qps = 0;
    options.observer = [this](absl::string_view verb, const Resource&, int code, double) {
      std::lock_guard<std::mutex> lock(observed_mutex_);
      observed_.push_back(absl::StrCat(verb, " ", code));
    };
    absl::StatusOr<std::unique_ptr<RestKubeClient>> client =
        RestKubeClient::Create(config, options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::vector<std::string> Observed() {
    std::lock_guard<std::mutex> lock(observed_mutex_);
    return observed_;
  }

  kubetest::ObjectStore store_;
  std::unique_ptr<kubetest::TestApiServer> server_;
  fs::path dir_;
  ClusterConfig config_;
  std::unique_ptr<RestKubeClient> client_;
  std::mutex observed_mutex_;
  std::vector<std::string> observed_;
};

TEST_F(RestClientTest, KubeconfigWrittenByTheServerLoadsAndWorks) {
  EXPECT_EQ(config_.server, server_->url());
  EXPECT_EQ(config_.token, kToken);
  EXPECT_EQ(config_.default_namespace, "default");
  EXPECT_TRUE(client_->CheckResourceServed(Pods()).ok());
  EXPECT_TRUE(client_->CheckResourceServed(TrainingJobs()).ok());
  EXPECT_TRUE(client_->List(Pods(), "default", {}).ok());
}

TEST_F(RestClientTest, CrudRoundTripKeepsEveryField) {
  absl::StatusOr<Json> created = client_->Create(Pods(), "default", PodObject("p", {{"app", "a"}}));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["apiVersion"], "v1");
  EXPECT_EQ((*created)["kind"], "Pod");
  EXPECT_EQ(Name(*created), "p");
  EXPECT_EQ(Namespace(*created), "default");
  EXPECT_FALSE(Uid(*created).empty());
  EXPECT_FALSE(StringAt(*created, "metadata", "creationTimestamp").empty());
  EXPECT_EQ(Label(*created, "app"), "a");
  EXPECT_EQ((*created)["spec"], PodObject("p")["spec"]);

  absl::StatusOr<Json> got = client_->Get(Pods(), "default", "p");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, *created);

  Json changed = *got;
  changed["metadata"]["labels"]["app"] = "b";
  absl::StatusOr<Json> updated = client_->Update(Pods(), "default", changed);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(Label(*updated, "app"), "b");
  EXPECT_EQ(Uid(*updated), Uid(*created));
  EXPECT_GT(Version(*updated), Version(*created));

  Json with_status = *updated;
  with_status["status"] = {{"phase", "Running"}};
  absl::StatusOr<Json> status_updated = client_->UpdateStatus(Pods(), "default", with_status);
  ASSERT_TRUE(status_updated.ok()) << status_updated.status();
  EXPECT_EQ((*status_updated)["status"]["phase"], "Running");
  EXPECT_EQ(Label(*status_updated, "app"), "b");

  DeleteOptions options;
  options.precondition_uid = Uid(*created);
  ASSERT_TRUE(client_->Delete(Pods(), "default", "p", options).ok());
  EXPECT_EQ(client_->Get(Pods(), "default", "p").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RestClientTest, TrainingJobStatusSubresource) {
  Json job = {{"metadata", {{"name", "mnist"}}}, {"spec", {{"model", "mlp"}}}};
  absl::StatusOr<Json> created = client_->Create(TrainingJobs(), "default", job);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["apiVersion"], "psflow.io/v1alpha1");
  Json with_status = *created;
  with_status["status"] = {{"phase", "Running"}};
  with_status["spec"]["model"] = "ignored by the status subresource";
  absl::StatusOr<Json> updated = client_->UpdateStatus(TrainingJobs(), "default", with_status);
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ((*updated)["status"]["phase"], "Running");
  EXPECT_EQ((*updated)["spec"]["model"], "mlp");
}

TEST_F(RestClientTest, ApiErrorsMapToStatuses) {
  EXPECT_EQ(client_->Get(Pods(), "default", "missing").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<Json> created = client_->Create(Pods(), "default", PodObject("p"));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(client_->Create(Pods(), "default", PodObject("p")).status().code(),
            absl::StatusCode::kAlreadyExists);

  // Someone else writes first: our copy's resourceVersion is stale.
  Json theirs = *created;
  theirs["metadata"]["labels"] = {{"writer", "them"}};
  ASSERT_TRUE(client_->Update(Pods(), "default", theirs).ok());
  const absl::Status stale = client_->Update(Pods(), "default", *created).status();
  EXPECT_TRUE(IsConflict(stale)) << stale;
  DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "not-the-uid";
  EXPECT_TRUE(IsConflict(client_->Delete(Pods(), "default", "p", wrong_uid)));

  EXPECT_EQ(client_->Create(Pods(), "default", PodObject("Not_A_Valid_Name")).status().code(),
            absl::StatusCode::kInvalidArgument);

  server_->Forbid(kubetest::verb::kList, TrainingJobs());
  const absl::Status forbidden = client_->List(TrainingJobs(), "default", {}).status();
  EXPECT_EQ(forbidden.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(forbidden.message(), HasSubstr("cannot list resource \"trainingjobs\""));

  ClusterConfig wrong_token = config_;
  wrong_token.token = "stolen";
  EXPECT_EQ(NewClient(wrong_token)->Get(Pods(), "default", "p").status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST_F(RestClientTest, ListWithALabelSelector) {
  ASSERT_TRUE(client_->Create(Pods(), "default", PodObject("a", {{"app", "x"}})).ok());
  ASSERT_TRUE(
      client_->Create(Pods(), "default", PodObject("b", {{"app", "x"}, {"tier", "db"}})).ok());
  ASSERT_TRUE(client_->Create(Pods(), "default", PodObject("c", {{"app", "y"}})).ok());
  ASSERT_TRUE(client_->Create(Pods(), "other", PodObject("d", {{"app", "x"}})).ok());
  ListOptions options;
  options.label_selector = "app=x,tier!=db";
  absl::StatusOr<ObjectList> list = client_->List(Pods(), "default", options);
  ASSERT_TRUE(list.ok()) << list.status();
  std::vector<std::string> names;
  for (const Json& item : list->items) {
    names.push_back(Name(item));
    EXPECT_EQ(item["kind"], "Pod");
  }
  EXPECT_THAT(names, ElementsAre("a"));
  EXPECT_EQ(list->resource_version, absl::StrCat(store_.CurrentResourceVersion()));
  // All namespaces.
  list = client_->List(Pods(), "", options);
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->items.size(), 2u);
  options.label_selector = "app in (x)";
  EXPECT_EQ(client_->List(Pods(), "default", options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(RestClientTest, WatchStreamsChangesInOrderWithBookmarks) {
  // A write first: watching from version "0" would mean "the current state, then changes".
  ASSERT_TRUE(client_->Create(Services(), "default", {{"metadata", {{"name", "s"}}}}).ok());
  absl::StatusOr<ObjectList> list = client_->List(Pods(), "default", {});
  ASSERT_TRUE(list.ok()) << list.status();
  ListOptions options;
  options.resource_version = list->resource_version;
  options.timeout_seconds = 60;
  BackgroundWatch watch(*client_, Pods(), options);

  absl::StatusOr<Json> created = client_->Create(Pods(), "default", PodObject("p"));
  ASSERT_TRUE(created.ok()) << created.status();
  Json changed = *created;
  changed["metadata"]["labels"] = {{"app", "b"}};
  ASSERT_TRUE(client_->Update(Pods(), "default", changed).ok());
  ASSERT_TRUE(client_->Delete(Pods(), "default", "p", {}).ok());

  const std::vector<WatchEvent> events = watch.WaitForEvents(3);
  std::vector<std::string> seen;
  int64_t last_version = 0;
  for (const WatchEvent& event : events) {
    seen.push_back(absl::StrCat(TypeName(event.type), " ", Name(event.object)));
    EXPECT_GT(Version(event.object), last_version);
    last_version = Version(event.object);
  }
  EXPECT_THAT(seen, ElementsAre("ADDED p", "MODIFIED p", "DELETED p"));
  EXPECT_EQ(Label(events[1].object, "app"), "b");

  const std::vector<WatchEvent> bookmarks = watch.WaitForEvents(1, /*bookmarks_too=*/true);
  ASSERT_FALSE(bookmarks.empty());
  EXPECT_GE(Version(bookmarks.back().object), Version(events[0].object));

  watch.Stop();
  EXPECT_EQ(watch.Result().code(), absl::StatusCode::kCancelled);
}

TEST_F(RestClientTest, WatchFromZeroStartsWithTheCurrentState) {
  ASSERT_TRUE(client_->Create(Pods(), "default", PodObject("a")).ok());
  ASSERT_TRUE(client_->Create(Pods(), "default", PodObject("b")).ok());
  ListOptions options;
  options.resource_version = "0";
  options.allow_bookmarks = false;
  BackgroundWatch watch(*client_, Pods(), options);
  const std::vector<WatchEvent> events = watch.WaitForEvents(2);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].type, WatchEventType::kAdded);
  EXPECT_EQ(events[1].type, WatchEventType::kAdded);
}

TEST_F(RestClientTest, WatchEndsOkWhenTheServerEndsIt) {
  ListOptions options;
  options.timeout_seconds = 1;
  EXPECT_TRUE(client_->Watch(Pods(), "default", options, {}, [](const WatchEvent&) {}).ok());

  options.timeout_seconds = 60;
  BackgroundWatch watch(*client_, Pods(), options);
  watch.WaitForEvents(1, /*bookmarks_too=*/true);  // the watch is being served
  server_->CloseWatches();
  EXPECT_TRUE(watch.Result().ok());
}

TEST_F(RestClientTest, GoneVersionsAreOutOfRange) {
  absl::StatusOr<Json> first = client_->Create(Pods(), "default", PodObject("first"));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<Json> created = client_->Create(Pods(), "default", PodObject("p"));
  ASSERT_TRUE(created.ok()) << created.status();
  ListOptions options;
  options.resource_version = ResourceVersion(*created);
  options.timeout_seconds = 60;
  // A watch that compaction overtakes gets an ERROR event.
  BackgroundWatch watch(*client_, Pods(), options);
  watch.WaitForEvents(1, /*bookmarks_too=*/true);
  store_.Compact();
  const absl::Status ended = watch.Result();
  EXPECT_TRUE(IsGone(ended)) << ended;
  // Watching again from before the compaction: the server answers 410.
  options.resource_version = ResourceVersion(*first);
  options.timeout_seconds = 5;
  const absl::Status refused =
      client_->Watch(Pods(), "default", options, {}, [](const WatchEvent&) {});
  EXPECT_TRUE(IsGone(refused)) << refused;
}

TEST_F(RestClientTest, StopCancelsAWatchPromptly) {
  ListOptions options;
  options.timeout_seconds = 600;
  options.allow_bookmarks = false;  // nothing arrives: the watch sits in a read
  std::stop_source stop;
  std::promise<void> started;
  std::thread stopper([&] {
    // Once the server counts the watch it is being served; then stop it.
    while (server_->RequestCount(kubetest::verb::kWatch) == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    stop.request_stop();
  });
  const auto start = std::chrono::steady_clock::now();
  const absl::Status status =
      client_->Watch(Pods(), "default", options, stop.get_token(), [](const WatchEvent&) {});
  const auto elapsed = std::chrono::steady_clock::now() - start;
  stopper.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  // Not a performance figure: without the stop the watch would last ten minutes.
  EXPECT_LT(elapsed, std::chrono::seconds(60));
}

TEST_F(RestClientTest, ServerGoingAwayMidWatchIsUnavailable) {
  ListOptions options;
  options.timeout_seconds = 60;
  BackgroundWatch watch(*client_, Pods(), options);
  watch.WaitForEvents(1, /*bookmarks_too=*/true);
  server_->Stop();
  const absl::Status ended = watch.Result();
  EXPECT_EQ(ended.code(), absl::StatusCode::kUnavailable) << ended;
  EXPECT_THAT(ended.message(), HasSubstr(server_->url()));
  const absl::Status down = client_->Get(Pods(), "default", "p").status();
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;

  // Back again: the same client reconnects.
  ASSERT_TRUE(server_->Resume().ok());
  EXPECT_EQ(client_->Get(Pods(), "default", "p").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RestClientTest, ObserverSeesEachRequestTheServerCounts) {
  absl::StatusOr<Json> created = client_->Create(Pods(), "default", PodObject("p"));
  ASSERT_TRUE(created.ok()) << created.status();
  ASSERT_TRUE(client_->Get(Pods(), "default", "p").ok());
  ASSERT_FALSE(client_->Get(Pods(), "default", "q").ok());
  ASSERT_TRUE(client_->List(Pods(), "default", {}).ok());
  ASSERT_TRUE(client_->Update(Pods(), "default", *created).ok());
  ASSERT_TRUE(client_->UpdateStatus(Pods(), "default", *created).ok());
  ListOptions options;
  options.timeout_seconds = 1;
  ASSERT_TRUE(client_->Watch(Pods(), "default", options, {}, [](const WatchEvent&) {}).ok());
  ASSERT_TRUE(client_->Delete(Pods(), "default", "p", {}).ok());

  EXPECT_THAT(Observed(), ElementsAre("create 201", "get 200", "get 404", "list 200", "update 200",
                                      "update_status 200", "watch 200", "delete 200"));
  for (absl::string_view verb : kubetest::verb::kAll) {
    EXPECT_EQ(server_->RequestCount(verb), verb == kubetest::verb::kGet ? 2 : 1) << verb;
  }
}

TEST_F(RestClientTest, CheckResourceServedSaysWhichCrdIsMissing) {
  EXPECT_TRUE(client_->CheckResourceServed(TrainingJobs()).ok());
  store_.UnregisterResource(TrainingJobs());
  const absl::Status missing = client_->CheckResourceServed(TrainingJobs());
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.message(), HasSubstr("CRD trainingjobs.psflow.io is not installed"));
  EXPECT_EQ(client_->List(TrainingJobs(), "default", {}).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psflow::kube
