// The TLS bulk stream between two ends of a socket pair, each with a certificate of one CA.
#include "core/bulk_stream.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "core/certificates.h"
#include "core/stream_pattern_testing.h"

namespace psflow {
namespace {

using std::chrono::milliseconds;
using testing::In;
using Pair = testing::StreamPair;

// A CA and the certificates of a ps (naming 127.0.0.1, which clients dial) and a worker.
struct Certificates {
  std::string ca;
  PemCertificate server;
  PemCertificate client;
};
Certificates Issue() {
  const absl::StatusOr<CertificateAuthority> ca =
      CertificateAuthority::Create("bulk stream test CA", absl::Hours(1));
  EXPECT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<PemCertificate> server_pem = ca->Issue(
      {.common_name = "ps", .dns_names = {}, .ip_addresses = {"127.0.0.1"}}, absl::Hours(1));
  absl::StatusOr<PemCertificate> client_pem = ca->Issue(
      {.common_name = "worker", .dns_names = {"worker"}, .ip_addresses = {}}, absl::Hours(1));
  EXPECT_TRUE(server_pem.ok() && client_pem.ok());
  return {ca->pem().certificate, *std::move(server_pem), *std::move(client_pem)};
}

// A client presenting `client_pem` and a server presenting c.server, over a socket pair, before
// their handshakes.
Pair Connected(const Certificates& c, const PemCertificate& client_pem) {
  auto server_tls = BulkTlsContext::Make(TransportSecurity::MutualTls(c.ca, c.server),
                                         BulkTlsContext::Role::kServer);
  auto client_tls = BulkTlsContext::Make(TransportSecurity::MutualTls(c.ca, client_pem),
                                         BulkTlsContext::Role::kClient);
  EXPECT_TRUE(server_tls.ok() && client_tls.ok());
  int fds[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  return {BulkStream::Tls(Socket(fds[0]), *client_tls, "127.0.0.1"),
          BulkStream::Tls(Socket(fds[1]), *server_tls, "")};
}

// Both handshakes at once, each within 10 s: the client's outcome, then the server's. A server
// whose handshake fails closes its end, as the ps does.
std::pair<absl::Status, absl::Status> HandshakeBoth(Pair& p) {
  absl::Status server_ok;
  std::thread server([&] {
    server_ok = p.server->Handshake(In(milliseconds(10000)));
    if (!server_ok.ok()) p.server.reset();
  });
  const absl::Status client_ok = p.client->Handshake(In(milliseconds(10000)));
  server.join();
  return {client_ok, server_ok};
}

// A client and a server over a socket pair, both handshaken.
Pair Handshaken() {
  Certificates c = Issue();
  Pair p = Connected(c, c.client);
  const auto [client_ok, server_ok] = HandshakeBoth(p);
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

// A TLS 1.3 client with the job's certificate that offers no sealed records (as psflow before
// them did) gets through the handshake and no further: the ps says why at once.
TEST(BulkStreamTls, APeerWithoutSealedRecordsIsRefusedSayingWhy) {
  Certificates c = Issue();
  auto server_tls = BulkTlsContext::Make(TransportSecurity::MutualTls(c.ca, c.server),
                                         BulkTlsContext::Role::kServer);
  ASSERT_TRUE(server_tls.ok()) << server_tls.status();
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  std::unique_ptr<BulkStream> server = BulkStream::Tls(Socket(fds[1]), *server_tls, "");
  std::thread old_client([&] {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    BIO* cert = BIO_new_mem_buf(c.client.certificate.data(), -1);
    BIO* key = BIO_new_mem_buf(c.client.private_key.data(), -1);
    X509* x509 = PEM_read_bio_X509(cert, nullptr, nullptr, nullptr);
    EVP_PKEY* pkey = PEM_read_bio_PrivateKey(key, nullptr, nullptr, nullptr);
    SSL_CTX_use_certificate(ctx, x509);
    SSL_CTX_use_PrivateKey(ctx, pkey);
    SSL* ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fds[0]);
    SSL_connect(ssl);  // the server's certificate is not checked here; the server's answer is
    SSL_free(ssl);
    X509_free(x509);
    EVP_PKEY_free(pkey);
    BIO_free(cert);
    BIO_free(key);
    SSL_CTX_free(ctx);
    close(fds[0]);
  });
  const absl::Status s = server->Handshake(In(milliseconds(10000)));
  old_client.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "does not speak sealed bulk records")) << s;
}

// A client whose certificate the ps refuses reads the ps's alert, not a broken record.
TEST(BulkStreamTls, AClientTheServerRefusesReadsItsAlert) {
  Certificates c = Issue();
  Certificates other = Issue();  // another job's CA
  Pair p = Connected(c, other.client);
  const auto [client_ok, server_ok] = HandshakeBoth(p);
  EXPECT_TRUE(absl::StrContains(server_ok.message(), "the peer's certificate")) << server_ok;
  EXPECT_EQ(client_ok.code(), absl::StatusCode::kUnavailable) << client_ok;
  EXPECT_TRUE(absl::StrContains(client_ok.message(), "alert")) << client_ok;
}

}  // namespace
}  // namespace psflow
