#include "ps/bulk_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <filesystem>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/bulk_wire.h"
#include "core/byte_source.h"
#include "core/chunk_plan.h"
#include "core/frame.h"
#include "core/log.h"
#include "core/shm_stream.h"
#include "core/status_macros.h"
#include "core/wire_type.h"
#include "ps/parked_pull.h"
#include "ps/versioned_values.h"

namespace psflow {
namespace {

std::string PeerName(const Socket& s) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "a peer";
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
    port = ntohs(a->sin6_port);
  }
  return absl::StrCat(host, ":", port);
}

// Waiting for the next request of an idle connection has no deadline (a worker between steps,
// or one whose job is long): Stop ends it, and TCP keep-alive a peer that vanished (AcceptTcp).
constexpr auto kForever = std::chrono::hours(24 * 365);

// Requests of one connection read and not yet answered (parked, or their reply queued): the
// reader takes no more until one is answered, so a peer that sends requests without reading the
// replies holds at most this many replies' memory (PsClient keeps 4 in flight per connection).
constexpr int kMaxUnanswered = 16;

// A request's body buffer grows as its bytes arrive, from this much: a peer that announces a
// large message and sends nothing more holds no more than this.
constexpr uint64_t kFirstBodyPiece = 1 << 20;

}  // namespace

