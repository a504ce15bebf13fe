#include "core/metrics.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "core/http_get.h"
#include "core/socket.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"

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

// Prometheus's User-Agent (the header's value; psflow's own scrapes send kPsflowUserAgent).
constexpr char kPrometheus[] = "Prometheus/2.42.0";

// A gauge of a figure that does not exist yet is absent, not 0; once set, it is served.
TEST(LateGauge, AppearsAtItsFirstSet) {
  auto m = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(m.ok()) << m.status();
  LateGauge accuracy((*m)->registry(), "psflow_test_accuracy_ratio", "Accuracy.",
                     StandardLabels("chief", 0));
  const std::string series =
      R"(psflow_test_accuracy_ratio{job="local",replica_index="0",replica_type="chief"})";
  auto before = HttpGet("127.0.0.1", (*m)->port(), "/metrics", milliseconds(2000));
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_FALSE(absl::StrContains(*before, series)) << *before;
  accuracy.Set(0.75);
  accuracy.Set(0.8125);
  auto after = HttpGet("127.0.0.1", (*m)->port(), "/metrics", milliseconds(2000));
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE(absl::StrContains(*after, series + " 0.8125")) << *after;
}

// Scrapes by a monitoring system are counted and can be waited for; psflow's own (HttpGet:
// `psflow run`'s progress line, the operator's throughput probe) are not.
TEST(MetricsEndpoint, CountsAndAwaitsMonitoringScrapesOnly) {
  auto m = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(m.ok()) << m.status();
  MetricsEndpoint& endpoint = **m;
  ASSERT_TRUE(HttpGet("127.0.0.1", endpoint.port(), "/metrics", milliseconds(2000)).ok());
  EXPECT_EQ(endpoint.MonitoringScrapes(), 0);
  EXPECT_FALSE(endpoint.AwaitMonitoringScrape(0, milliseconds(50)));
  EXPECT_TRUE(
      HttpGet("127.0.0.1", endpoint.port(), "/metrics", milliseconds(2000), kPrometheus).ok());
  EXPECT_EQ(endpoint.MonitoringScrapes(), 1);
  EXPECT_TRUE(endpoint.AwaitMonitoringScrape(0, milliseconds(0)));  // sent already
  EXPECT_FALSE(endpoint.AwaitMonitoringScrape(1, milliseconds(50)));
  // A scrape after the wait begins ends it.
  std::thread scraper([&] {
    (void)HttpGet("127.0.0.1", endpoint.port(), "/metrics", milliseconds(2000), kPrometheus);
  });
  EXPECT_TRUE(endpoint.AwaitMonitoringScrape(1, milliseconds(10000)));
  scraper.join();
  EXPECT_EQ(endpoint.MonitoringScrapes(), 2);
}

// Clients that stall mid-request, or many idle ones, do not keep others from an answer: /healthz
// answers at once beside them, and a stalled request is closed after its 2 s.
TEST(MetricsEndpoint, StalledClientsDoNotHoldOthersUp) {
  auto m = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(m.ok()) << m.status();
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(10); };
  std::vector<Socket> stalled;
  for (int i = 0; i < 100; ++i) {
    absl::StatusOr<Socket> s = ConnectTcp("127.0.0.1", (*m)->port(), soon());
    ASSERT_TRUE(s.ok()) << s.status();
    if (i % 2 == 0) {  // half send part of a request, half nothing
      std::string part = "GET /metr";
      iovec piece{part.data(), part.size()};
      ASSERT_TRUE(WriteAll(*s, std::span<iovec>(&piece, 1), soon(), "part").ok());
    }
    stalled.push_back(*std::move(s));
  }
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(HttpGet("127.0.0.1", (*m)->port(), "/healthz", milliseconds(1000)).value_or("none"),
              "ok\n");
  }
  // The newest stalled connection is closed, unanswered, once its time is up.
  char byte;
  const absl::StatusOr<bool> more = ReadAllOrEnd(stalled.back(), &byte, 1, soon(), "end");
  EXPECT_TRUE(more.ok() && !*more) << more.status();
}

// A client that sends its whole request for an answer larger than the sockets hold, then does
// not read, holds up nobody: the answer is written as the client takes it, beside the others.
TEST(MetricsEndpoint, AClientThatDoesNotReadItsAnswerHoldsUpNobody) {
  auto m = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(m.ok()) << m.status();
  auto& family = prometheus::BuildGauge()
                     .Name("psflow_test_many")
                     .Help("Many series: an answer of about 15 MB.")
                     .Register((*m)->registry());
  const std::string padding(96, 'x');
  for (int i = 0; i < 100000; ++i) {
    family.Add({{"series", std::to_string(i)}, {"padding", padding}}).Set(i);
  }
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(10); };
  absl::StatusOr<Socket> reader = ConnectTcp("127.0.0.1", (*m)->port(), soon());
  ASSERT_TRUE(reader.ok()) << reader.status();
  const int small = 4096;  // its window stays small: the server's buffers fill
  setsockopt(reader->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n";
  iovec piece{request.data(), request.size()};
  ASSERT_TRUE(WriteAll(*reader, std::span<iovec>(&piece, 1), soon(), "request").ok());
  pollfd answer_begun{reader->fd(), POLLIN, 0};  // its answer collected and being written
  ASSERT_EQ(poll(&answer_begun, 1, 60000), 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(HttpGet("127.0.0.1", (*m)->port(), "/healthz", milliseconds(1000)).value_or("none"),
              "ok\n");
  }
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
