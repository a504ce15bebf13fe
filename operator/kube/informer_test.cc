#include "operator/kube/informer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "operator/kube/object_meta.h"

namespace psflow::kube {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

// How long a test waits for the informer to reach a state before failing (never reached when
// the code is right; not a timing assertion).
constexpr auto kFailsafe = std::chrono::seconds(60);

// One scripted Watch call: the events it delivers, then the status it returns.
struct WatchScript {
  std::vector<WatchEvent> events;
  absl::Status end;
};

// A KubeClient that answers List and Watch from scripts, in order, and records what it was
// asked. Once the watch scripts run out, Watch blocks until stopped (returning CANCELLED): the
// informer is then "idle", having handled everything scripted before.
class ScriptedClient : public KubeClient {
 public:
  void AddList(absl::StatusOr<ObjectList> list) {
    std::lock_guard<std::mutex> lock(mu_);
    lists_.push_back(std::move(list));
  }
  void AddWatch(std::vector<WatchEvent> events, absl::Status end) {
    std::lock_guard<std::mutex> lock(mu_);
    watches_.push_back({std::move(events), std::move(end)});
  }

  // Waits until the scripts are used up and a Watch is blocked.
  bool WaitUntilIdle() {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kFailsafe, [this] { return idle_; });
  }
  std::vector<ListOptions> list_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return list_calls_;
  }
  std::vector<ListOptions> watch_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return watch_calls_;
  }
  std::vector<std::string> namespaces() const {
    std::lock_guard<std::mutex> lock(mu_);
    return namespaces_;
  }
  int cancelled_watches() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_watches_;
  }

  absl::StatusOr<ObjectList> List(const Resource&, absl::string_view ns,
                                  const ListOptions& options) override {
    std::lock_guard<std::mutex> lock(mu_);
    list_calls_.push_back(options);
    namespaces_.emplace_back(ns);
    if (lists_.empty()) {
      ADD_FAILURE() << "List called more often than scripted";
      return absl::UnavailableError("no scripted list left");
    }
    absl::StatusOr<ObjectList> list = std::move(lists_.front());
    lists_.pop_front();
    return list;
  }

  absl::Status Watch(const Resource&, absl::string_view ns, const ListOptions& options,
                     std::stop_token stop,
                     const std::function<void(const WatchEvent&)>& on_event) override {
    WatchScript script;
    {
      std::unique_lock<std::mutex> lock(mu_);
      watch_calls_.push_back(options);
      namespaces_.emplace_back(ns);
      if (watches_.empty()) {
        idle_ = true;
        cv_.notify_all();
        stop_cv_.wait(lock, stop, [] { return false; });
        ++cancelled_watches_;
        return absl::CancelledError("watch stopped");
      }
      script = std::move(watches_.front());
      watches_.pop_front();
    }
    for (const WatchEvent& event : script.events) on_event(event);
    return script.end;
  }

  absl::StatusOr<Json> Get(const Resource&, absl::string_view, absl::string_view) override {
    return absl::UnimplementedError("informers only list and watch");
  }
  absl::StatusOr<Json> Create(const Resource&, absl::string_view, const Json&) override {
    return absl::UnimplementedError("informers only list and watch");
  }
  absl::StatusOr<Json> Update(const Resource&, absl::string_view, const Json&) override {
    return absl::UnimplementedError("informers only list and watch");
  }
  absl::StatusOr<Json> UpdateStatus(const Resource&, absl::string_view, const Json&) override {
    return absl::UnimplementedError("informers only list and watch");
  }
  absl::Status Delete(const Resource&, absl::string_view, absl::string_view,
                      const DeleteOptions&) override {
    return absl::UnimplementedError("informers only list and watch");
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::condition_variable_any stop_cv_;
  std::deque<absl::StatusOr<ObjectList>> lists_;
  std::deque<WatchScript> watches_;
  std::vector<ListOptions> list_calls_;
  std::vector<ListOptions> watch_calls_;
  std::vector<std::string> namespaces_;
  int cancelled_watches_ = 0;
  bool idle_ = false;
};

