#include "core/metrics.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/http_get.h"
#include "prometheus/text_serializer.h"

namespace psflow {
namespace {

constexpr auto kRequestTime = std::chrono::seconds(2);  // from accept to the request's end,
                                                        // and again to take the answer
constexpr size_t kMaxRequest = 16384;
constexpr size_t kMaxConnections = 64;  // being read from or answered at once

// Sends what the non-blocking socket takes of `data` after its first `*sent` bytes, advancing
// `*sent`; false when the scraper went away.
bool SendSome(int fd, const std::string& data, size_t* sent) {
  while (*sent < data.size()) {
    const ssize_t n = send(fd, data.data() + *sent, data.size() - *sent, MSG_NOSIGNAL);
    if (n > 0) {
      *sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);  // full for now: later
  }
  return true;
}

// True when the request's User-Agent header (its name in any letter case) is psflow's own.
bool FromPsflow(absl::string_view request) {
  for (absl::string_view line : absl::StrSplit(request, "\r\n")) {
    const size_t colon = line.find(':');
    if (colon == absl::string_view::npos ||
        !absl::EqualsIgnoreCase(line.substr(0, colon), "user-agent")) {
      continue;
    }
    return absl::StripAsciiWhitespace(line.substr(colon + 1)) == kPsflowUserAgent;
  }
  return false;
}

std::string Response(const char* status, const char* content_type, const std::string& body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
}

}  // namespace

Labels StandardLabels(const std::string& replica_type, int replica_index) {
  const char* job = std::getenv("PSFLOW_JOB_NAME");
  return {{"job", job && *job ? job : "local"},
          {"replica_type", replica_type},
          {"replica_index", std::to_string(replica_index)}};
}

prometheus::Counter& AddCounter(prometheus::Registry& registry, const std::string& name,
                                const std::string& help, const Labels& labels) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry).Add(labels);
}

prometheus::Gauge& AddGauge(prometheus::Registry& registry, const std::string& name,
                            const std::string& help, const Labels& labels) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry).Add(labels);
}

LateGauge::LateGauge(prometheus::Registry& registry, const std::string& name,
                     const std::string& help, Labels labels)
    : family_(prometheus::BuildGauge().Name(name).Help(help).Register(registry)),
      labels_(std::move(labels)) {}

void LateGauge::Set(double value) {
  prometheus::Gauge* gauge = gauge_.load(std::memory_order_acquire);
  if (gauge == nullptr) {
    gauge = &family_.Add(labels_);  // the same series for every caller: Add finds it
    gauge_.store(gauge, std::memory_order_release);
  }
  gauge->Set(value);
}

void LateGauge::Clear() {
  if (prometheus::Gauge* gauge = gauge_.exchange(nullptr, std::memory_order_acq_rel)) {
    family_.Remove(gauge);
  }
}

