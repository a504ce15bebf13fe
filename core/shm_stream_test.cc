#include "core/shm_stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "core/stream_pattern_testing.h"

namespace psflow {
namespace {

using std::chrono::milliseconds;
using testing::In;
using Pair = testing::StreamPair;

// A connected client and server over a socketpair, handshaken with `token`s.
Pair Connected(size_t ring_bytes, const std::string& client_token = "t0k3n",
               const std::string& server_token = "t0k3n") {
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
  Pair p{MakeShmStream(Socket(fds[0]), ShmSide::kClient, client_token, ring_bytes),
         MakeShmStream(Socket(fds[1]), ShmSide::kServer, server_token)};
  EXPECT_TRUE(p.client->Handshake(In(milliseconds(2000))).ok());
  return p;
}

TEST(ShmStream, BothWaysAtOnceEveryByteInOrderThroughASmallRing) {
  for (size_t ring : {size_t{4096}, size_t{1} << 20}) {
    Pair p = Connected(ring);
    ASSERT_TRUE(p.server->Handshake(In(milliseconds(2000))).ok());
    const absl::Status s = testing::BothWaysAtOnce(p, 24 << 20);
    EXPECT_TRUE(s.ok()) << ring << ": " << s;
  }
}

TEST(ShmStream, APeerThatClosesEndsTheStreamAfterItsBytes) {
  Pair p = Connected(4096);
  ASSERT_TRUE(p.server->Handshake(In(milliseconds(2000))).ok());
  char hello[5] = {'h', 'e', 'l', 'l', 'o'};
  iovec piece{hello, sizeof(hello)};
  ASSERT_TRUE(p.client->WriteAll(std::span<iovec>(&piece, 1), In(milliseconds(1000)), "w").ok());
  p.client.reset();  // the worker's process ends
  // What it wrote is still read; then the end, cleanly before a message...
  char got[5];
  absl::StatusOr<bool> more = p.server->ReadAllOrEnd(got, 3, In(milliseconds(1000)), "r");
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_TRUE(*more);
  EXPECT_EQ(std::string(got, 3), "hel");
  // ...or in the middle of one, with what was missing.
  absl::Status cut = p.server->ReadAll(got, 5, In(milliseconds(1000)), "a reply");
  EXPECT_TRUE(absl::IsUnavailable(cut)) << cut;
  EXPECT_TRUE(absl::StrContains(cut.message(), "a reply: connection closed with 3 bytes to go"))
      << cut;
  more = p.server->ReadAllOrEnd(got, 5, In(milliseconds(1000)), "r");
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_FALSE(*more);
  EXPECT_TRUE(*p.server->WaitReadable(In(milliseconds(1000))));  // an end to read
  // Writing to a peer that is gone fails once the ring is full, not before: it is memory.
  std::vector<char> big(8192);
  iovec all{big.data(), big.size()};
  absl::Status write = p.server->WriteAll(std::span<iovec>(&all, 1), In(milliseconds(1000)), "w");
  EXPECT_TRUE(absl::IsUnavailable(write)) << write;
}

TEST(ShmStream, DeadlinesEndWaitsForBytesAndForRoom) {
  Pair p = Connected(4096);
  ASSERT_TRUE(p.server->Handshake(In(milliseconds(2000))).ok());
  char byte;
  absl::Status read = p.server->ReadAll(&byte, 1, In(milliseconds(50)), "a request");
  EXPECT_TRUE(absl::IsDeadlineExceeded(read)) << read;
  EXPECT_TRUE(absl::StrContains(read.message(), "(1 bytes to go)")) << read;
  absl::StatusOr<bool> readable = p.server->WaitReadable(In(milliseconds(50)));
  ASSERT_TRUE(readable.ok());
  EXPECT_FALSE(*readable);
  std::vector<char> big(4096 + 100);
  iovec all{big.data(), big.size()};
  absl::Status write = p.client->WriteAll(std::span<iovec>(&all, 1), In(milliseconds(50)), "w");
  EXPECT_TRUE(absl::IsDeadlineExceeded(write)) << write;
  EXPECT_TRUE(absl::StrContains(write.message(), "(100 bytes to go)")) << write;
  EXPECT_TRUE(*p.server->WaitReadable(In(milliseconds(50))));
}

TEST(ShmStream, ShutdownWakesABlockedReaderAndWriter) {
  Pair p = Connected(4096);
  ASSERT_TRUE(p.server->Handshake(In(milliseconds(2000))).ok());
  absl::Status read, write;
  std::thread reader([&] {
    char byte;
    read = p.server->ReadAll(&byte, 1, In(milliseconds(30000)), "r");
  });
  std::thread writer([&] {
    std::vector<char> big(10000);
    iovec all{big.data(), big.size()};
    write = p.server->WriteAll(std::span<iovec>(&all, 1), In(milliseconds(30000)), "w");
  });
  // The writer has filled the ring (one copy of 4096 bytes) and waits for room.
  ASSERT_TRUE(*p.client->WaitReadable(In(milliseconds(10000))));
  std::this_thread::sleep_for(milliseconds(50));
  const auto start = SteadyTime::clock::now();
  p.server->Shutdown();
  reader.join();
  writer.join();
  EXPECT_LT(SteadyTime::clock::now() - start, milliseconds(5000));
  EXPECT_TRUE(absl::IsUnavailable(read)) << read;
  EXPECT_TRUE(absl::IsUnavailable(write)) << write;
  // The peer reads what the writer put in the ring before it stopped, then the end.
  std::vector<char> got(5000);
  absl::Status end = p.client->ReadAll(got.data(), got.size(), In(milliseconds(2000)), "r");
  EXPECT_TRUE(absl::IsUnavailable(end)) << end;
  EXPECT_TRUE(absl::StrContains(end.message(), "r: connection closed with ")) << end;
}

TEST(ShmStream, TheServerTakesOnlyItsTokenAndAWellFormedOffer) {
  {
    Pair p = Connected(4096, "another job", "t0k3n");
    absl::Status s = p.server->Handshake(In(milliseconds(2000)));
    EXPECT_TRUE(absl::IsUnavailable(s)) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "wrong token")) << s;
  }
  {  // Bytes with no descriptors: not a psflow client.
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
    Socket client(fds[0]);
    auto server = MakeShmStream(Socket(fds[1]), ShmSide::kServer, "t0k3n");
    ASSERT_EQ(write(client.fd(), "\x05t0k3n", 6), 6);
    absl::Status s = server->Handshake(In(milliseconds(2000)));
    EXPECT_TRUE(absl::StrContains(s.message(), "expected 5 descriptors, got 0")) << s;
  }
  {  // A peer that closes, and one that says nothing.
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
    auto server = MakeShmStream(Socket(fds[1]), ShmSide::kServer, "t0k3n");
    absl::Status s = server->Handshake(In(milliseconds(50)));
    EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
    close(fds[0]);
    s = server->Handshake(In(milliseconds(2000)));
    EXPECT_TRUE(absl::StrContains(s.message(), "the peer closed")) << s;
  }
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
  auto bad_ring = MakeShmStream(Socket(fds[0]), ShmSide::kClient, "t0k3n", 5000);
  EXPECT_TRUE(absl::IsInvalidArgument(bad_ring->Handshake(In(milliseconds(100)))));
  auto no_token = MakeShmStream(Socket(fds[1]), ShmSide::kClient, "");
  EXPECT_TRUE(absl::IsInvalidArgument(no_token->Handshake(In(milliseconds(100)))));
  char byte;
  EXPECT_TRUE(
      absl::IsFailedPrecondition(no_token->ReadAll(&byte, 1, In(milliseconds(10)), "before")));
}