class BulkServer::Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(PsState& state, PsMetrics* metrics, std::string peer,
             std::unique_ptr<BulkStream> stream, std::chrono::milliseconds stall_timeout)
      : state_(state),
        metrics_(metrics),
        peer_(std::move(peer)),
        stream_(std::move(stream)),
        stall_timeout_(stall_timeout) {}

  void Begin() {
    reader_ = std::thread([self = shared_from_this()] { self->ReadLoop(); });
    writer_ = std::thread([self = shared_from_this()] { self->WriteLoop(); });
  }
  // Ends the connection: no more replies, both threads return.
  void End() {
    std::deque<std::unique_ptr<Reply>> dropped;
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      dropped.swap(queue_);
    }
    ready_.notify_all();
    stream_->Shutdown();
  }
  bool finished() const { return reader_done_.load() && writer_done_.load(); }
  void Join() {
    if (reader_.joinable()) reader_.join();
    if (writer_.joinable()) writer_.join();
  }

 private:
  // A reply waiting for the writer: prefix, frame header (or error body), then the payload's
  // pieces, pinned blocks (unpinned when the reply is gone, written or dropped) or `owned`.
  struct Reply {
    std::array<std::byte, kBulkPrefixBytes> prefix{};
    std::string head;
    std::vector<iovec> payload;
    std::vector<void*> pins;
    std::unique_ptr<std::byte[]> owned;
    Reply() = default;
    Reply(const Reply&) = delete;
    Reply& operator=(const Reply&) = delete;
    ~Reply() {
      for (void* pin : pins) VersionedValues::Unpin(pin);
    }
    uint64_t bytes() const {
      uint64_t n = head.size();
      for (const iovec& v : payload) n += v.iov_len;
      return n;
    }
  };

  static std::unique_ptr<Reply> FrameReply(uint32_t id, const proto::TransferReply& reply) {
    auto r = std::make_unique<Reply>();
    r->head = EncodeFrameHeader(reply);
    r->prefix = EncodeBulkPrefix({BulkKind::kReply, id, r->bytes()});
    return r;
  }
  static std::unique_ptr<Reply> ErrorReply(uint32_t id, const absl::Status& s) {
    auto r = std::make_unique<Reply>();
    r->head = EncodeBulkError(s);
    r->prefix = EncodeBulkPrefix({BulkKind::kError, id, r->head.size()});
    return r;
  }

  void Enqueue(std::unique_ptr<Reply> reply) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;  // dropped here (unpinned), outside the lock
      queue_.push_back(std::move(reply));
    }
    ready_.notify_all();
  }

  // Waits until the connection may read another request; false once it is closed.
  bool WaitForRoom() {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [this] { return closed_ || unanswered_ < kMaxUnanswered; });
    if (closed_) return false;
    ++unanswered_;
    return true;
  }

  void ReadLoop() {
    ReadRequests();
    End();
    reader_done_ = true;
  }

  void ReadRequests() {
    // A connect and a hang-up is a probe, not a failed client: nothing to warn about.
    if (stream_->HungUpWithoutAWord(StallDeadline())) return;
    if (absl::Status s = stream_->Handshake(StallDeadline()); !s.ok()) {
      PSFLOW_LOG(WARNING) << "bulk connection from " << peer_ << " closed: " << s.message();
      return;
    }
    std::array<char, kBulkHello.size()> hello{};
    if (absl::Status s = stream_->ReadAll(hello.data(), hello.size(), StallDeadline(), "hello");
        !s.ok() || hello != kBulkHello) {
      PSFLOW_LOG(WARNING) << "bulk connection from " << peer_
                          << " closed: not a psflow bulk client ("
                          << (s.ok() ? "bad hello" : s.message()) << ")";
      return;
    }
    iovec answer{const_cast<char*>(kBulkHello.data()), kBulkHello.size()};
    if (!stream_->WriteAll(std::span<iovec>(&answer, 1), StallDeadline(), "hello").ok()) return;
    std::vector<std::byte> storage;
    for (;;) {
      if (!WaitForRoom()) return;
      std::array<std::byte, kBulkPrefixBytes> prefix{};
      absl::StatusOr<bool> readable =
          stream_->WaitReadable(std::chrono::steady_clock::now() + kForever);
      if (!readable.ok() || !*readable) return;
      // A peer that closes between requests is done, not broken. The whole message is due
      // within stall_timeout of its first byte.
      const SteadyTime deadline = StallDeadline();
      absl::StatusOr<bool> more =
          stream_->ReadAllOrEnd(prefix.data(), prefix.size(), deadline, "request");
      if (!more.ok()) Drop(more.status());
      if (!more.ok() || !*more) return;
      absl::StatusOr<BulkPrefix> p =
          DecodeBulkPrefix(prefix, BulkReader::kPs, static_cast<uint64_t>(kMaxBulkMessageBytes));
      if (!p.ok()) {
        Drop(p.status());
        return;
      }
      absl::StatusOr<std::span<const std::byte>> body = ReadBody(p->length, deadline, storage);
      if (!body.ok()) {
        Drop(body.status());
        return;
      }
      Handle(*p, *body);
    }
  }

  // Reads a request's body into `storage` with its frame's payload 64-byte aligned, so that the
  // update reads float32 gradients in place (ForEachFloatBlock): the frame header's length
  // first, then the rest, `storage` growing (from kFirstBodyPiece, doubling) only as bytes come.
  // A body whose header length does not fit is read whole, unaligned; its request gets the
  // frame's error.
  absl::StatusOr<std::span<const std::byte>> ReadBody(uint64_t length, SteadyTime deadline,
                                                      std::vector<std::byte>& storage) {
    constexpr size_t kAlign = 64;
    size_t pad = 0;  // after the aligned start, so that the frame's payload is aligned
    const auto offset = [&] {
      const auto base = reinterpret_cast<uintptr_t>(storage.data());
      return (kAlign - base % kAlign) % kAlign + pad;
    };
    // Room for `bytes` of the body, keeping the `read` bytes already there.
    const auto room = [&](uint64_t bytes, uint64_t read) {
      if (storage.size() >= bytes + 2 * kAlign) return;
      const size_t before = offset();
      storage.resize(bytes + 2 * kAlign);
      if (const size_t after = offset(); after != before && read > 0) {
        std::memmove(storage.data() + after, storage.data() + before, read);
      }
    };
    std::array<std::byte, 4> first{};
    uint64_t read = 0;
    if (length >= 4) {
      RETURN_IF_ERROR(stream_->ReadAll(first.data(), 4, deadline, "request body"));
      if (absl::StatusOr<uint32_t> n = FrameHeaderBytes(first, length); n.ok()) {
        pad = (kAlign - (4 + *n) % kAlign) % kAlign;
      }
      read = 4;
    }
    room(std::min(length, kFirstBodyPiece), 0);
    std::memcpy(storage.data() + offset(), first.data(), read);
    while (read < length) {
      const uint64_t upto = storage.size() >= length + 2 * kAlign
                                ? length
                                : std::min(length, std::max(2 * read, kFirstBodyPiece));
      room(upto, read);
      RETURN_IF_ERROR(stream_->ReadAll(storage.data() + offset() + read, upto - read, deadline,
                                       "request body"));
      read = upto;
    }
    return std::span<const std::byte>(storage.data() + offset(), length);
  }

  void Drop(const absl::Status& why) {
    bool closed;
    {
      std::lock_guard lock(mu_);
      closed = closed_;
    }
    if (!closed)
      PSFLOW_LOG(WARNING) << "bulk connection from " << peer_ << " dropped: " << why.message();
  }

  void Handle(const BulkPrefix& p, std::span<const std::byte> body) {
    ByteSource frame({body});
    if (p.kind == BulkKind::kPush) {
      absl::StatusOr<proto::TransferReply> reply = state_.Push(frame);
      Enqueue(reply.ok() ? FrameReply(p.call_id, *reply) : ErrorReply(p.call_id, reply.status()));
      return;
    }
    auto header = std::make_shared<proto::TransferHeader>();
    absl::StatusOr<int64_t> payload = state_.CheckPull(frame, header.get());
    if (!payload.ok()) {
      Enqueue(ErrorReply(p.call_id, payload.status()));
      return;
    }
    ParkCheckedPull(state_, metrics_, header,
                    [self = shared_from_this(), id = p.call_id, header, bytes = *payload](
                        PullOutcome outcome) { self->AnswerPull(id, *header, bytes, outcome); });
  }

  void AnswerPull(uint32_t id, const proto::TransferHeader& header, int64_t payload,
                  PullOutcome outcome) {
    if (outcome == PullOutcome::kStopping) {
      Enqueue(ErrorReply(id, absl::UnavailableError(kStoppingMessage)));
      return;
    }
    if (outcome == PullOutcome::kTimedOut) {
      Enqueue(FrameReply(id, TimedOutReply(state_)));
      return;
    }
    auto r = std::make_unique<Reply>();
    proto::TransferReply reply;
    if (WireTypeOf(header.wire_dtype()).value_or(WireType::kFloat32) == WireType::kFloat32) {
      reply = state_.PinPull(header, [&](const VersionedValues::Pin& pin) {
        r->pins.push_back(pin.handle);
        r->payload.push_back({const_cast<float*>(pin.values.data()), pin.values.size_bytes()});
      });
    } else {
      r->owned.reset(new std::byte[static_cast<size_t>(payload)]);
      reply = state_.FillPull(header, r->owned.get());
      r->payload.push_back({r->owned.get(), static_cast<size_t>(payload)});
    }
    r->head = EncodeFrameHeader(reply);
    r->prefix = EncodeBulkPrefix({BulkKind::kReply, id, r->bytes()});
    CountPull(metrics_, payload);
    Enqueue(std::move(r));
  }

  void WriteLoop() {
    std::vector<iovec> pieces;
    for (;;) {
      std::unique_ptr<Reply> r;
      {
        std::unique_lock lock(mu_);
        ready_.wait(lock, [this] { return closed_ || !queue_.empty(); });
        if (closed_) break;
        r = std::move(queue_.front());
        queue_.pop_front();
      }
      pieces.clear();
      pieces.push_back({r->prefix.data(), r->prefix.size()});
      pieces.push_back({r->head.data(), r->head.size()});
      pieces.insert(pieces.end(), r->payload.begin(), r->payload.end());
      if (absl::Status s = stream_->WriteAll(pieces, StallDeadline(), "reply"); !s.ok()) {
        Drop(s);
        End();
        break;
      }
      r.reset();  // unpinned or freed before the reader may take another request
      {
        std::lock_guard lock(mu_);
        --unanswered_;
      }
      ready_.notify_all();
    }
    writer_done_ = true;
  }

  SteadyTime StallDeadline() const { return std::chrono::steady_clock::now() + stall_timeout_; }

  PsState& state_;
  PsMetrics* const metrics_;
  const std::string peer_;
  const std::unique_ptr<BulkStream> stream_;
  const std::chrono::milliseconds stall_timeout_;
  std::mutex mu_;
  std::condition_variable ready_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::unique_ptr<Reply>> queue_ ABSL_GUARDED_BY(mu_);
  int unanswered_ ABSL_GUARDED_BY(mu_) = 0;  // requests read whose reply is not written yet
  std::thread reader_;
  std::thread writer_;
  std::atomic<bool> reader_done_{false};
  std::atomic<bool> writer_done_{false};
};

