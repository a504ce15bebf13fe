#include "core/bulk_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/openssl_errors.h"
#include "core/sealed_records.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

// OpenSSL's report that the peer closed the connection (cleanly, or without close_notify, which
// SSL_OP_IGNORE_UNEXPECTED_EOF turns into a clean close).
bool Closed(int err) {
  return err == SSL_ERROR_ZERO_RETURN || (err == SSL_ERROR_SYSCALL && ERR_peek_error() == 0);
}

class PlainStream final : public BulkStream {
 public:
  explicit PlainStream(Socket socket) : BulkStream(std::move(socket), false) {}
  absl::Status Handshake(SteadyTime) override { return absl::OkStatus(); }
  absl::Status WriteAll(std::span<iovec> pieces, SteadyTime deadline,
                        absl::string_view what) override {
    return psflow::WriteAll(socket_, pieces, deadline, what);
  }
  absl::Status ReadAll(std::span<iovec> pieces, SteadyTime deadline,
                       absl::string_view what) override {
    return psflow::ReadAll(socket_, pieces, deadline, what);
  }
  absl::StatusOr<bool> ReadAllOrEnd(void* data, size_t size, SteadyTime deadline,
                                    absl::string_view what) override {
    return psflow::ReadAllOrEnd(socket_, data, size, deadline, what);
  }
  absl::StatusOr<bool> WaitReadable(SteadyTime deadline) override {
    return psflow::WaitReadable(socket_, deadline);
  }
};

// The BIO that OpenSSL writes a TLS connection's records to: it appends them to the
// std::vector<char> of its data (the stream's `pending_`, under the stream's lock), never blocking.
// The stream sends them itself, outside the lock, many records per send.
int SinkWrite(BIO* bio, const char* data, int size) {
  auto* out = static_cast<std::vector<char>*>(BIO_get_data(bio));
  try {  // no exception may cross OpenSSL's C frames
    out->insert(out->end(), data, data + size);
  } catch (const std::bad_alloc&) {
    return -1;
  }
  return size;
}
long SinkControl(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }
int SinkCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}
BIO_METHOD* SinkMethod() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "psflow bulk sink");
    if (m == nullptr) return m;  // BIO_new(nullptr) fails, and so does the stream, saying so
    BIO_meth_set_write(m, SinkWrite);
    BIO_meth_set_ctrl(m, SinkControl);
    BIO_meth_set_create(m, SinkCreate);
    return m;
  }();
  return method;
}

// The ALPN protocol both ends offer, in ALPN's wire form (a length byte, then the name): a peer
// without it speaks OpenSSL's records after the handshake, and the connection fails at once,
// saying so, instead of misreading them.
constexpr absl::string_view kSealedProtocol = "\x13psflow-bulk-sealed1";
static_assert(kSealedProtocol.size() == 20);

// The server's ALPN choice: the sealed protocol if the client offers it; else the handshake
// ends with a no_application_protocol alert (an older client offers none, and the server's check
// after the handshake refuses it).
int SelectSealedProtocol(SSL*, const unsigned char** out, unsigned char* out_bytes,
                         const unsigned char* offered, unsigned int offered_bytes, void*) {
  unsigned char* chosen = nullptr;
  const auto* ours = reinterpret_cast<const unsigned char*>(kSealedProtocol.data());
  if (SSL_select_next_proto(&chosen, out_bytes, ours, kSealedProtocol.size(), offered,
                            offered_bytes) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;
  }
  *out = chosen;
  return SSL_TLSEXT_ERR_OK;
}

// The cipher of sealed records matching the TLS 1.3 suite the handshake chose.
absl::StatusOr<SealCipher> SealCipherOf(const SSL* ssl) {
  const SSL_CIPHER* suite = SSL_get_current_cipher(ssl);
  switch (suite != nullptr ? SSL_CIPHER_get_id(suite) : 0) {
    case TLS1_3_CK_AES_128_GCM_SHA256:
      return SealCipher::kAes128Gcm;
    case TLS1_3_CK_AES_256_GCM_SHA384:
      return SealCipher::kAes256Gcm;
    case TLS1_3_CK_CHACHA20_POLY1305_SHA256:
      return SealCipher::kChaCha20Poly1305;
    default:
      return absl::UnavailableError(
          absl::StrCat("TLS: no sealed records for the suite ",
                       suite != nullptr ? SSL_CIPHER_get_name(suite) : "(none)"));
  }
}

