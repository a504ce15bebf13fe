#include "worker/bulk_link.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/chunk_plan.h"
#include "core/frame.h"
#include "core/shm_stream.h"
#include "core/status_macros.h"
#include "worker/bulk_calls.h"

namespace psflow {
namespace {

using Clock = std::chrono::steady_clock;

// How often the reader looks at the calls' deadlines while nothing arrives.
constexpr auto kDeadlineTick = std::chrono::milliseconds(200);
// How long a prefix that arrives with no call in flight may take.
constexpr auto kIdleReplyTimeout = std::chrono::seconds(10);

SteadyTime SteadyDeadline(std::chrono::system_clock::time_point deadline) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(deadline - std::chrono::system_clock::now());
}

// What the link's failure means for a call: a ps that broke or spoke garbage, or one that did
// not answer by a deadline.
std::string Cause(const std::string& peer, const absl::Status& s) {
  return absl::StrCat("bulk connection to ", peer, ": ", s.message());
}

}  // namespace

absl::StatusOr<std::unique_ptr<BulkLink>> BulkLink::Connect(
    const std::string& host, int port, SteadyTime deadline,
    std::shared_ptr<const BulkTlsContext> tls) {
  absl::StatusOr<Socket> socket = ConnectTcp(host, port, deadline);
  if (!socket.ok()) return socket.status();
  return Open(tls != nullptr ? BulkStream::Tls(*std::move(socket), std::move(tls), host)
                             : BulkStream::Plain(*std::move(socket)),
              absl::StrCat(host, ":", port), deadline);
}

absl::StatusOr<std::unique_ptr<BulkLink>> BulkLink::ConnectLocal(const std::string& socket_path,
                                                                 const std::string& token,
                                                                 SteadyTime deadline) {
  absl::StatusOr<Socket> socket = ConnectUnix(socket_path);
  if (!socket.ok()) return socket.status();
  return Open(MakeShmStream(*std::move(socket), ShmSide::kClient, token),
              absl::StrCat("unix:", socket_path, " (shared memory)"), deadline);
}

absl::StatusOr<std::unique_ptr<BulkLink>> BulkLink::Open(std::unique_ptr<BulkStream> stream,
                                                         const std::string& peer,
                                                         SteadyTime deadline) {
  const auto failed = [&peer](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat("bulk connection to ", peer, ": ", s.message()));
  };
  if (absl::Status s = stream->Handshake(deadline); !s.ok()) return failed(s);
  iovec hello{const_cast<char*>(kBulkHello.data()), kBulkHello.size()};
  if (absl::Status s = stream->WriteAll(std::span<iovec>(&hello, 1), deadline, "hello"); !s.ok()) {
    return failed(s);
  }
  std::array<char, kBulkHello.size()> answer{};
  if (absl::Status s = stream->ReadAll(answer.data(), answer.size(), deadline, "hello");
      !s.ok() || answer != kBulkHello) {
    return absl::UnavailableError(absl::StrCat(
        "bulk connection to ", peer, ": ",
        s.ok() ? "the answer to the hello is not a psflow ps's (is this its bulk port?)"
               : s.message()));
  }
  std::unique_ptr<BulkLink> link(new BulkLink(std::move(stream), peer));
  link->writer_ = std::thread([l = link.get()] { l->WriteLoop(); });
  link->reader_ = std::thread([l = link.get()] { l->ReadLoop(); });
  return link;
}

BulkLink::BulkLink(std::unique_ptr<BulkStream> stream, std::string peer)
    : stream_(std::move(stream)), peer_(std::move(peer)) {}

BulkLink::~BulkLink() {
  Fail(absl::StrCat("bulk connection to ", peer_, ": closed by this worker"));
  to_send_.notify_all();
  writer_.join();
  reader_.join();
}

bool BulkLink::broken() const {
  std::lock_guard lock(mu_);
  return broken_;
}

