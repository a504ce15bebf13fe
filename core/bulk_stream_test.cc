// The TLS bulk stream between two ends of a socket pair, each with a certificate of one CA.
#include "core/bulk_stream.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "core/certificates.h"
#include "core/stream_pattern_testing.h"

namespace psflow {
namespace {

using std::chrono::milliseconds;
using testing::In;
using Pair = testing::StreamPair;

// A client and a server over a socket pair, both handshaken (the server's certificate names
// 127.0.0.1, which the client dials).
Pair Handshaken() {
  const absl::StatusOr<CertificateAuthority> ca =
      CertificateAuthority::Create("bulk stream test CA", absl::Hours(1));
  EXPECT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<PemCertificate> server_pem = ca->Issue(
      {.common_name = "ps", .dns_names = {}, .ip_addresses = {"127.0.0.1"}}, absl::Hours(1));
  absl::StatusOr<PemCertificate> client_pem = ca->Issue(
      {.common_name = "worker", .dns_names = {"worker"}, .ip_addresses = {}}, absl::Hours(1));
  EXPECT_TRUE(server_pem.ok() && client_pem.ok());
  auto server_tls = BulkTlsContext::Make(
      TransportSecurity::MutualTls(ca->pem().certificate, *std::move(server_pem)),
      BulkTlsContext::Role::kServer);
  auto client_tls = BulkTlsContext::Make(
      TransportSecurity::MutualTls(ca->pem().certificate, *std::move(client_pem)),
      BulkTlsContext::Role::kClient);
  EXPECT_TRUE(server_tls.ok() && client_tls.ok());
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  Pair p{BulkStream::Tls(Socket(fds[0]), *client_tls, "127.0.0.1"),
         BulkStream::Tls(Socket(fds[1]), *server_tls, "")};
  absl::Status server_ok;
  std::thread server([&] { server_ok = p.server->Handshake(In(milliseconds(10000))); });
  const absl::Status client_ok = p.client->Handshake(In(milliseconds(10000)));
  server.join();
  EXPECT_TRUE(client_ok.ok()) << client_ok;
  EXPECT_TRUE(server_ok.ok()) << server_ok;
  return p;
}

// Both ways at once, in writes that cross the stream's 256 KiB batches and reads of other sizes.
TEST(BulkStreamTls, BothWaysAtOnceEveryByteInOrder) {
  Pair p = Handshaken();
  const absl::Status s = testing::BothWaysAtOnce(p, 24 << 20);
  EXPECT_TRUE(s.ok()) << s;
}

TEST(BulkStreamTls, APeerThatClosesEndsTheStreamAfterItsBytes) {
  Pair p = Handshaken();
  std::vector<char> bytes(1000, 'x');
  iovec piece{bytes.data(), bytes.size()};
  ASSERT_TRUE(p.client->WriteAll(std::span<iovec>(&piece, 1), In(milliseconds(5000)), "w").ok());
  p.client.reset();
  // Its bytes first, then the end: at a message's start, as the end; inside one, as an error.
  std::vector<char> got(600);
  EXPECT_TRUE(p.server->ReadAll(got.data(), got.size(), In(milliseconds(5000)), "r").ok());
  const absl::Status cut = p.server->ReadAll(got.data(), 500, In(milliseconds(5000)), "body");
  EXPECT_EQ(cut.code(), absl::StatusCode::kUnavailable) << cut;
  EXPECT_TRUE(absl::StrContains(cut.message(), "closed with 100 bytes to go")) << cut;

  Pair q = Handshaken();
  q.client.reset();
  absl::StatusOr<bool> more = q.server->ReadAllOrEnd(got.data(), 4, In(milliseconds(5000)), "r");
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_FALSE(*more);
}

TEST(BulkStreamTls, ADeadlineEndsAReadThatGetsNoBytes) {
  Pair p = Handshaken();
  char byte;
  const absl::Status s = p.server->ReadAll(&byte, 1, In(milliseconds(100)), "r");
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "1 bytes to go")) << s;
}

}  // namespace
}  // namespace psflow