// TLS 1.3 for the handshake, then sealed records (core/sealed_records.h) for the stream's bytes:
// the writer seals from the caller's buffer into one of its own and sends it; the reader opens
// records where the caller wants them. The two directions share nothing but the socket, so a
// reader and a writer never wait for each other.
class TlsStream final : public BulkStream {
 public:
  TlsStream(Socket socket, std::shared_ptr<const BulkTlsContext> tls, std::string host)
      : BulkStream(std::move(socket), true), tls_context_(std::move(tls)), host_(std::move(host)) {
    const int flags = fcntl(socket_.fd(), F_GETFL);
    fcntl(socket_.fd(), F_SETFL, flags | O_NONBLOCK);
    ssl_ = SSL_new(static_cast<SSL_CTX*>(tls_context_->native()));
    BIO* in = BIO_new_socket(socket_.fd(), BIO_NOCLOSE);
    BIO* out = SinkMethod() != nullptr ? BIO_new(SinkMethod()) : nullptr;
    if (ssl_ == nullptr || in == nullptr || out == nullptr) {  // Handshake says so
      BIO_free(in);
      BIO_free(out);
      SSL_free(ssl_);
      ssl_ = nullptr;
      return;
    }
    BIO_set_data(out, &pending_);
    SSL_set_bio(ssl_, in, out);
  }
  ~TlsStream() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }

  // The TLS handshake; then the server confirms it in one TLS record (so that a client whose
  // certificate the server refused reads the server's alert, not a broken record), and each end
  // keys its sealed records from the session.
  absl::Status Handshake(SteadyTime deadline) override {
    if (ssl_ == nullptr) return absl::UnavailableError("TLS: " + OpenSslErrors());
    const bool client = tls_context_->role() == BulkTlsContext::Role::kClient;
    if (client) {
      unsigned char ip[sizeof(in6_addr)];
      const bool is_ip =
          inet_pton(AF_INET, host_.c_str(), ip) == 1 || inet_pton(AF_INET6, host_.c_str(), ip) == 1;
      X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
      const int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host_.c_str())
                           : X509_VERIFY_PARAM_set1_host(param, host_.c_str(), 0);
      if (ok != 1) return absl::UnavailableError(absl::StrCat("TLS: bad peer name ", host_));
    }
    RETURN_IF_ERROR(Step(deadline, [&] { return client ? SSL_connect(ssl_) : SSL_accept(ssl_); }));
    const unsigned char* protocol = nullptr;
    unsigned int protocol_bytes = 0;
    SSL_get0_alpn_selected(ssl_, &protocol, &protocol_bytes);
    if (protocol == nullptr || absl::string_view(reinterpret_cast<const char*>(protocol),
                                                 protocol_bytes) != kSealedProtocol.substr(1)) {
      return absl::UnavailableError(
          "TLS: the peer does not speak sealed bulk records (another psflow version?): run one "
          "psflow version on every replica of a job");
    }
    char confirmation = kConfirmation;
    RETURN_IF_ERROR(Step(deadline, [&] {
      return client ? SSL_read(ssl_, &confirmation, 1) : SSL_write(ssl_, &confirmation, 1);
    }));
    if (confirmation != kConfirmation) {
      return absl::UnavailableError("TLS handshake failed: not a psflow bulk server");
    }
    ASSIGN_OR_RETURN(const SealCipher cipher, SealCipherOf(ssl_));
    ASSIGN_OR_RETURN(std::string to_server, Export("client to server"));
    ASSIGN_OR_RETURN(std::string to_client, Export("server to client"));
    using Role = SealedDirection::Role;
    ASSIGN_OR_RETURN(SealedDirection sealer,
                     SealedDirection::Make(Role::kSeal, cipher, client ? to_server : to_client));
    ASSIGN_OR_RETURN(SealedDirection opener,
                     SealedDirection::Make(Role::kOpen, cipher, client ? to_client : to_server));
    OPENSSL_cleanse(to_server.data(), to_server.size());
    OPENSSL_cleanse(to_client.data(), to_client.size());
    writer_.emplace(std::move(sealer));
    reader_.emplace(std::move(opener));
    // The session's secrets are not needed any more.
    SSL_free(ssl_);
    ssl_ = nullptr;
    return absl::OkStatus();
  }

  absl::Status WriteAll(std::span<iovec> pieces, SteadyTime deadline,
                        absl::string_view what) override {
    if (!writer_) return absl::FailedPreconditionError(absl::StrCat(what, ": no TLS handshake"));
    absl::Status s = writer_->Write(pieces, [&](const char* data, size_t size) {
      iovec all{const_cast<char*>(data), size};
      return psflow::WriteAll(socket_, std::span<iovec>(&all, 1), deadline, what);
    });
    if (!s.ok() && !absl::IsDeadlineExceeded(s) && !absl::IsUnavailable(s)) {
      return absl::UnavailableError(absl::StrCat(what, ": ", s.message()));
    }
    return s;
  }

  absl::Status ReadAll(std::span<iovec> pieces, SteadyTime deadline,
                       absl::string_view what) override {
    return Read(pieces, deadline, what, nullptr);
  }

  absl::StatusOr<bool> ReadAllOrEnd(void* data, size_t size, SteadyTime deadline,
                                    absl::string_view what) override {
    iovec piece{data, size};
    bool ended = false;
    RETURN_IF_ERROR(Read(std::span<iovec>(&piece, 1), deadline, what, &ended));
    return !ended;
  }

  absl::StatusOr<bool> WaitReadable(SteadyTime deadline) override {
    if (reader_ && reader_->buffered()) return true;
    return psflow::WaitReadable(socket_, deadline);
  }

 private:
  static constexpr char kConfirmation = 'k';

  // Runs an OpenSSL handshake step until it is done (> 0), sending what it wrote and waiting for
  // the socket as it asks, by `deadline`.
  template <typename Call>
  absl::Status Step(SteadyTime deadline, Call call) {
    for (;;) {
      ERR_clear_error();
      const int rc = call();
      const int err = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, rc);
      // What the step wrote goes out before its failure is judged: an alert tells the peer why.
      iovec written{pending_.data(), pending_.size()};
      const absl::Status sent =
          psflow::WriteAll(socket_, std::span<iovec>(&written, 1), deadline, "TLS handshake");
      pending_.clear();
      if (rc > 0) return sent;
      if (err != SSL_ERROR_WANT_READ) {
        const long verify = SSL_get_verify_result(ssl_);
        std::string why = Closed(err) ? "the peer closed the connection" : OpenSslErrors();
        if (verify != X509_V_OK) {
          why = absl::StrCat("the peer's certificate: ", X509_verify_cert_error_string(verify));
        }
        return absl::UnavailableError(absl::StrCat("TLS handshake failed: ", why));
      }
      if (!sent.ok()) return sent;
      absl::StatusOr<bool> ready = WaitFor(socket_, POLLIN, deadline, "TLS handshake");
      if (!ready.ok()) return ready.status();
      if (!*ready) return absl::DeadlineExceededError("TLS handshake: timed out");
    }
  }

  // 32 bytes of the session's exporter for one direction (RFC 8446 section 7.5).
  absl::StatusOr<std::string> Export(absl::string_view direction) {
    const std::string label = absl::StrCat("EXPORTER-psflow-sealed-records ", direction);
    std::string secret(kSealedSecretBytes, '\0');
    if (SSL_export_keying_material(ssl_, reinterpret_cast<unsigned char*>(secret.data()),
                                   secret.size(), label.data(), label.size(), nullptr, 0, 0) != 1) {
      return absl::UnavailableError("TLS: no keying material: " + OpenSslErrors());
    }
    return secret;
  }

  absl::Status Read(std::span<iovec> pieces, SteadyTime deadline, absl::string_view what,
                    bool* ended) {
    if (!reader_) return absl::FailedPreconditionError(absl::StrCat(what, ": no TLS handshake"));
    absl::Status s = reader_->Read(
        pieces, [&](std::span<iovec> into) { return ReadSome(socket_, into, deadline, what); },
        what, ended);
    // A record that does not open is a broken connection, as core/socket.h's errors are.
    if (absl::IsDataLoss(s)) return absl::UnavailableError(s.message());
    return s;
  }

  std::shared_ptr<const BulkTlsContext> tls_context_;
  const std::string host_;
  SSL* ssl_ = nullptr;                  // the handshake's; freed after it
  std::vector<char> pending_;           // records OpenSSL wrote in the handshake, not yet sent
  std::optional<SealedWriter> writer_;  // this end's records, once handshaken (the writer's)
  std::optional<SealedReader> reader_;  // the peer's records (the reader's)
};

}  // namespace

