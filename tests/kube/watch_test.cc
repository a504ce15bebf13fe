// Watches of the ObjectStore: initial state, history, selectors, bookmarks, ends.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/kube/object_store.h"
#include "tests/kube/store_test_util.h"
#include "tests/kube/verbs.h"
#include "tests/kube/watcher.h"

namespace psflow::kubetest {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

using kube::Pods;

class WatchTest : public StoreTest {};

TEST_F(WatchTest, WatchFromZeroStartsWithTheCurrentObjects) {
  MustCreate(Pods(), PodObject("b"));                // rv 1
  MustCreate(Pods(), PodObject("a"));                // rv 2
  MustCreate(kube::TrainingJobs(), JobObject("j"));  // rv 3
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

TEST_F(WatchTest, WatchFromAVersionReplaysTheHistory) {
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

TEST_F(WatchTest, WatchFromAFutureVersionWaitsForIt) {
  auto watcher = MustWatch(Pods(), "", From("2"));
  MustCreate(Pods(), PodObject("a"));  // rv 1
  MustCreate(Pods(), PodObject("b"));  // rv 2
  MustCreate(Pods(), PodObject("c"));  // rv 3
  EXPECT_THAT(NextEvents(*watcher, 1), ElementsAre("ADDED default/c 3"));
}

TEST_F(WatchTest, WatchRejectsBadArguments) {
  EXPECT_EQ(store_.Watch(Pods(), "", From("abc")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_.Watch(Pods(), "", From("-1")).status().code(),
            absl::StatusCode::kInvalidArgument);
  kube::ListOptions options = From("0");
  options.label_selector = "a notin (b)";
  EXPECT_EQ(store_.Watch(Pods(), "", options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(WatchTest, SelectorWatchSeesObjectsStartAndStopMatching) {
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

TEST_F(WatchTest, HistoryKeepsAWindowOfChanges) {
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

TEST_F(WatchTest, CompactEndsOpenWatchesAndOldVersionsAreGone) {
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

TEST_F(WatchTest, CloseWatchesEndsThemWithAFinalBookmark) {
  kube::ListOptions options = From("0");
  options.allow_bookmarks = true;
  auto with_bookmarks = MustWatch(Pods(), "", options);
  auto without = MustWatch(Pods(), "", From("0"));
  MustCreate(Pods(), PodObject("a"));                // rv 1
  MustCreate(kube::TrainingJobs(), JobObject("j"));  // rv 2: moves the bookmark too
  EXPECT_EQ(store_.OpenWatchCount(), 2u);
  store_.CloseWatches();
  EXPECT_THAT(NextEvents(*with_bookmarks, 3), ElementsAre("ADDED default/a 1", "BOOKMARK 2"));
  EXPECT_TRUE(with_bookmarks->closed());
  EXPECT_TRUE(with_bookmarks->status().ok());
  EXPECT_THAT(NextEvents(*without, 2), ElementsAre("ADDED default/a 1"));
  EXPECT_TRUE(without->closed());
  EXPECT_EQ(store_.OpenWatchCount(), 0u);
}

TEST_F(WatchTest, BookmarksComeEveryIntervalWithTheLatestVersion) {
  ObjectStore::Options options = TestStoreOptions();
  options.bookmark_interval = std::chrono::milliseconds(50);
  ObjectStore store(options);
  RegisterTestResources(store);
  kube::ListOptions watch = From("0");
  watch.allow_bookmarks = true;
  auto watcher = std::move(*store.Watch(Pods(), "", watch));
  ASSERT_TRUE(store.Create(kube::TrainingJobs(), "default", JobObject("j"))
                  .ok());  // rv 1, another resource
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

TEST_F(WatchTest, WatchEndsAfterItsTimeout) {
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

TEST_F(WatchTest, DefaultWatchTimeoutApplies) {
  ObjectStore::Options options = TestStoreOptions();
  options.default_watch_timeout = std::chrono::seconds(1);
  ObjectStore store(options);
  RegisterTestResources(store);
  auto watcher = std::move(*store.Watch(Pods(), "", From("0")));
  EXPECT_FALSE(watcher->Next(std::chrono::seconds(30)).has_value());
  EXPECT_TRUE(watcher->closed());
}

TEST_F(WatchTest, SlowWatcherIsCutOff) {
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

TEST_F(WatchTest, WatcherMayOutliveTheStore) {
  auto store = std::make_unique<ObjectStore>(TestStoreOptions());
  RegisterTestResources(*store);
  auto watcher = std::move(*store->Watch(Pods(), "", From("0")));
  store.reset();
  EXPECT_FALSE(watcher->Next(std::chrono::seconds(5)).has_value());
  EXPECT_TRUE(watcher->closed());
}

TEST_F(WatchTest, DestroyedWatcherIsForgotten) {
  auto watcher = MustWatch(Pods(), "", From("0"));
  EXPECT_EQ(store_.OpenWatchCount(), 1u);
  watcher.reset();
  EXPECT_EQ(store_.OpenWatchCount(), 0u);
}

TEST_F(WatchTest, ConcurrentWritersAndWatchers) {
  constexpr int kWriters = 4;
  constexpr int kObjectsPerWriter = 50;
  auto watcher = MustWatch(Pods(), "", From("0"));
  std::vector<std::jthread> writers;  // joined also when an assertion returns early
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
  for (std::jthread& t : writers) t.join();
  EXPECT_EQ(last, kWriters * kObjectsPerWriter * 3);
  EXPECT_EQ(store_.WriteCount(), last);
  EXPECT_EQ(store_.OperationCount(verb::kCreate), kWriters * kObjectsPerWriter);
}

}  // namespace
}  // namespace psflow::kubetest
