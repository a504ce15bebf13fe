#include "core/metrics.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/strings/match.h"
#include "core/http_get.h"
#include "prometheus/counter.h"

namespace psflow {
namespace {

using std::chrono::milliseconds;

TEST(MetricsEndpoint, ServesRegistryAndHealth) {
  auto m = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_GT((*m)->port(), 0);
  auto& c = prometheus::BuildCounter()
                .Name("psflow_test_things_total")
                .Help("Things.")
                .Register((*m)->registry())
                .Add(StandardLabels("worker", 3));
  c.Increment(5);
  auto text = HttpGet("127.0.0.1", (*m)->port(), "/metrics", milliseconds(2000));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_TRUE(absl::StrContains(
      *text, R"(psflow_test_things_total{job="local",replica_index="3",replica_type="worker"} 5)"))
      << *text;
  EXPECT_EQ(HttpGet("127.0.0.1", (*m)->port(), "/healthz", milliseconds(2000)).value(), "ok\n");
  auto missing = HttpGet("127.0.0.1", (*m)->port(), "/nope", milliseconds(2000));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "404")) << missing.status();
}

TEST(MetricsEndpoint, ReadyzFollowsTheReadinessCheck) {
  auto m = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(HttpGet("127.0.0.1", (*m)->port(), "/readyz", milliseconds(2000)).value(), "ok\n");
  std::atomic<bool> ready{false};
  (*m)->SetReadinessCheck([&ready] {
    return ready.load() ? absl::OkStatus() : absl::UnavailableError("caches not synced");
  });
  auto not_ready = HttpGet("127.0.0.1", (*m)->port(), "/readyz", milliseconds(2000));
  EXPECT_TRUE(absl::StrContains(not_ready.status().message(), "503")) << not_ready.status();
  ready = true;
  EXPECT_EQ(HttpGet("127.0.0.1", (*m)->port(), "/readyz", milliseconds(2000)).value(), "ok\n");
  (*m)->SetReadinessCheck(nullptr);
}

TEST(MetricsEndpoint, PortInUseIsUnavailable) {
  auto first = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(first.ok());
  auto second = MetricsEndpoint::Start("127.0.0.1", (*first)->port());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(MetricsEndpoint::Start("not-an-ip", 0).ok());
}

}  // namespace
}  // namespace psflow