absl::StatusOr<std::shared_ptr<const BulkTlsContext>> BulkTlsContext::Make(
    const TransportSecurity& security, Role role) {
  if (!security.tls()) return absl::InvalidArgumentError("TLS context without TLS settings");
  // OpenSSL never writes to the socket (its records go to the stream's sink, which sends them
  // with MSG_NOSIGNAL), so a peer that closed costs an error, never a SIGPIPE.
  SSL_CTX* ctx = SSL_CTX_new(role == Role::kClient ? TLS_client_method() : TLS_server_method());
  if (ctx == nullptr) return absl::InvalidArgumentError("TLS: " + OpenSslErrors());
  std::shared_ptr<const BulkTlsContext> out(new BulkTlsContext(ctx, role));
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_num_tickets(ctx, 0);
  // AES-128-GCM first: the cheapest of TLS 1.3's ciphers where the CPU has AES instructions.
  SSL_CTX_set_ciphersuites(
      ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  // A peer that closes in the handshake reads as a close, not an OpenSSL error.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  // No read ahead: OpenSSL reads the handshake's records and not a byte more, so the sealed
  // records after it are all the stream's.
  if (role == Role::kClient) {
    // (0 is success here.)
    if (SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(kSealedProtocol.data()),
                                kSealedProtocol.size()) != 0) {
      return absl::InvalidArgumentError("TLS: " + OpenSslErrors());
    }
  } else {
    SSL_CTX_set_alpn_select_cb(ctx, SelectSealedProtocol, nullptr);
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  auto load = [](const std::string& pem, auto reader) {
    BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
    auto* value = reader(bio, nullptr, nullptr, nullptr);
    BIO_free(bio);
    return value;
  };
  // Every certificate of the CA file is trusted.
  BIO* bio = BIO_new_mem_buf(security.ca_pem().data(), static_cast<int>(security.ca_pem().size()));
  int trusted = 0;
  while (X509* ca = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), ca);
    X509_free(ca);
    ++trusted;
  }
  BIO_free(bio);
  ERR_clear_error();  // the loop ends on a "no start line" error
  X509* cert = load(security.own_pem().certificate, PEM_read_bio_X509);
  EVP_PKEY* key = load(security.own_pem().private_key, PEM_read_bio_PrivateKey);
  const bool ok = trusted > 0 && cert != nullptr && key != nullptr &&
                  SSL_CTX_use_certificate(ctx, cert) == 1 &&
                  SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  if (cert != nullptr) X509_free(cert);
  if (key != nullptr) EVP_PKEY_free(key);
  if (!ok) return absl::InvalidArgumentError("TLS certificates do not load: " + OpenSslErrors());
  return out;
}

BulkTlsContext::~BulkTlsContext() { SSL_CTX_free(static_cast<SSL_CTX*>(ctx_)); }

std::unique_ptr<BulkStream> BulkStream::Plain(Socket socket) {
  return std::make_unique<PlainStream>(std::move(socket));
}

std::unique_ptr<BulkStream> BulkStream::Tls(Socket socket,
                                            std::shared_ptr<const BulkTlsContext> tls,
                                            const std::string& host) {
  return std::make_unique<TlsStream>(std::move(socket), std::move(tls), host);
}

absl::Status BulkStream::ReadAll(void* data, size_t size, SteadyTime deadline,
                                 absl::string_view what) {
  iovec piece{data, size};
  return ReadAll(std::span<iovec>(&piece, 1), deadline, what);
}

bool BulkStream::HungUpWithoutAWord(SteadyTime deadline) const {
  absl::StatusOr<bool> readable = psflow::WaitReadable(socket_, deadline);
  if (!readable.ok() || !*readable) return false;
  char byte;
  // A peek takes nothing, descriptors passed with the first bytes (shared memory's) included.
  const ssize_t n = recv(socket_.fd(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

}  // namespace psflow