std::optional<grpc::Status> BulkLink::Start(BulkCall* call, BulkKind kind,
                                            std::chrono::system_clock::time_point deadline,
                                            Completion done) {
  std::unique_lock lock(mu_);
  if (broken_) return failure_;
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<uint32_t>(slots_.size());
    slots_.push_back(std::make_unique<Slot>());
  }
  Slot& slot = *slots_[index];
  slot.generation = (slot.generation + 1) & 0xff;
  slot.call = call;
  slot.done = std::move(done);
  slot.deadline = SteadyDeadline(deadline);
  slot.prefix =
      EncodeBulkPrefix({kind, index | (slot.generation << kIndexBits), call->request_bytes()});
  slot.busy = slot.queued = true;
  slot.writing = slot.reading = slot.finished = false;
  queue_.push_back(index);
  lock.unlock();
  to_send_.notify_one();
  return std::nullopt;
}

bool BulkLink::TakeIfDone(uint32_t id, Completion* done, grpc::Status* result) {
  Slot& slot = *slots_[id];
  if (!slot.busy || !slot.finished || slot.writing || slot.reading) return false;
  *done = std::move(slot.done);
  *result = std::move(slot.result);
  slot.done = nullptr;
  slot.busy = false;
  slot.call = nullptr;
  free_.push_back(id);
  return true;
}

void BulkLink::Fail(const std::string& why, bool deadline) {
  std::vector<Completion> done;
  std::vector<grpc::Status> results;
  {
    std::lock_guard lock(mu_);
    FailLocked(why, deadline, &done, &results);
  }
  to_send_.notify_all();
  stream_->Shutdown();
  for (size_t i = 0; i < done.size(); ++i) done[i](std::move(results[i]));
}

void BulkLink::FailLocked(const std::string& why, bool deadline, std::vector<Completion>* done,
                          std::vector<grpc::Status>* results) {
  if (!broken_) {
    broken_ = true;
    failure_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, why);
  }
  queue_.clear();
  queue_head_ = 0;
  const SteadyTime now = Clock::now();
  for (uint32_t index = 0; index < slots_.size(); ++index) {
    Slot& slot = *slots_[index];
    if (!slot.busy || slot.finished) continue;
    slot.finished = true;
    slot.queued = false;
    slot.result = deadline && slot.deadline <= now
                      ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, why)
                      : failure_;
    Completion d;
    grpc::Status r;
    if (TakeIfDone(index, &d, &r)) {
      done->push_back(std::move(d));
      results->push_back(std::move(r));
    }
  }
}

void BulkLink::WriteLoop() {
  std::vector<iovec> pieces;
  for (;;) {
    uint32_t id;
    SteadyTime deadline;
    {
      std::unique_lock lock(mu_);
      to_send_.wait(lock, [this] { return broken_ || queue_head_ < queue_.size(); });
      if (broken_) return;
      id = queue_[queue_head_++];
      if (queue_head_ == queue_.size()) {
        queue_.clear();  // keeps its capacity
        queue_head_ = 0;
      }
      Slot& slot = *slots_[id];
      slot.queued = false;
      slot.writing = true;
      deadline = slot.deadline;
      pieces.clear();
      pieces.push_back({slot.prefix.data(), slot.prefix.size()});
      const auto request = slot.call->request_pieces();
      pieces.insert(pieces.end(), request.begin(), request.end());
    }
    const absl::Status written = stream_->WriteAll(pieces, deadline, "request");
    if (!written.ok()) Fail(Cause(peer_, written), absl::IsDeadlineExceeded(written));
    Completion done;
    grpc::Status result;
    bool complete;
    {
      std::lock_guard lock(mu_);
      slots_[id]->writing = false;
      complete = TakeIfDone(id, &done, &result);
    }
    if (complete) done(std::move(result));
  }
}

SteadyTime BulkLink::EarliestDeadlineLocked() const {
  SteadyTime earliest = SteadyTime::max();
  for (const auto& slot : slots_) {
    if (slot->busy && !slot->finished) earliest = std::min(earliest, slot->deadline);
  }
  return earliest;
}

void BulkLink::ReadLoop() {
  const absl::Status s = ReadReplies();
  Fail(Cause(peer_, s), absl::IsDeadlineExceeded(s));
}

