// The worker's bulk link against a ps that misbehaves, played by a raw TCP server in the test:
// garbage, a reply to no call, a close mid-reply, a stall, a wrong hello, an error reply. Each
// costs the calls in flight one clear error (UNAVAILABLE, or DEADLINE_EXCEEDED for the stall: the
// path a lost ps task takes), never a hang past the call's deadline, and the link stays broken.
#include "worker/bulk_link.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "core/bulk_wire.h"
#include "core/frame.h"
#include "core/socket.h"
#include "worker/bulk_calls.h"

namespace psflow {
namespace {

using std::chrono::steady_clock;
using std::chrono::system_clock;

SteadyTime Soon() { return steady_clock::now() + std::chrono::seconds(10); }

// A one-connection server: answers the hello (or `hello`), reads one request, then runs `act`.
class FakePs {
 public:
  using Act = std::function<void(const Socket&, const BulkPrefix& request)>;
  explicit FakePs(Act act, std::string hello = std::string(kBulkHello.begin(), kBulkHello.end()))
      : listener_(*ListenTcp("127.0.0.1", 0, &port_)) {
    thread_ = std::thread([this, act = std::move(act), hello = std::move(hello)] {
      absl::StatusOr<Socket> s = AcceptTcp(listener_);
      if (!s.ok()) return;
      std::array<char, 8> got{};
      if (!ReadAll(*s, got.data(), got.size(), Soon(), "hello").ok()) return;
      iovec answer{const_cast<char*>(hello.data()), hello.size()};
      if (!WriteAll(*s, std::span<iovec>(&answer, 1), Soon(), "hello").ok()) return;
      std::array<std::byte, kBulkPrefixBytes> prefix{};
      if (!ReadAll(*s, prefix.data(), prefix.size(), Soon(), "prefix").ok()) return;
      absl::StatusOr<BulkPrefix> p = DecodeBulkPrefix(prefix, BulkReader::kPs, 1 << 30);
      if (!p.ok()) return;
      std::vector<std::byte> body(p->length);
      if (!ReadAll(*s, body.data(), body.size(), Soon(), "body").ok()) return;
      act(*s, *p);
      // Keep the connection open until the test is done with it.
      std::array<char, 1> end{};
      (void)ReadAll(*s, end.data(), end.size(), Soon(), "end");
    });
  }
  ~FakePs() {
    listener_.Shutdown();
    thread_.join();
  }
  int port() const { return port_; }

