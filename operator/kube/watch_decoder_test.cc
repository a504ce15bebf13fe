#include "operator/kube/watch_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace psflow::kube {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Drain(WatchLineBuffer& buffer) {
  std::vector<std::string> lines;
  while (std::optional<std::string> line = buffer.NextLine()) lines.push_back(*line);
  return lines;
}

TEST(WatchLineBuffer, ReassemblesLinesSplitAnywhere) {
  const std::string text = "{\"a\":1}\n{\"b\":2}\r\n\n{\"c\":3}\n{\"partial";
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    WatchLineBuffer buffer;
    std::vector<std::string> lines;
    for (size_t i = 0; i < text.size(); i += piece) {
      ASSERT_TRUE(buffer.Append(absl::string_view(text).substr(i, piece)).ok());
      for (std::string& line : Drain(buffer)) lines.push_back(std::move(line));
    }
    EXPECT_EQ(lines, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "", "{\"c\":3}"}))
        << "pieces of " << piece;
    EXPECT_EQ(buffer.Remainder(), "{\"partial");
  }
}

TEST(WatchLineBuffer, EndlessLineIsDataLoss) {
  WatchLineBuffer buffer;
  const std::string megabyte(1 << 20, 'x');
  absl::Status status;
  for (size_t i = 0; i <= WatchLineBuffer::kMaxLineBytes / megabyte.size() && status.ok(); ++i) {
    status = buffer.Append(megabyte);
  }
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
}

TEST(ParseWatchEvent, EveryEventType) {
  const std::pair<const char*, WatchEventType> types[] = {
      {"ADDED", WatchEventType::kAdded},
      {"MODIFIED", WatchEventType::kModified},
      {"DELETED", WatchEventType::kDeleted},
      {"BOOKMARK", WatchEventType::kBookmark},
  };
  for (const auto& [name, type] : types) {
    const Json line = {{"type", name},
                       {"object", {{"kind", "Pod"}, {"metadata", {{"name", "p"}}}}}};
    absl::StatusOr<WatchEvent> event = ParseWatchEvent(line.dump(), "watch pods");
    ASSERT_TRUE(event.ok()) << event.status();
    EXPECT_EQ(event->type, type);
    EXPECT_EQ(event->object, line["object"]);
  }
}

TEST(ParseWatchEvent, ErrorEventIsItsStatus) {
  const Json line = {{"type", "ERROR"},
                     {"object",
                      {{"kind", "Status"},
                       {"status", "Failure"},
                       {"reason", "Expired"},
                       {"message", "too old resource version: 5 (90)"},
                       {"code", 410}}}};
  const absl::StatusOr<WatchEvent> event = ParseWatchEvent(line.dump(), "watch pods");
  EXPECT_EQ(event.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(event.status().message(), HasSubstr("too old resource version"));
  EXPECT_THAT(event.status().message(), HasSubstr("watch pods"));
}

TEST(ParseWatchEvent, GarbageIsDataLossNeverACrash) {
  const char* lines[] = {
      "not json",
      "{\"type\":\"ADDED\",\"object\":{",
      "[1,2,3]",
      "\"ADDED\"",
      "{\"object\":{}}",
      "{\"type\":7,\"object\":{}}",
      "{\"type\":\"ADDED\"}",
      "{\"type\":\"ADDED\",\"object\":\"pod\"}",
      "{\"type\":\"RENAMED\",\"object\":{}}",
      "\xff\xfe\x00garbage",
  };
  for (const char* line : lines) {
    const absl::StatusOr<WatchEvent> event = ParseWatchEvent(line, "watch pods");
    EXPECT_EQ(event.status().code(), absl::StatusCode::kDataLoss) << line;
  }
  EXPECT_THAT(ParseWatchEvent("{\"type\":\"RENAMED\",\"object\":{}}", "w").status().message(),
              HasSubstr("unknown event type \"RENAMED\""));
}

}  // namespace
}  // namespace psflow::kube