absl::StatusOr<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::Start(
    const std::string& bind_address, int port) {
  const std::string where = absl::StrCat(bind_address, ":", port);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, bind_address.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics endpoint: ", bind_address, " is not an IPv4 address"));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const int err = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("metrics endpoint cannot listen on ", where, ": ", std::strerror(err)));
  }
  std::unique_ptr<MetricsEndpoint> m(new MetricsEndpoint(fd, ntohs(addr.sin_port)));
  if (pipe2(m->wake_pipe_, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  m->thread_ = std::thread([p = m.get()] { p->Serve(); });
  return m;
}

MetricsEndpoint::MetricsEndpoint(int listen_fd, int port) : listen_fd_(listen_fd), port_(port) {}

MetricsEndpoint::~MetricsEndpoint() {
  if (thread_.joinable()) {
    const char b = 0;
    [[maybe_unused]] ssize_t n = write(wake_pipe_[1], &b, 1);
    thread_.join();
  }
  for (int fd : {listen_fd_, wake_pipe_[0], wake_pipe_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void MetricsEndpoint::Serve() {
  using Clock = std::chrono::steady_clock;
  // A connection reads its request, then (reply set) writes the answer, each by its deadline.
  struct Connection {
    int fd;
    std::string request;
    Clock::time_point deadline;
    std::optional<Reply> reply;
    size_t sent = 0;
  };
  std::vector<Connection> open;  // oldest first
  const auto drop = [&](size_t i) {
    close(open[i].fd);
    open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
  };
  // Sends more of c's answer; true when c is done with (all sent, or the scraper gone).
  const auto write = [&](Connection& c) {
    if (!SendSome(c.fd, c.reply->data, &c.sent)) return true;
    if (c.sent < c.reply->data.size()) return false;
    if (c.reply->scrape > 0) {  // one the scraper did not take all of was not seen
      {
        std::lock_guard<std::mutex> lock(scrapes_mu_);
        scrapes_sent_ = std::max(scrapes_sent_, c.reply->scrape);
      }
      scrape_sent_.notify_all();
    }
    return true;
  };
  for (;;) {
    std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int timeout_ms = -1;
    for (const Connection& c : open) {
      fds.push_back({c.fd, static_cast<short>(c.reply ? POLLOUT : POLLIN), 0});
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline - Clock::now());
      const int ms = static_cast<int>(std::max<int64_t>(left.count(), 0)) + 1;
      timeout_ms = timeout_ms < 0 ? ms : std::min(timeout_ms, ms);
    }
    if (poll(fds.data(), fds.size(), timeout_ms) < 0 && errno != EINTR) break;
    if (fds[1].revents != 0) break;
    // Connections ready (or out of time), newest last so erasing keeps indexes. One past its
    // deadline is read (or written) once more first: it may have been ready while others were
    // served.
    for (size_t i = open.size(); i-- > 0;) {
      Connection& c = open[i];
      const bool ready = fds[2 + i].revents != 0;
      if (!ready && Clock::now() < c.deadline) continue;
      if (c.reply) {
        if (write(c)) {
          drop(i);
        } else if (Clock::now() >= c.deadline) {
          drop(i);  // not taken in time
        }
        continue;
      }
      char buf[4096];
      const ssize_t n = recv(c.fd, buf, sizeof(buf), 0);
      if (n <= 0 && !(n < 0 && (errno == EINTR || errno == EAGAIN))) {
        drop(i);
        continue;
      }
      if (n > 0) c.request.append(buf, static_cast<size_t>(n));
      if (c.request.find("\r\n\r\n") != std::string::npos || c.request.size() >= kMaxRequest) {
        c.reply = Answer(c.request);
        c.deadline = Clock::now() + kRequestTime;
        if (write(c)) drop(i);
        continue;
      }
      if (Clock::now() >= c.deadline) drop(i);  // stalled: no answer
    }
    if ((fds[0].revents & POLLIN) != 0) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) {
        if (open.size() == kMaxConnections) {  // the oldest still reading makes room
          const auto reading =
              std::find_if(open.begin(), open.end(), [](const Connection& c) { return !c.reply; });
          drop(reading == open.end() ? 0 : static_cast<size_t>(reading - open.begin()));
        }
        open.push_back({fd, "", Clock::now() + kRequestTime, std::nullopt, 0});
      }
    }
  }
  for (const Connection& c : open) close(c.fd);
}

int64_t MetricsEndpoint::MonitoringScrapes() {
  // Not between a scrape's Collect and its count: a value set just before this call is in every
  // scrape counted after what it returns.
  std::lock_guard<std::mutex> collecting(collect_mu_);
  std::lock_guard<std::mutex> lock(scrapes_mu_);
  return scrapes_collected_;
}

bool MetricsEndpoint::AwaitMonitoringScrape(int64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(scrapes_mu_);
  return scrape_sent_.wait_for(lock, timeout, [&] { return scrapes_sent_ > seen; });
}

void MetricsEndpoint::SetReadinessCheck(std::function<absl::Status()> check) {
  std::lock_guard<std::mutex> lock(readiness_mu_);
  readiness_ = std::move(check);
}

MetricsEndpoint::Reply MetricsEndpoint::Answer(const std::string& request) {
  const auto reply = [](std::string data) { return Reply{std::move(data), 0}; };
  const size_t line_end = request.find("\r\n");
  const std::string line = request.substr(0, line_end);
  // "GET /metrics HTTP/1.1", query strings ignored.
  const size_t sp1 = line.find(' '), sp2 = line.rfind(' ');
  if (sp1 == std::string::npos || sp2 <= sp1) {
    return reply(Response("400 Bad Request", "text/plain", "bad request\n"));
  }
  const std::string method = line.substr(0, sp1);
  std::string path = line.substr(sp1 + 1, sp2 - sp1 - 1);
  path = path.substr(0, path.find('?'));
  if (method != "GET") return reply(Response("405 Method Not Allowed", "text/plain", "only GET\n"));
  if (path == "/metrics") {
    const bool monitoring = !FromPsflow(request);
    std::vector<prometheus::MetricFamily> families;
    int64_t collected = 0;
    {
      std::lock_guard<std::mutex> lock(collect_mu_);
      families = registry_.Collect();
      if (monitoring) {
        std::lock_guard<std::mutex> count(scrapes_mu_);
        collected = ++scrapes_collected_;
      }
    }
    const std::string body = prometheus::TextSerializer().Serialize(families);
    return Reply{Response("200 OK", "text/plain; version=0.0.4; charset=utf-8", body), collected};
  }
  if (path == "/healthz") return reply(Response("200 OK", "text/plain", "ok\n"));
  if (path == "/readyz") {
    absl::Status ready = absl::OkStatus();
    {
      std::lock_guard<std::mutex> lock(readiness_mu_);
      if (readiness_) ready = readiness_();
    }
    return reply(ready.ok() ? Response("200 OK", "text/plain", "ok\n")
                            : Response("503 Service Unavailable", "text/plain",
                                       std::string(ready.message()) + "\n"));
  }
  return reply(Response("404 Not Found", "text/plain", "see /metrics, /healthz and /readyz\n"));
}

}  // namespace psflow