 private:
  int port_ = 0;
  Socket listener_;
  std::thread thread_;
};

void Send(const Socket& s, const std::vector<std::byte>& bytes) {
  iovec piece{const_cast<std::byte*>(bytes.data()), bytes.size()};
  ASSERT_TRUE(WriteAll(s, std::span<iovec>(&piece, 1), Soon(), "test").ok());
}

std::vector<std::byte> Message(const BulkPrefix& p, const std::string& body) {
  const auto prefix = EncodeBulkPrefix(p);
  std::vector<std::byte> out(prefix.begin(), prefix.end());
  for (char c : body) out.push_back(static_cast<std::byte>(c));
  return out;
}

// A pull call through a one-connection window routed on `link`: its status once done, the reply's
// step and how long it took.
struct LinkOutcome {
  absl::Status status;
  double seconds = 0;
  int64_t global_step = -1;
};
LinkOutcome PullThrough(BulkLink& link, std::chrono::milliseconds deadline) {
  CallWindow window(1, 4, 4);
  window.Route(0, &link);
  BulkCall call;
  call.kind = BulkKind::kPull;
  proto::TransferHeader header;
  header.set_kind(proto::TK_PULL);
  call.header = FrameHeaderBuffer(header);
  call.SetRequest({}, WireType::kFloat32);
  const auto t0 = steady_clock::now();
  window.Add(&call, system_clock::now() + deadline);
  window.Wait();
  proto::TransferReply reply;
  const absl::Status status = call.DecodeReply(&reply);
  return {status, std::chrono::duration<double>(steady_clock::now() - t0).count(),
          status.ok() ? reply.global_step() : -1};
}

std::unique_ptr<BulkLink> Connect(int port) {
  auto link = BulkLink::Connect("127.0.0.1", port, Soon());
  EXPECT_TRUE(link.ok()) << link.status();
  return link.ok() ? *std::move(link) : nullptr;
}

TEST(BulkLink, AReplyComesBackToItsCall) {
  FakePs ps([](const Socket& s, const BulkPrefix& request) {
    proto::TransferReply reply;
    reply.set_global_step(12);
    const std::string body = EncodeFrameHeader(reply);
    Send(s, Message({BulkKind::kReply, request.call_id, body.size()}, body));
  });
  auto link = Connect(ps.port());
  ASSERT_NE(link, nullptr);
  const LinkOutcome o = PullThrough(*link, std::chrono::seconds(10));
  EXPECT_TRUE(o.status.ok()) << o.status;
  EXPECT_EQ(o.global_step, 12);
  EXPECT_FALSE(link->broken());
}

TEST(BulkLink, GarbageFromThePsFailsTheCallAndBreaksTheLink) {
  FakePs ps([](const Socket& s, const BulkPrefix&) {
    Send(s, Message({static_cast<BulkKind>(77), 0, 3}, "abc"));
  });
  auto link = Connect(ps.port());
  ASSERT_NE(link, nullptr);
  const LinkOutcome o = PullThrough(*link, std::chrono::seconds(10));
  EXPECT_TRUE(absl::IsUnavailable(o.status)) << o.status;
  EXPECT_NE(o.status.message().find("garbage from the ps: bulk message of kind 77"),
            std::string::npos)
      << o.status;
  EXPECT_TRUE(link->broken());
  // Later calls fail at once with the same cause.
  const LinkOutcome later = PullThrough(*link, std::chrono::seconds(10));
  EXPECT_EQ(later.status, o.status);
}

TEST(BulkLink, AReplyToACallNotInFlightIsGarbage) {
  FakePs ps([](const Socket& s, const BulkPrefix& request) {
    Send(s, Message({BulkKind::kReply, request.call_id + 5, 0}, ""));
  });
  auto link = Connect(ps.port());
  ASSERT_NE(link, nullptr);
  const LinkOutcome o = PullThrough(*link, std::chrono::seconds(10));
  EXPECT_TRUE(absl::IsUnavailable(o.status)) << o.status;
  EXPECT_NE(o.status.message().find("not in flight"), std::string::npos) << o.status;
}

TEST(BulkLink, AReplyToAnEarlierUseOfTheCallsSlotIsGarbage) {
  // The same slot, another generation (the id's top 8 bits): a late or repeated reply.
  FakePs ps([](const Socket& s, const BulkPrefix& request) {
    Send(s, Message({BulkKind::kReply, request.call_id ^ (1u << 24), 0}, ""));
  });
  auto link = Connect(ps.port());
  ASSERT_NE(link, nullptr);
  const LinkOutcome o = PullThrough(*link, std::chrono::seconds(10));
  EXPECT_TRUE(absl::IsUnavailable(o.status)) << o.status;
  EXPECT_NE(o.status.message().find("not in flight"), std::string::npos) << o.status;
}

TEST(BulkLink, APsClosingMidReplyFailsTheCall) {
  FakePs ps([](const Socket& s, const BulkPrefix& request) {
    Send(s, Message({BulkKind::kReply, request.call_id, 100}, std::string(10, 'x')));
    s.Shutdown();
  });
  auto link = Connect(ps.port());
  ASSERT_NE(link, nullptr);
  const LinkOutcome o = PullThrough(*link, std::chrono::seconds(10));
  EXPECT_TRUE(absl::IsUnavailable(o.status)) << o.status;
  EXPECT_NE(o.status.message().find("connection closed with"), std::string::npos) << o.status;
}

TEST(BulkLink, AStalledPsFailsTheCallAtItsDeadline) {
  FakePs ps([](const Socket& s, const BulkPrefix& request) {
    // Half a reply, then nothing.
    Send(s, Message({BulkKind::kReply, request.call_id, 100}, std::string(10, 'x')));
  });
  auto link = Connect(ps.port());
  ASSERT_NE(link, nullptr);
  const LinkOutcome o = PullThrough(*link, std::chrono::milliseconds(300));
  EXPECT_TRUE(absl::IsDeadlineExceeded(o.status)) << o.status;
  // Not a hang: well before the fake's own 10 s.
  EXPECT_LT(o.seconds, 8) << o.status;
  EXPECT_TRUE(link->broken());
}

TEST(BulkLink, AnErrorReplyIsTheCallsStatusAndTheLinkStays) {
  FakePs ps([](const Socket& s, const BulkPrefix& request) {
    const std::string body = EncodeBulkError(absl::InvalidArgumentError("unknown partition 9"));
    Send(s, Message({BulkKind::kError, request.call_id, body.size()}, body));
  });
  auto link = Connect(ps.port());
  ASSERT_NE(link, nullptr);
  const LinkOutcome o = PullThrough(*link, std::chrono::seconds(10));
  EXPECT_EQ(o.status, absl::InvalidArgumentError("unknown partition 9"));
  EXPECT_FALSE(link->broken());
}

TEST(BulkLink, SomethingElseOnThePortIsNotTakenForAPs) {
  FakePs ps([](const Socket&, const BulkPrefix&) {}, "HTTP/1.1");
  auto link = BulkLink::Connect("127.0.0.1", ps.port(), Soon());
  ASSERT_FALSE(link.ok());
  EXPECT_TRUE(absl::IsUnavailable(link.status())) << link.status();
  EXPECT_NE(link.status().message().find("is this its bulk port?"), std::string::npos)
      << link.status();
}

TEST(BulkLink, NothingListeningIsUnavailable) {
  int port = 0;
  { Socket closed = *ListenTcp("127.0.0.1", 0, &port); }
  auto link = BulkLink::Connect("127.0.0.1", port, Soon());
  EXPECT_TRUE(absl::IsUnavailable(link.status())) << link.status();
}

}  // namespace
}  // namespace psflow
