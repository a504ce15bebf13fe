// The ps's bulk channel server against a worker that misbehaves, played by a raw TCP client in
// the test: a peer that is not the protocol, or stops mid-message, loses its connection; a
// well-formed message with a bad frame gets an error reply and the connection stays.
#include "ps/bulk_server.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/bulk_wire.h"
#include "core/byte_source.h"
#include "core/frame.h"
#include "core/shm_stream.h"
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

// A task of one partition "w" of 4 floats, ready, in sync mode with one worker.
void InitializeSync(PsState& state, uint64_t fingerprint) {
  proto::InitializeRequest r;
  proto::PartitionSpec* p = r.add_partitions();
  p->set_variable("w");
  p->add_variable_shape(4);
  p->set_row_begin(0);
  p->set_row_end(4);
  r.mutable_optimizer()->set_name("sgd");
  r.mutable_optimizer()->set_learning_rate(1);
  r.mutable_sync()->set_sync_replicas(true);
  r.mutable_sync()->set_total_workers(1);
  r.set_fingerprint(fingerprint);
  ASSERT_TRUE(state.Initialize(r).ok());
  proto::TransferHeader assign;
  assign.set_kind(proto::TK_ASSIGN);
  assign.set_fingerprint(fingerprint);
  assign.set_wire_dtype(proto::DT_FLOAT32);
  proto::Segment* segment = assign.add_segments();
  segment->set_count(4);
  std::string frame = EncodeFrameHeader(assign);
  frame.append(4 * sizeof(float), '\0');
  ByteSource source(
      {std::span<const std::byte>(reinterpret_cast<const std::byte*>(frame.data()), frame.size())});
  ASSERT_TRUE(state.Push(source).ok());
  r.set_commit(true);
  ASSERT_TRUE(state.Initialize(r).ok());
}

// A peer that sends requests without taking the answers holds a bounded number of them: past 16
// unanswered requests (parked pulls here), the ps reads no more of its requests until one is
// answered. So a malformed push sent after 16 parked pulls is answered only after a pull's
// timeout, where a connection without the bound answers it at once.
TEST_F(BulkServerTest, TheServerReadsNoMoreThan16UnansweredRequests) {
  constexpr uint64_t kFingerprint = 0x5eed;
  InitializeSync(state_, kFingerprint);
  Socket s = Connect();
  ExpectHello(s);
  proto::TransferHeader pull;
  pull.set_kind(proto::TK_PULL);
  pull.set_fingerprint(kFingerprint);
  pull.set_wire_dtype(proto::DT_FLOAT32);
  pull.set_step(1);  // the task is at step 0: parked until the timeout
  pull.set_timeout_ms(300);
  proto::Segment* segment = pull.add_segments();
  segment->set_count(4);
  const std::string frame = EncodeFrameHeader(pull);
  std::string requests;
  for (uint32_t id = 1; id <= 16; ++id)
    requests += Message(BulkKind::kPull, id, frame, frame.size());
  requests += Message(BulkKind::kPush, 99, "xx", 2);
  Send(s, requests);
  // The first answer is a pull's (timed out), not the push's error.
  std::array<std::byte, kBulkPrefixBytes> prefix{};
  ASSERT_TRUE(ReadAll(s, prefix.data(), prefix.size(), Soon(), "reply").ok());
  absl::StatusOr<BulkPrefix> first = DecodeBulkPrefix(prefix, BulkReader::kWorker, 1 << 20);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->kind, BulkKind::kReply);
  EXPECT_GE(first->call_id, 1u);
  EXPECT_LE(first->call_id, 16u);
  std::vector<std::byte> body(first->length);
  ASSERT_TRUE(ReadAll(s, body.data(), body.size(), Soon(), "reply body").ok());
  // The rest come: 15 pulls and the push, the push's error after at least one pull.
  int pulls = 1;
  bool push_answered = false;
  for (int i = 0; i < 16; ++i) {
    ASSERT_TRUE(ReadAll(s, prefix.data(), prefix.size(), Soon(), "reply").ok());
    absl::StatusOr<BulkPrefix> p = DecodeBulkPrefix(prefix, BulkReader::kWorker, 1 << 20);
    ASSERT_TRUE(p.ok()) << p.status();
    body.resize(p->length);
    ASSERT_TRUE(ReadAll(s, body.data(), body.size(), Soon(), "reply body").ok());
    if (p->call_id == 99) {
      EXPECT_EQ(p->kind, BulkKind::kError);
      push_answered = true;
    } else {
      ++pulls;
    }
  }
  EXPECT_EQ(pulls, 16);
  EXPECT_TRUE(push_answered);
}

// Every TCP connection of the bulk channel, both ends, probes a peer silent for kKeepAlive.idle,
// so a worker whose host vanished does not hold its ps connection (two threads) forever.
TEST_F(BulkServerTest, BothEndsOfAConnectionKeepItAlive) {
  int port = 0;
  absl::StatusOr<Socket> listener = ListenTcp("127.0.0.1", 0, &port);
  ASSERT_TRUE(listener.ok()) << listener.status();
  absl::StatusOr<Socket> client = ConnectTcp("127.0.0.1", port, Soon());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Socket> accepted = AcceptTcp(*listener);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  for (const Socket* end : {&*client, &*accepted}) {
    const auto option = [&](int level, int name) {
      int value = -1;
      socklen_t len = sizeof(value);
      EXPECT_EQ(getsockopt(end->fd(), level, name, &value, &len), 0);
      return value;
    };
    EXPECT_EQ(option(SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPIDLE), kKeepAlive.idle.count());
    EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPINTVL), kKeepAlive.interval.count());
    EXPECT_EQ(option(IPPROTO_TCP, TCP_KEEPCNT), kKeepAlive.probes);
    EXPECT_EQ(option(IPPROTO_TCP, TCP_NODELAY), 1);
  }
}

// A connect and a hang-up (a TCP health check; a second ps probing whether this one's Unix socket
// is live) is not warned about; a peer that says something wrong is.
TEST_F(BulkServerTest, AProbeThatHangsUpWithoutAWordIsNotWarnedAbout) {
  testing::internal::CaptureStderr();
  {
    absl::StatusOr<Socket> probe = ConnectTcp("127.0.0.1", server_->port(), Soon());
    ASSERT_TRUE(probe.ok()) << probe.status();
  }
  Socket s = Connect("GET / HT");  // accepted after the probe: once it is closed, both were seen
  EXPECT_TRUE(Closed(s));
  server_.reset();  // waits for both connections' threads
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::vector<std::string>(absl::StrSplit(log, "bulk connection from")).size(), 2u)
      << log;
  EXPECT_NE(log.find("not a psflow bulk client (bad hello)"), std::string::npos) << log;
}

TEST(BulkServer, ASecondPsProbingTheUnixSocketIsNotWarnedAbout) {
  PsState state({}, nullptr);
  BulkServer::Options options;
  options.bind_address = "127.0.0.1";
  options.local_socket = absl::StrCat(testing::TempDir(), "/bulk-probe-", getpid(), ".sock");
  auto server = BulkServer::Start(state, nullptr, options);
  ASSERT_TRUE(server.ok()) << server.status();
  testing::internal::CaptureStderr();
  EXPECT_TRUE(absl::IsFailedPrecondition(ListenUnix(options.local_socket).status()));
  for (int i = 0; i < 1000 && (*server)->accepted_local() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ((*server)->accepted_local(), 1);
  server->reset();
  const std::string log = testing::internal::GetCapturedStderr();
  EXPECT_EQ(log.find("bulk connection from"), std::string::npos) << log;
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
