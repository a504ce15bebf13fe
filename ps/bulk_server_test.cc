// The ps's bulk channel server against a worker that misbehaves, played by a raw TCP client in
// the test: a peer that is not the protocol, or stops mid-message, loses its connection; a
// well-formed message with a bad frame gets an error reply and the connection stays.
#include "ps/bulk_server.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/bulk_wire.h"
#include "core/frame.h"
#include "core/socket.h"
#include "ps/ps_state.h"

namespace psflow {
namespace {

SteadyTime Soon() { return std::chrono::steady_clock::now() + std::chrono::seconds(10); }

class BulkServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BulkServer::Options options;
    options.bind_address = "127.0.0.1";
    options.stall_timeout = std::chrono::milliseconds(200);
    options.max_connections = max_connections_;
    auto server = BulkServer::Start(state_, nullptr, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  Socket Connect(const std::string& hello = std::string(kBulkHello.begin(), kBulkHello.end())) {
    absl::StatusOr<Socket> s = ConnectTcp("127.0.0.1", server_->port(), Soon());
    EXPECT_TRUE(s.ok()) << s.status();
    Send(*s, hello);
    return *std::move(s);
  }
  static void Send(const Socket& s, const std::string& bytes) {
    iovec piece{const_cast<char*>(bytes.data()), bytes.size()};
    ASSERT_TRUE(WriteAll(s, std::span<iovec>(&piece, 1), Soon(), "test").ok());
  }
  static std::string Message(BulkKind kind, uint32_t id, const std::string& body, uint64_t length) {
    const auto prefix = EncodeBulkPrefix({kind, id, length});
    return std::string(reinterpret_cast<const char*>(prefix.data()), prefix.size()) + body;
  }
  static void ExpectHello(const Socket& s) {
    std::array<char, 8> answer{};
    ASSERT_TRUE(ReadAll(s, answer.data(), answer.size(), Soon(), "hello").ok());
    EXPECT_EQ(answer, kBulkHello);
  }
  // True when the server closed the connection (with nothing more to read).
  static bool Closed(const Socket& s) {
    std::array<char, 1> byte{};
    absl::StatusOr<bool> more = ReadAllOrEnd(s, byte.data(), byte.size(), Soon(), "end");
    return more.ok() && !*more;
  }
  // The next reply: its call id and, for an error, the status it carries.
  static std::pair<uint32_t, absl::Status> ReadError(const Socket& s) {
    std::array<std::byte, kBulkPrefixBytes> prefix{};
    EXPECT_TRUE(ReadAll(s, prefix.data(), prefix.size(), Soon(), "reply").ok());
    absl::StatusOr<BulkPrefix> p = DecodeBulkPrefix(prefix, BulkReader::kWorker, 1 << 20);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {0, p.status()};
    std::vector<std::byte> body(p->length);
    EXPECT_TRUE(ReadAll(s, body.data(), body.size(), Soon(), "reply body").ok());
    EXPECT_EQ(p->kind, BulkKind::kError);
    return {p->call_id, DecodeBulkError(body)};
  }

  int max_connections_ = BulkServer::kDefaultMaxConnections;
  PsState state_{{}, nullptr};
  std::unique_ptr<BulkServer> server_;
};

class BulkServerLimitTest : public BulkServerTest {
 protected:
  BulkServerLimitTest() { max_connections_ = 2; }
};

TEST_F(BulkServerTest, APeerWithoutTheHelloIsClosed) {
  Socket s = Connect("GET / HT");
  EXPECT_TRUE(Closed(s));
}

TEST_F(BulkServerTest, AReplyKindFromAWorkerClosesTheConnection) {
  Socket s = Connect();
  ExpectHello(s);
  Send(s, Message(BulkKind::kReply, 1, "", 0));
  EXPECT_TRUE(Closed(s));
}

TEST_F(BulkServerTest, ABodyOverTheLimitClosesTheConnection) {
  Socket s = Connect();
  ExpectHello(s);
  Send(s, Message(BulkKind::kPush, 1, "", uint64_t{1} << 40));
  EXPECT_TRUE(Closed(s));
}

TEST_F(BulkServerTest, APeerStoppingMidMessageIsClosedAfterTheStallTimeout) {
  Socket s = Connect();
  ExpectHello(s);
  Send(s, Message(BulkKind::kPush, 1, "0123456789", 100));
  EXPECT_TRUE(Closed(s));
}

TEST_F(BulkServerTest, ABadFrameGetsAnErrorReplyAndTheConnectionStays) {
  Socket s = Connect();
  ExpectHello(s);
  Send(s, Message(BulkKind::kPush, 7, "xx", 2));
  auto [id, status] = ReadError(s);
  EXPECT_EQ(id, 7u);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  // A frame header longer than its body (the length the ps reads first to align the payload):
  // the body is still read whole, and answered.
  Send(s, Message(BulkKind::kPush, 9, std::string("\xff\x00\x00\x00", 4) + "012345", 10));
  auto [id9, status9] = ReadError(s);
  EXPECT_EQ(id9, 9u);
  EXPECT_TRUE(absl::IsInvalidArgument(status9)) << status9;
  // A well-formed pull to a task that is not initialised: the answer a worker recovers from.
  proto::TransferHeader pull;
  pull.set_kind(proto::TK_PULL);
  const std::string frame = EncodeFrameHeader(pull);
  Send(s, Message(BulkKind::kPull, 8, frame, frame.size()));
  auto [id2, status2] = ReadError(s);
  EXPECT_EQ(id2, 8u);
  EXPECT_TRUE(absl::IsUnavailable(status2)) << status2;
}

TEST_F(BulkServerTest, StopClosesEveryConnection) {
  Socket s = Connect();
  ExpectHello(s);
  server_->Stop();
  EXPECT_TRUE(Closed(s));
  EXPECT_EQ(server_->accepted(), 1);
}

// Beyond max_connections a connection is closed as soon as it is accepted (its worker falls back
// to gRPC); once one ends, a new one is served again.
TEST_F(BulkServerLimitTest, ConnectionsBeyondTheLimitAreClosedUntilOneEnds) {
  std::optional<Socket> a(Connect());
  ExpectHello(*a);
  Socket b = Connect();
  ExpectHello(b);
  Socket refused = Connect("");
  EXPECT_TRUE(Closed(refused));
  EXPECT_EQ(server_->accepted(), 2);
  a.reset();  // its threads end once they see the end, and the next accept finds room
  bool served = false;
  for (int attempt = 0; attempt < 100 && !served; ++attempt) {
    absl::StatusOr<Socket> c = ConnectTcp("127.0.0.1", server_->port(), Soon());
    ASSERT_TRUE(c.ok()) << c.status();
    // A refused connection may fail the write or the read; a served one answers the hello.
    std::string hello(kBulkHello.begin(), kBulkHello.end());
    iovec piece{hello.data(), hello.size()};
    std::array<char, 8> answer{};
    served = WriteAll(*c, std::span<iovec>(&piece, 1), Soon(), "hello").ok() &&
             ReadAll(*c, answer.data(), answer.size(), Soon(), "hello").ok() &&
             answer == kBulkHello;
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(served);
  EXPECT_EQ(server_->accepted(), 3);
}

TEST(BulkServer, AConnectionLimitBelowOneIsRefused) {
  PsState state({}, nullptr);
  BulkServer::Options options;
  options.bind_address = "127.0.0.1";
  options.max_connections = 0;
  auto server = BulkServer::Start(state, nullptr, options);
  EXPECT_TRUE(absl::IsInvalidArgument(server.status())) << server.status();
}

}  // namespace
}  // namespace psflow