Json Obj(const std::string& ns, const std::string& name, const std::string& rv,
         Json labels = Json::object()) {
  return {{"metadata",
           {{"namespace", ns}, {"name", name}, {"resourceVersion", rv}, {"labels", labels}}}};
}

ObjectList ListOf(std::vector<Json> items, const std::string& rv) {
  return ObjectList{std::move(items), rv};
}

WatchEvent Added(Json obj) { return {WatchEventType::kAdded, std::move(obj)}; }
WatchEvent Modified(Json obj) { return {WatchEventType::kModified, std::move(obj)}; }
WatchEvent Deleted(Json obj) { return {WatchEventType::kDeleted, std::move(obj)}; }
WatchEvent Bookmark(const std::string& rv) {
  return {WatchEventType::kBookmark, {{"metadata", {{"resourceVersion", rv}}}}};
}

std::string Describe(const Json& obj) { return Key(obj) + "@" + ResourceVersion(obj); }

// Handlers that log what they hear as "add ns/a@1", "update ns/a@1->2", "delete ns/a@2".
class Recorder {
 public:
  Informer::Handlers Handlers() {
    return {[this](const Json& obj) { Log("add " + Describe(obj)); },
            [this](const Json& old_obj, const Json& new_obj) {
              Log("update " + Describe(old_obj) + "->" + ResourceVersion(new_obj));
            },
            [this](const Json& obj) { Log("delete " + Describe(obj)); }};
  }
  void Log(const std::string& line) {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.push_back(line);
  }
  std::vector<std::string> lines() const {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::string> lines_;
};

// Records the informer's backoff delays instead of waiting.
class SleepRecorder {
 public:
  std::function<void(milliseconds, std::stop_token)> Sleep() {
    return [this](milliseconds delay, std::stop_token) {
      std::lock_guard<std::mutex> lock(mu_);
      delays_.push_back(delay);
    };
  }
  std::vector<milliseconds> delays() const {
    std::lock_guard<std::mutex> lock(mu_);
    return delays_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<milliseconds> delays_;
};

std::vector<std::string> Keys(const std::vector<std::shared_ptr<const Json>>& objects) {
  std::vector<std::string> keys;
  for (const auto& obj : objects) keys.push_back(Key(*obj));
  return keys;
}

std::vector<std::string> WatchVersions(const ScriptedClient& client) {
  std::vector<std::string> versions;
  for (const ListOptions& options : client.watch_calls()) {
    versions.push_back(options.resource_version);
  }
  return versions;
}

Informer::Options TestOptions(SleepRecorder& sleeps) {
  Informer::Options options;
  options.ns = "team";
  options.label_selector = "app=psflow";
  options.sleep = sleeps.Sleep();
  return options;
}

TEST(Informer, InitialListFillsTheCacheCallsOnAddThenWatchesFromTheListVersion) {
  ScriptedClient client;
  client.AddList(ListOf({Obj("team", "a", "3"), Obj("team", "b", "4")}, "10"));
  Recorder recorder;
  SleepRecorder sleeps;
  Informer informer(client, Pods(), TestOptions(sleeps), recorder.Handlers());
  EXPECT_FALSE(informer.HasSynced());
  EXPECT_FALSE(informer.WaitForSync(milliseconds(0)));

  informer.Start();
  EXPECT_TRUE(informer.WaitForSync(kFailsafe));
  ASSERT_TRUE(client.WaitUntilIdle());
  EXPECT_TRUE(informer.HasSynced());
  EXPECT_THAT(recorder.lines(), ElementsAre("add team/a@3", "add team/b@4"));
  ASSERT_NE(informer.Get("team", "a"), nullptr);
  EXPECT_EQ(ResourceVersion(*informer.Get("team", "a")), "3");
  EXPECT_EQ(informer.Get("team", "c"), nullptr);

  ASSERT_EQ(client.list_calls().size(), 1u);
  EXPECT_EQ(client.list_calls()[0].label_selector, "app=psflow");
  ASSERT_EQ(client.watch_calls().size(), 1u);
  const ListOptions watch = client.watch_calls()[0];
  EXPECT_EQ(watch.resource_version, "10");
  EXPECT_EQ(watch.label_selector, "app=psflow");
  EXPECT_TRUE(watch.allow_bookmarks);
  EXPECT_GE(watch.timeout_seconds, 300);  // jittered within [t, 2t)
  EXPECT_LT(watch.timeout_seconds, 600);
  EXPECT_THAT(client.namespaces(), ElementsAre("team", "team"));
  EXPECT_THAT(sleeps.delays(), IsEmpty());
}

TEST(Informer, CachedObjectsDropManagedFieldsFromListsAndWatches) {
  ScriptedClient client;
  Json listed = Obj("team", "a", "1");
  listed["metadata"]["managedFields"] = Json::array({{{"manager", "kubectl"}}});
  listed["metadata"]["labels"] = {{"keep", "me"}};
  client.AddList(ListOf({listed}, "1"));
  Json watched = Obj("team", "b", "2");
  watched["metadata"]["managedFields"] = Json::array({{{"manager", "psflow"}}});
  client.AddWatch({Added(watched)}, absl::UnavailableError("connection reset"));
  Recorder recorder;
  SleepRecorder sleeps;
  Informer informer(client, Pods(), TestOptions(sleeps), recorder.Handlers());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(kFailsafe));
  ASSERT_TRUE(client.WaitUntilIdle());
  ASSERT_NE(informer.Get("team", "a"), nullptr);
  ASSERT_NE(informer.Get("team", "b"), nullptr);
  EXPECT_FALSE((*informer.Get("team", "a"))["metadata"].contains("managedFields"));
  EXPECT_EQ((*informer.Get("team", "a"))["metadata"]["labels"]["keep"], "me");
  EXPECT_FALSE((*informer.Get("team", "b"))["metadata"].contains("managedFields"));
  informer.Stop();
}

TEST(Informer, WatchEventsUpdateTheCacheBeforeTheirHandlersRun) {
  ScriptedClient client;
  client.AddList(ListOf({Obj("team", "a", "1")}, "1"));
  client.AddWatch({Added(Obj("team", "b", "2")), Modified(Obj("team", "a", "3")),
                   Deleted(Obj("team", "b", "4")), Bookmark("5"),
                   Modified(Obj("team", "c", "6")),  // unknown key: an add
                   Added(Obj("team", "a", "7"))},    // known key: an update
                  absl::UnavailableError("connection reset"));
  Recorder recorder;
  SleepRecorder sleeps;
  Informer* informer_ptr = nullptr;
  Informer::Handlers handlers = recorder.Handlers();
  // Each handler also notes what the cache held for the key when it ran.
  auto cached = [&](const Json& obj) {
    std::shared_ptr<const Json> in_cache = informer_ptr->Get(Namespace(obj), Name(obj));
    return in_cache == nullptr ? std::string("none") : ResourceVersion(*in_cache);
  };
  handlers.on_add = [&, on_add = handlers.on_add](const Json& obj) {
    on_add(obj);
    recorder.Log("  cache " + cached(obj));
  };
  handlers.on_update = [&, on_update = handlers.on_update](const Json& o, const Json& n) {
    on_update(o, n);
    recorder.Log("  cache " + cached(n));
  };
  handlers.on_delete = [&, on_delete = handlers.on_delete](const Json& obj) {
    on_delete(obj);
    recorder.Log("  cache " + cached(obj));
  };
  Informer informer(client, Pods(), TestOptions(sleeps), handlers);
  informer_ptr = &informer;
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());