TEST(ShmStream, UnixSocketsListenAcceptAndConnectAtAPath) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("shm-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "ps-0.sock").string();
  EXPECT_TRUE(absl::IsUnavailable(ConnectUnix(path).status()));  // nothing there yet
  {
    absl::StatusOr<Socket> listener = ListenUnix(path);
    ASSERT_TRUE(listener.ok()) << listener.status();
  }
  // The socket file an earlier process left is replaced.
  absl::StatusOr<Socket> listener = ListenUnix(path);
  ASSERT_TRUE(listener.ok()) << listener.status();
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  absl::StatusOr<Socket> client = ConnectUnix(path);
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Socket> accepted = AcceptUnix(*listener);
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  auto offer = MakeShmStream(*std::move(client), ShmSide::kClient, "t");
  auto take = MakeShmStream(*std::move(accepted), ShmSide::kServer, "t");
  ASSERT_TRUE(offer->Handshake(In(milliseconds(2000))).ok());
  ASSERT_TRUE(take->Handshake(In(milliseconds(2000))).ok());
  char ping[4] = {'p', 'i', 'n', 'g'};
  iovec piece{ping, 4};
  ASSERT_TRUE(offer->WriteAll(std::span<iovec>(&piece, 1), In(milliseconds(1000)), "w").ok());
  char got[4];
  ASSERT_TRUE(take->ReadAll(got, 4, In(milliseconds(1000)), "r").ok());
  EXPECT_EQ(std::string(got, 4), "ping");
  // A socket a live process listens on is not taken from it (its probe is the listener's to
  // drop, as a ps drops a connection that never hands over memory).
  EXPECT_TRUE(absl::IsFailedPrecondition(ListenUnix(path).status()));
  EXPECT_TRUE(AcceptUnix(*listener).ok());
  // A listener shut down ends its accept.
  std::thread stop([&] {
    std::this_thread::sleep_for(milliseconds(50));
    listener->Shutdown();
  });
  EXPECT_FALSE(AcceptUnix(*listener).ok());
  stop.join();

  // Linux's abstract namespace: no file.
  const std::string abstract = "@psflow-test-" + std::to_string(getpid());
  absl::StatusOr<Socket> named = ListenUnix(abstract);
  ASSERT_TRUE(named.ok()) << named.status();
  absl::StatusOr<Socket> to_named = ConnectUnix(abstract);
  ASSERT_TRUE(to_named.ok()) << to_named.status();
  EXPECT_TRUE(AcceptUnix(*named).ok());
  EXPECT_FALSE(std::filesystem::exists(abstract));
  named->Close();
  EXPECT_TRUE(absl::IsUnavailable(ConnectUnix(abstract).status()));

  const std::string file = (dir / "not-a-socket").string();
  std::ofstream(file) << "data";
  EXPECT_TRUE(absl::IsInvalidArgument(ListenUnix(file).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ListenUnix(std::string(200, 'x')).status()));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace psflow
