#include "core/cluster_spec.h"

#include <gtest/gtest.h>

namespace psflow {
namespace {

constexpr char kTfConfig[] =
    R"({"cluster":{"ps":["127.0.0.1:2222"],"worker":["127.0.0.1:2223","127.0.0.1:2224"]},)"
    R"("task":{"type":"worker","index":1},"environment":"cloud"})";

TEST(ClusterSpec, ParsesTensorFlowFormat) {
  auto spec = ParseTfConfig(kTfConfig);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->Tasks("ps"), std::vector<std::string>{"127.0.0.1:2222"});
  EXPECT_EQ(spec->Tasks("worker").size(), 2u);
  EXPECT_EQ(spec->task, (TaskId{"worker", 1}));
  EXPECT_EQ(spec->SelfAddress(), "127.0.0.1:2224");
  EXPECT_FALSE(spec->IsChief());
  EXPECT_TRUE(spec->Tasks("chief").empty());
}

TEST(ClusterSpec, RoundTrips) {
  auto spec = ParseTfConfig(kTfConfig);
  ASSERT_TRUE(spec.ok());
  auto again = ParseTfConfig(ToTfConfig(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *spec);
}

TEST(ClusterSpec, ChiefIsWorkerZeroUnlessAChiefExists) {
  auto w0 = ClusterSpecFromFlags("worker", 0, "h:1", "h:2,h:3");
  ASSERT_TRUE(w0.ok());
  EXPECT_TRUE(w0->IsChief());
  auto with_chief = ParseTfConfig(
      R"({"cluster":{"chief":["h:1"],"worker":["h:2"]},"task":{"type":"worker","index":0}})");
  ASSERT_TRUE(with_chief.ok());
  EXPECT_FALSE(with_chief->IsChief());
}

TEST(ClusterSpec, RejectsBadInputWithOneLineReason) {
  struct Case {
    const char* json;
    const char* reason;
  };
  const Case cases[] = {
      {"{not json", "not valid JSON"},
      {"[1,2]", "must be a JSON object"},
      {R"({"task":{"type":"ps","index":0}})", "no \"cluster\""},
      {R"({"cluster":{"ps":["h:1"]}})", "no \"task\""},
      {R"({"cluster":{"ps":["h:1"]},"task":{"type":"ps","index":1}})", "out of range"},
      {R"({"cluster":{"ps":["h:1"]},"task":{"type":"ps","index":-1}})", "out of range"},
      {R"({"cluster":{"ps":["h:1"]},"task":{"type":"worker","index":0}})", "not in the cluster"},
      {R"({"cluster":{"ps":["nohostport"]},"task":{"type":"ps","index":0}})", "not host:port"},
      {R"({"cluster":{"ps":["h:99999"]},"task":{"type":"ps","index":0}})", "not host:port"},
      {R"({"cluster":{"ps":"h:1"},"task":{"type":"ps","index":0}})", "list of"},
      {R"({"cluster":{"ps":["h:1"]},"task":{"type":"ps","index":"0"}})", "integer"},
  };
  for (const Case& c : cases) {
    auto spec = ParseTfConfig(c.json);
    ASSERT_FALSE(spec.ok()) << c.json;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_NE(spec.status().message().find(c.reason), std::string::npos)
        << c.json << " -> " << spec.status();
    EXPECT_EQ(spec.status().message().find('\n'), std::string::npos);
  }
}

TEST(ClusterSpec, FromFlagsSplitsHostLists) {
  auto spec = ClusterSpecFromFlags("ps", 0, "a:1, b:2", "c:3");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->Tasks("ps"), (std::vector<std::string>{"a:1", "b:2"}));
  EXPECT_EQ(spec->SelfAddress(), "a:1");
  EXPECT_FALSE(ClusterSpecFromFlags("worker", 1, "a:1", "c:3").ok());
}

}  // namespace
}  // namespace psflow