  EXPECT_THAT(recorder.lines(),
              ElementsAre("add team/a@1", "  cache 1", "add team/b@2", "  cache 2",
                          "update team/a@1->3", "  cache 3", "delete team/b@4", "  cache none",
                          "add team/c@6", "  cache 6", "update team/a@3->7", "  cache 7"));
  EXPECT_THAT(Keys(informer.List("", LabelSelector())), ElementsAre("team/a", "team/c"));
  // The watch failed after its events: the next one resumes after the last of them.
  EXPECT_THAT(WatchVersions(client), ElementsAre("1", "7"));
  const Informer::Stats stats = informer.stats();
  EXPECT_EQ(stats.events, 6);
  EXPECT_EQ(stats.watches, 2);
  EXPECT_EQ(stats.watch_errors, 1);
  EXPECT_EQ(stats.lists, 1);
}

TEST(Informer, AWatchEndedByTheServerResumesFromTheLastVersionWithoutListing) {
  ScriptedClient client;
  client.AddList(ListOf({}, "10"));
  client.AddWatch({Added(Obj("team", "a", "11")), Bookmark("15")}, absl::OkStatus());
  client.AddWatch({}, absl::OkStatus());
  client.AddWatch({Modified(Obj("team", "a", "16"))}, absl::OkStatus());
  Recorder recorder;
  SleepRecorder sleeps;
  Informer informer(client, Pods(), TestOptions(sleeps), recorder.Handlers());
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());

  EXPECT_THAT(WatchVersions(client), ElementsAre("10", "15", "15", "16"));
  EXPECT_EQ(client.list_calls().size(), 1u);
  EXPECT_THAT(recorder.lines(), ElementsAre("add team/a@11", "update team/a@11->16"));
  EXPECT_THAT(sleeps.delays(), IsEmpty());  // a normal end is no failure: no backoff
  EXPECT_EQ(informer.stats().watch_errors, 0);
}