absl::StatusOr<std::unique_ptr<BulkServer>> BulkServer::Start(PsState& state, PsMetrics* metrics,
                                                              const Options& options) {
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_bulk_connections must be at least 1, got ", options.max_connections));
  }
  int bound = 0;
  absl::StatusOr<Socket> listener = ListenTcp(options.bind_address, options.port, &bound);
  if (!listener.ok()) return listener.status();
  Socket local;
  std::string token;
  std::string local_socket = options.local_socket;
  if (!local_socket.empty() && local_socket[0] != '@') {
    local_socket = std::filesystem::absolute(local_socket).string();  // as workers will see it
  }
  if (!local_socket.empty()) {
    absl::StatusOr<Socket> listening = ListenUnix(local_socket);
    if (!listening.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("the shared-memory socket ", local_socket,
                                                        ": ", listening.status().message()));
    }
    local = *std::move(listening);
    // 128 random bits, as text: a worker shows it learned them over the job's gRPC.
    std::random_device random;
    for (int i = 0; i < 4; ++i) absl::StrAppend(&token, absl::Hex(random(), absl::kZeroPad8));
  }
  Options resolved = options;
  resolved.local_socket = std::move(local_socket);
  std::unique_ptr<BulkServer> server(new BulkServer(state, metrics, *std::move(listener), bound,
                                                    std::move(local), std::move(token), resolved));
  server->acceptor_ = std::thread([s = server.get()] { s->AcceptLoop(s->listener_, false); });
  if (server->local_listener_.valid()) {
    server->local_acceptor_ =
        std::thread([s = server.get()] { s->AcceptLoop(s->local_listener_, true); });
  }
  return server;
}