absl::Status BulkLink::ReadReply(BulkCall& call, uint64_t length, SteadyTime deadline) {
  if (call.observer == nullptr || length < 4) {
    return stream_->ReadAll(call.ReplyBuffer(length), length, deadline, "reply");
  }
  // The frame's header first; then, where the observer has a place for exactly the payload that
  // follows, the payload straight there.
  std::byte* head = call.ReplyBuffer(4);
  RETURN_IF_ERROR(stream_->ReadAll(head, 4, deadline, "reply"));
  absl::StatusOr<uint32_t> header_bytes =
      FrameHeaderBytes(std::span<const std::byte, 4>(head, 4), length);
  if (!header_bytes.ok()) {
    return absl::UnavailableError(
        absl::StrCat("garbage from the ps: ", header_bytes.status().message()));
  }
  const uint64_t payload = length - 4 - *header_bytes;
  const std::span<iovec> targets =
      payload > 0 ? call.observer->PayloadTargets(payload) : std::span<iovec>();
  const uint64_t buffered = targets.empty() ? length : 4 + *header_bytes;
  std::byte* all = call.ReplyBuffer(buffered);  // keeps the 4 bytes read
  RETURN_IF_ERROR(stream_->ReadAll(all + 4, buffered - 4, deadline, "reply"));
  if (targets.empty()) return absl::OkStatus();
  call.payload_placed = true;
  return stream_->ReadAll(targets, deadline, "reply payload");
}

absl::Status BulkLink::ReadReplies() {
  std::array<std::byte, kBulkPrefixBytes> prefix{};
  std::vector<std::byte> error;
  for (;;) {
    SteadyTime earliest;
    {
      std::lock_guard lock(mu_);
      if (broken_) return absl::OkStatus();
      earliest = EarliestDeadlineLocked();
    }
    if (Clock::now() >= earliest) {
      return absl::DeadlineExceededError("no reply from the ps task by the call's deadline");
    }
    absl::StatusOr<bool> readable =
        stream_->WaitReadable(std::min(earliest, Clock::now() + kDeadlineTick));
    if (!readable.ok()) return readable.status();
    if (!*readable) continue;
    {
      // Calls started while this thread waited count too. Bytes with no call in flight are
      // garbage, found out once the prefix is in.
      std::lock_guard lock(mu_);
      earliest = EarliestDeadlineLocked();
    }
    if (earliest == SteadyTime::max()) earliest = Clock::now() + kIdleReplyTimeout;
    absl::StatusOr<bool> more =
        stream_->ReadAllOrEnd(prefix.data(), prefix.size(), earliest, "reply");
    if (!more.ok()) return more.status();
    if (!*more) return absl::UnavailableError("the ps task closed the connection");
    absl::StatusOr<BulkPrefix> p =
        DecodeBulkPrefix(prefix, BulkReader::kWorker, static_cast<uint64_t>(kMaxBulkMessageBytes));
    if (!p.ok()) {
      return absl::UnavailableError(absl::StrCat("garbage from the ps: ", p.status().message()));
    }
    const uint32_t index = p->call_id & ((1u << kIndexBits) - 1);
    BulkCall* call;
    SteadyTime deadline;  // the call's own, for the rest of its reply
    {
      std::lock_guard lock(mu_);
      if (index >= slots_.size() || !slots_[index]->busy || slots_[index]->finished ||
          slots_[index]->queued || slots_[index]->generation != p->call_id >> kIndexBits) {
        return absl::UnavailableError(absl::StrCat("garbage from the ps: a reply to call ",
                                                   p->call_id, ", which is not in flight"));
      }
      slots_[index]->reading = true;
      call = slots_[index]->call;
      deadline = slots_[index]->deadline;
    }
    grpc::Status result;
    absl::Status read;
    if (p->kind == BulkKind::kReply) {
      read = ReadReply(*call, p->length, deadline);
    } else {
      error.resize(p->length);
      read = stream_->ReadAll(error.data(), error.size(), deadline, "error reply");
      if (read.ok()) {
        const absl::Status carried = DecodeBulkError(error);
        result = grpc::Status(static_cast<grpc::StatusCode>(carried.code()),
                              std::string(carried.message()));
      }
    }
    Completion done;
    bool complete;
    {
      std::lock_guard lock(mu_);
      Slot& slot = *slots_[index];
      slot.reading = false;
      if (read.ok() && !slot.finished) {
        slot.finished = true;
        slot.result = std::move(result);
      }
      // Finished already when another thread broke the link meanwhile: then this thread, the
      // last to hold it, completes it.
      complete = TakeIfDone(index, &done, &result);
    }
    if (complete) done(std::move(result));
    if (!read.ok()) return read;  // Fail completes the call if it has not been
  }
}

}  // namespace psflow