TEST(Informer, GoneRelistsAndDeliversWhatChangedMeanwhileDeletionsIncluded) {
  ScriptedClient client;
  client.AddList(ListOf({Obj("team", "a", "1", {{"app", "x"}}), Obj("team", "b", "1"),
                         Obj("team", "c", "1", {{"app", "x"}})},
                        "5"));
  client.AddWatch({Modified(Obj("team", "a", "6", {{"app", "x"}}))},
                  absl::OutOfRangeError("too old resource version: 6 (9)"));
  // Meanwhile: b changed, c was deleted, d was created; a is as the watch left it.
  client.AddList(ListOf({Obj("team", "a", "6", {{"app", "x"}}), Obj("team", "b", "7"),
                         Obj("team", "d", "8", {{"app", "x"}})},
                        "9"));
  Recorder recorder;
  SleepRecorder sleeps;
  Informer informer(client, Pods(), TestOptions(sleeps), recorder.Handlers());
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());

  EXPECT_THAT(recorder.lines(),
              ElementsAre("add team/a@1", "add team/b@1", "add team/c@1", "update team/a@1->6",
                          "update team/b@1->7", "add team/d@8", "delete team/c@1"));
  EXPECT_EQ(informer.Get("team", "c"), nullptr);
  EXPECT_THAT(Keys(informer.List("team", LabelSelector())),
              ElementsAre("team/a", "team/b", "team/d"));
  EXPECT_THAT(Keys(informer.ListByLabel("team", "app", "x")), ElementsAre("team/a", "team/d"));
  EXPECT_THAT(WatchVersions(client), ElementsAre("5", "9"));
  const Informer::Stats stats = informer.stats();
  EXPECT_EQ(stats.lists, 2);
  EXPECT_EQ(stats.relists_after_gone, 1);
  EXPECT_EQ(stats.watch_errors, 0);
  EXPECT_THAT(sleeps.delays(), IsEmpty());  // the relist is immediate
}

void ExpectDelayWithin(milliseconds delay, int64_t max_ms) {
  EXPECT_GE(delay.count(), max_ms / 2) << "for a delay of at most " << max_ms << " ms";
  EXPECT_LE(delay.count(), max_ms);
}