BulkServer::BulkServer(PsState& state, PsMetrics* metrics, Socket listener, int port,
                       Socket local_listener, std::string local_token, const Options& options)
    : state_(state),
      metrics_(metrics),
      listener_(std::move(listener)),
      port_(port),
      local_listener_(std::move(local_listener)),
      local_socket_(local_listener_.valid() ? options.local_socket : ""),
      local_token_(std::move(local_token)),
      stall_timeout_(options.stall_timeout),
      tls_(options.tls),
      max_connections_(static_cast<size_t>(options.max_connections)) {}

BulkServer::~BulkServer() {
  Stop();
  if (acceptor_.joinable()) acceptor_.join();
  if (local_acceptor_.joinable()) local_acceptor_.join();
  if (!local_socket_.empty() && local_socket_[0] != '@') unlink(local_socket_.c_str());
  std::vector<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(mu_);
    connections.swap(connections_);
  }
  for (auto& c : connections) c->Join();
}

void BulkServer::Stop() {
  std::vector<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    connections = connections_;
  }
  stop_cv_.notify_all();
  listener_.Shutdown();
  local_listener_.Shutdown();
  for (auto& c : connections) c->End();
}

void BulkServer::AcceptLoop(const Socket& listener, bool local) {
  for (;;) {
    absl::StatusOr<Socket> socket = local ? AcceptUnix(listener) : AcceptTcp(listener);
    std::unique_lock lock(mu_);
    if (stopped_) return;
    if (!socket.ok()) {
      // Out of descriptors or memory, or a network error accept(2) passes on: try again shortly
      // (the connection waits in the backlog), saying so once per run of failures.
      if (!accept_failing_) {
        PSFLOW_LOG(WARNING) << "bulk channel: " << socket.status().message()
                            << "; retrying every 100 ms";
      }
      accept_failing_ = true;
      stop_cv_.wait_for(lock, std::chrono::milliseconds(100));
      continue;
    }
    accept_failing_ = false;
    // Connections whose peer went away are joined here, so a long job does not keep them.
    for (auto it = connections_.begin(); it != connections_.end();) {
      if ((*it)->finished()) {
        (*it)->Join();
        it = connections_.erase(it);
      } else {
        ++it;
      }
    }
    if (connections_.size() >= max_connections_) {
      if (!refusing_) {
        PSFLOW_LOG(WARNING) << "bulk channel: " << connections_.size()
                            << " connections already (--max_bulk_connections): closing new ones "
                               "until some end; their workers use gRPC";
      }
      refusing_ = true;
      continue;  // the socket closes as it goes out of scope
    }
    refusing_ = false;
    std::string peer = local ? "a worker on this host (shared memory)" : PeerName(*socket);
    std::unique_ptr<BulkStream> stream =
        local             ? MakeShmStream(*std::move(socket), ShmSide::kServer, local_token_)
        : tls_ != nullptr ? BulkStream::Tls(*std::move(socket), tls_, "")
                          : BulkStream::Plain(*std::move(socket));
    auto c = std::make_shared<Connection>(state_, metrics_, std::move(peer), std::move(stream),
                                          stall_timeout_);
    accepted_.fetch_add(1);  // before Begin: counted by the time the peer gets its hello
    if (local) accepted_local_.fetch_add(1);
    c->Begin();
    connections_.push_back(std::move(c));
  }
}

}  // namespace psflow
