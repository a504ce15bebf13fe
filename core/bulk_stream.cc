#include "core/bulk_stream.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#include <algorithm>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

// The oldest OpenSSL error of this thread, as text (and the queue cleared).
std::string SslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (out.empty()) out = buf;
  }
  return out.empty() ? "no detail" : out;
}

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
    pending_.reserve(kBatch + kBatch / 8);
    sending_.reserve(kBatch + kBatch / 8);
  }
  ~TlsStream() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
  }

  absl::Status Handshake(SteadyTime deadline) override {
    if (ssl_ == nullptr) return absl::UnavailableError("TLS: " + SslErrors());
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
    std::lock_guard sending(send_mu_);
    for (;;) {
      int rc, err = SSL_ERROR_NONE;
      {
        std::lock_guard lock(mu_);
        ERR_clear_error();
        rc = client ? SSL_connect(ssl_) : SSL_accept(ssl_);
        if (rc != 1) err = SSL_get_error(ssl_, rc);
        sending_.swap(pending_);
      }
      // What the step wrote goes out before its failure is judged: an alert tells the peer why.
      const absl::Status sent = SendTaken(deadline, "TLS handshake");
      if (rc == 1) return sent;
      if (err != SSL_ERROR_WANT_READ) {
        const long verify = SSL_get_verify_result(ssl_);
        std::string why = SslErrors();
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

  // Encrypts up to kBatch bytes at a time under the lock, then sends those records outside it
  // (with any record a read made meanwhile, in order): one send per batch, not per 16 KiB record,
  // and the reading thread is never held up by this one's system calls.
  absl::Status WriteAll(std::span<iovec> pieces, SteadyTime deadline,
                        absl::string_view what) override {
    std::lock_guard sending(send_mu_);
    for (const iovec& piece : pieces) {
      const char* p = static_cast<const char*>(piece.iov_base);
      size_t left = piece.iov_len;
      while (left > 0) {
        const int size = static_cast<int>(std::min(left, kBatch));
        int n;
        {
          std::lock_guard lock(mu_);
          ERR_clear_error();
          n = SSL_write(ssl_, p, size);  // the sink never blocks: all of it, or an error
          sending_.swap(pending_);
        }
        if (absl::Status s = SendTaken(deadline, what); !s.ok()) return s;
        if (n <= 0) return absl::UnavailableError(absl::StrCat(what, ": TLS: ", SslErrors()));
        p += n;
        left -= static_cast<size_t>(n);
      }
    }
    return absl::OkStatus();
  }

  absl::Status ReadAll(std::span<iovec> pieces, SteadyTime deadline,
                       absl::string_view what) override {
    return Read(pieces, deadline, what, nullptr);
  }

  absl::StatusOr<bool> ReadAllOrEnd(void* data, size_t size, SteadyTime deadline,
                                    absl::string_view what) override {
    iovec piece{data, size};
    bool ended = false;
    absl::Status s = Read(std::span<iovec>(&piece, 1), deadline, what, &ended);
    if (!s.ok()) return s;
    return !ended;
  }

  absl::StatusOr<bool> WaitReadable(SteadyTime deadline) override {
    {
      std::lock_guard lock(mu_);
      if (SSL_has_pending(ssl_) == 1) return true;  // read ahead, not yet decrypted too
    }
    return psflow::WaitReadable(socket_, deadline);
  }

 private:
  // Sends the records taken from `pending_` (in `sending_`), by `deadline`. Under send_mu_.
  absl::Status SendTaken(SteadyTime deadline, absl::string_view what) {
    if (sending_.empty()) return absl::OkStatus();
    iovec all{sending_.data(), sending_.size()};
    absl::Status s = psflow::WriteAll(socket_, std::span<iovec>(&all, 1), deadline, what);
    sending_.clear();
    return s;
  }

  // Sends, within 100 ms, what OpenSSL wrote while reading: after a read fails, the alert that
  // tells the peer why. Not when a write is under way (it sends it with its next batch). (A
  // KeyUpdate's answer also waits for the next write: psflow's peers never ask for one.)
  void SendWhatAReadWrote() {
    std::unique_lock sending(send_mu_, std::try_to_lock);
    if (!sending.owns_lock()) return;
    {
      std::lock_guard lock(mu_);
      sending_.swap(pending_);
    }
    SendTaken(SteadyTime::clock::now() + std::chrono::milliseconds(100), "TLS alert").IgnoreError();
  }

  // Reads every byte of `pieces` (SSL_read), waiting for the socket as OpenSSL asks. `ended` (when
  // not null): set, with OK, when the peer closed before the first byte.
  absl::Status Read(std::span<iovec> pieces, SteadyTime deadline, absl::string_view what,
                    bool* ended) {
    const size_t total = TotalBytes(pieces);
    size_t done = 0;
    for (const iovec& piece : pieces) {
      char* p = static_cast<char*>(piece.iov_base);
      size_t left = piece.iov_len;
      while (left > 0) {
        int n, err = 0;
        {
          std::lock_guard lock(mu_);
          ERR_clear_error();
          n = SSL_read(ssl_, p, static_cast<int>(std::min<size_t>(left, 1 << 30)));
          if (n <= 0) err = SSL_get_error(ssl_, n);
        }
        if (n > 0) {
          p += n;
          left -= static_cast<size_t>(n);
          done += static_cast<size_t>(n);
          continue;
        }
        if (Closed(err) && done == 0 && ended != nullptr) {
          *ended = true;
          return absl::OkStatus();
        }
        if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) SendWhatAReadWrote();
        if (absl::Status s = Wait(err, deadline, what, total - done); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  // After an SSL call wants the socket: waits for it, or the error.
  absl::Status Wait(int err, SteadyTime deadline, absl::string_view what, size_t left) {
    if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
      absl::StatusOr<bool> ready =
          WaitFor(socket_, err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, deadline, what);
      if (!ready.ok()) return ready.status();
      if (!*ready) {
        return absl::DeadlineExceededError(
            absl::StrCat(what, ": not all through by the deadline (", left, " bytes to go)"));
      }
      return absl::OkStatus();
    }
    if (Closed(err)) {
      return absl::UnavailableError(
          absl::StrCat(what, ": connection closed with ", left, " bytes to go"));
    }
    return absl::UnavailableError(absl::StrCat(what, ": TLS: ", SslErrors()));
  }

  // Plaintext bytes per SSL_write: 16 records of 16 KiB.
  static constexpr size_t kBatch = 256 << 10;

  std::shared_ptr<const BulkTlsContext> tls_context_;
  const std::string host_;
  std::mutex mu_;  // serializes every call into ssl_, and guards pending_
  SSL* ssl_ = nullptr;
  std::vector<char> pending_;  // records OpenSSL wrote, not yet taken to send
  std::mutex send_mu_;         // one sender at a time, so records go out in order
  std::vector<char> sending_;  // records being sent (under send_mu_)
};

}  // namespace

absl::StatusOr<std::shared_ptr<const BulkTlsContext>> BulkTlsContext::Make(
    const TransportSecurity& security, Role role) {
  if (!security.tls()) return absl::InvalidArgumentError("TLS context without TLS settings");
  // OpenSSL never writes to the socket (its records go to the stream's sink, which sends them
  // with MSG_NOSIGNAL), so a peer that closed costs an error, never a SIGPIPE.
  SSL_CTX* ctx = SSL_CTX_new(role == Role::kClient ? TLS_client_method() : TLS_server_method());
  if (ctx == nullptr) return absl::InvalidArgumentError("TLS: " + SslErrors());
  std::shared_ptr<const BulkTlsContext> out(new BulkTlsContext(ctx, role));
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_num_tickets(ctx, 0);
  // AES-128-GCM first: the cheapest of TLS 1.3's ciphers where the CPU has AES instructions.
  SSL_CTX_set_ciphersuites(
      ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
  // A peer that closes without close_notify reads as a close: every bulk message says its
  // length, so a cut one is still found ("closed with N bytes to go").
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  // No SSL_MODE_ENABLE_PARTIAL_WRITE: with it SSL_write returns after each record, and the
  // stream's batches of records (TlsStream::WriteAll) would be one record each.
  // Read several records per recv (without it, two recvs per 16 KiB record: header, then body).
  SSL_CTX_set_read_ahead(ctx, 1);
  SSL_CTX_set_default_read_buffer_len(ctx, 256 << 10);
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
  if (!ok) return absl::InvalidArgumentError("TLS certificates do not load: " + SslErrors());
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

}  // namespace psflow