TEST(Informer, WatchErrorsBackOffAndResumeFromTheLastVersionUntilOneSucceeds) {
  ScriptedClient client;
  client.AddList(ListOf({}, "10"));
  client.AddWatch({}, absl::UnavailableError("connection refused"));
  client.AddWatch({}, absl::DataLossError("unparsable event"));
  client.AddWatch({}, absl::UnavailableError("connection refused"));
  client.AddWatch({}, absl::UnavailableError("connection refused"));
  client.AddWatch({Added(Obj("team", "a", "12"))}, absl::UnavailableError("reset"));
  client.AddWatch({}, absl::OutOfRangeError("gone"));  // relist after errors
  client.AddList(ListOf({Obj("team", "a", "12")}, "20"));
  Recorder recorder;
  SleepRecorder sleeps;
  Informer::Options options = TestOptions(sleeps);
  options.backoff_initial = milliseconds(100);
  options.backoff_max = milliseconds(400);
  Informer informer(client, Pods(), options, recorder.Handlers());
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());

  EXPECT_THAT(WatchVersions(client), ElementsAre("10", "10", "10", "10", "10", "12", "20"));
  const std::vector<milliseconds> delays = sleeps.delays();
  ASSERT_EQ(delays.size(), 5u);
  ExpectDelayWithin(delays[0], 100);
  ExpectDelayWithin(delays[1], 200);
  ExpectDelayWithin(delays[2], 400);
  ExpectDelayWithin(delays[3], 400);  // capped
  ExpectDelayWithin(delays[4], 100);  // the watch that delivered an event reset the backoff
  const Informer::Stats stats = informer.stats();
  EXPECT_EQ(stats.watch_errors, 5);
  EXPECT_EQ(stats.relists_after_gone, 1);
  EXPECT_EQ(stats.lists, 2);
  EXPECT_THAT(recorder.lines(), ElementsAre("add team/a@12"));  // the relist changed nothing
}

TEST(Informer, ListErrorsBackOffAndRetryUntilAListSucceeds) {
  ScriptedClient client;
  client.AddList(absl::UnavailableError("apiserver down"));
  client.AddList(absl::PermissionDeniedError("pods is forbidden"));
  client.AddList(ListOf({Obj("team", "a", "1")}, "2"));
  Recorder recorder;
  SleepRecorder sleeps;
  Informer::Options options = TestOptions(sleeps);
  options.backoff_initial = milliseconds(100);
  Informer informer(client, Pods(), options, recorder.Handlers());
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());

  EXPECT_TRUE(informer.HasSynced());
  const std::vector<milliseconds> delays = sleeps.delays();
  ASSERT_EQ(delays.size(), 2u);
  ExpectDelayWithin(delays[0], 100);
  ExpectDelayWithin(delays[1], 200);
  const Informer::Stats stats = informer.stats();
  EXPECT_EQ(stats.lists, 3);
  EXPECT_EQ(stats.list_errors, 2);
  EXPECT_THAT(recorder.lines(), ElementsAre("add team/a@1"));
  EXPECT_THAT(WatchVersions(client), ElementsAre("2"));
}

TEST(Informer, GoneRightAfterAListBacksOffBeforeListingAgain) {
  ScriptedClient client;
  client.AddList(ListOf({}, "1"));
  client.AddWatch({}, absl::OutOfRangeError("gone"));
  client.AddList(ListOf({}, "2"));
  SleepRecorder sleeps;
  Informer::Options options = TestOptions(sleeps);
  options.backoff_initial = milliseconds(100);
  Informer informer(client, Pods(), options, {});
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());

  ASSERT_EQ(sleeps.delays().size(), 1u);
  ExpectDelayWithin(sleeps.delays()[0], 100);
  EXPECT_THAT(WatchVersions(client), ElementsAre("1", "2"));
}

TEST(Informer, MalformedObjectsAreSkippedAndNeverCrash) {
  ScriptedClient client;
  client.AddList(
      ListOf({Json::object(), Json("not an object"), Json{{"metadata", 7}},
              Json{{"metadata", {{"namespace", "team"}}}},
              Obj("team", "bad-labels", "1", Json::array({"app"})),
              Obj("team", "odd-label", "1", {{"app", 5}, {"tier", "web"}}), Obj("team", "a", "1")},
             "3"));
  client.AddWatch({Added(Json{{"metadata", {{"resourceVersion", "4"}}}}),
                   Modified(Json(42)),
                   Deleted(Json::array()),
                   {WatchEventType::kBookmark, 7},
                   Added(Obj("team", "b", "5"))},
                  absl::OkStatus());
  Recorder recorder;
  SleepRecorder sleeps;
  Informer informer(client, Pods(), TestOptions(sleeps), recorder.Handlers());
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());

  EXPECT_THAT(recorder.lines(), ElementsAre("add team/a@1", "add team/bad-labels@1",
                                            "add team/odd-label@1", "add team/b@5"));
  EXPECT_THAT(Keys(informer.ListByLabel("", "tier", "web")), ElementsAre("team/odd-label"));
  EXPECT_THAT(Keys(informer.ListByLabel("", "app", "5")), IsEmpty());
  EXPECT_THAT(WatchVersions(client), ElementsAre("3", "5"));
  EXPECT_EQ(informer.stats().events, 5);
}

TEST(Informer, StopWhileWatchingCancelsTheWatchAndReturns) {
  ScriptedClient client;
  client.AddList(ListOf({Obj("team", "a", "1")}, "1"));
  SleepRecorder sleeps;
  Informer informer(client, Pods(), TestOptions(sleeps), {});
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());
  informer.Stop();

  EXPECT_EQ(client.cancelled_watches(), 1);
  const Informer::Stats stats = informer.stats();
  EXPECT_EQ(stats.watches, 1);
  EXPECT_EQ(stats.watch_errors, 0);
  EXPECT_NE(informer.Get("team", "a"), nullptr);  // the cache outlives the thread
  informer.Stop();                                // idempotent
  informer.Start();                               // not restarted after Stop
  EXPECT_EQ(informer.stats().watches, 1);
}

TEST(Informer, StopCutsABackoffWaitShort) {
  ScriptedClient client;
  client.AddList(ListOf({}, "1"));
  client.AddWatch({}, absl::UnavailableError("connection refused"));
  Informer::Options options;
  options.backoff_initial = std::chrono::hours(1);  // real waits: only Stop can end this one
  options.backoff_max = std::chrono::hours(1);
  Informer informer(client, Pods(), options, {});
  informer.Start();
  const auto give_up = std::chrono::steady_clock::now() + kFailsafe;
  while (informer.stats().watch_errors == 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(1));
  }
  ASSERT_EQ(informer.stats().watch_errors, 1);
  informer.Stop();
  EXPECT_EQ(informer.stats().watches, 1);
  EXPECT_THAT(client.namespaces(), ElementsAre("", ""));  // "" = all namespaces
}

TEST(Informer, TheLabelIndexFollowsEveryChangeAndRespectsNamespaces) {
  ScriptedClient client;
  client.AddList(ListOf({Obj("ns", "a", "1", {{"job", "j1"}, {"role", "ps"}}),
                         Obj("ns", "b", "1", {{"job", "j1"}, {"role", "worker"}}),
                         Obj("ns1", "c", "1", {{"job", "j1"}, {"role", "ps"}}),
                         Obj("other", "d", "1", {{"job", "j2"}})},
                        "1"));
  client.AddWatch({Modified(Obj("ns", "a", "2", {{"job", "j2"}, {"role", "ps"}})),
                   Deleted(Obj("ns", "b", "3", {{"job", "j1"}, {"role", "worker"}})),
                   Added(Obj("ns", "e", "4", {{"job", "j1"}}))},
                  absl::OkStatus());
  SleepRecorder sleeps;
  Informer::Options options;
  options.sleep = sleeps.Sleep();
  Informer informer(client, Pods(), options, {});
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());

  EXPECT_THAT(Keys(informer.ListByLabel("ns", "job", "j1")), ElementsAre("ns/e"));
  EXPECT_THAT(Keys(informer.ListByLabel("", "job", "j1")), ElementsAre("ns/e", "ns1/c"));
  EXPECT_THAT(Keys(informer.ListByLabel("", "job", "j2")), ElementsAre("ns/a", "other/d"));
  EXPECT_THAT(Keys(informer.ListByLabel("ns", "role", "ps")), ElementsAre("ns/a"));
  EXPECT_THAT(Keys(informer.ListByLabel("", "role", "worker")), IsEmpty());
  EXPECT_THAT(Keys(informer.ListByLabel("nowhere", "job", "j2")), IsEmpty());
  EXPECT_EQ(ResourceVersion(*informer.ListByLabel("ns", "job", "j2")[0]), "2");

  absl::StatusOr<LabelSelector> selector = LabelSelector::Parse("job,role!=ps");
  ASSERT_TRUE(selector.ok());
  EXPECT_THAT(Keys(informer.List("", *selector)), ElementsAre("ns/e", "other/d"));
  EXPECT_THAT(Keys(informer.List("ns", *selector)), ElementsAre("ns/e"));
}

// Readers on other threads while events stream in: every answer is consistent with the index
// (each object ListByLabel returns carries the label asked for).
TEST(Informer, ReadersOnOtherThreadsSeeAConsistentCacheWhileEventsArrive) {
  ScriptedClient client;
  client.AddList(ListOf({}, "1"));
  std::vector<WatchEvent> events;
  for (int i = 0; i < 400; ++i) {
    const std::string name = "p" + std::to_string(i % 20);
    const std::string rv = std::to_string(i + 2);
    const std::string phase = i % 2 == 0 ? "even" : "odd";
    if (i % 7 == 6) {
      events.push_back(Deleted(Obj("team", name, rv, {{"phase", phase}})));
    } else {
      events.push_back(Modified(Obj("team", name, rv, {{"phase", phase}})));
    }
  }
  client.AddWatch(events, absl::OkStatus());
  SleepRecorder sleeps;
  Informer informer(client, Pods(), TestOptions(sleeps), {});
  std::atomic<bool> done{false};
  std::atomic<int> inconsistent{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      while (!done) {
        for (const std::string phase : {"even", "odd"}) {
          for (const auto& obj : informer.ListByLabel("team", "phase", phase)) {
            if (Label(*obj, "phase") != phase) ++inconsistent;
          }
        }
        for (const auto& obj : informer.List("", LabelSelector())) {
          // Possibly deleted since the List; otherwise the same key.
          std::shared_ptr<const Json> now = informer.Get("team", Name(*obj));
          if (now != nullptr && Key(*now) != Key(*obj)) ++inconsistent;
        }
      }
    });
  }
  // Also when an assertion below returns early: the readers stop before what they read goes.
  absl::Cleanup stop_readers = [&] {
    done = true;
    for (std::thread& t : readers) t.join();
  };
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());
  std::move(stop_readers).Invoke();

  EXPECT_EQ(inconsistent.load(), 0);
  EXPECT_EQ(informer.stats().events, 400);
  // The last event for each name decides: p0..p19's last events are i = 380..399.
  std::vector<std::string> expected;
  for (int i = 380; i < 400; ++i) {
    if (i % 7 != 6) expected.push_back("team/p" + std::to_string(i % 20));
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(Keys(informer.List("team", LabelSelector())), expected);
}

TEST(Informer, ANonPositiveWatchTimeoutLeavesItToTheServer) {
  ScriptedClient client;
  client.AddList(ListOf({}, "1"));
  SleepRecorder sleeps;
  Informer::Options options = TestOptions(sleeps);
  options.watch_timeout_seconds = 0;
  Informer informer(client, Pods(), options, {});
  informer.Start();
  ASSERT_TRUE(client.WaitUntilIdle());
  ASSERT_EQ(client.watch_calls().size(), 1u);
  EXPECT_EQ(client.watch_calls()[0].timeout_seconds, 0);
}

}  // namespace
}  // namespace psflow::kube
