#include "worker/bulk_calls.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/tsan_annotations.h"
#include "worker/bulk_link.h"

namespace psflow {

int64_t BulkCall::SetRequest(std::span<const std::span<const float>> runs, WireType type) {
  const std::span<const std::byte> head = header.With(varying);
  pieces_.clear();
  pieces_.push_back({const_cast<std::byte*>(head.data()), head.size()});
  size_t elements = 0;
  for (const auto& run : runs) elements += run.size();
  if (type == WireType::kFloat32) {
    for (const auto& run : runs) {
      // Only read (iovec takes a mutable pointer).
      if (!run.empty()) pieces_.push_back({const_cast<float*>(run.data()), run.size_bytes()});
    }
  } else if (elements > 0) {
    if (wire_.size() < elements * WireBytes(type)) wire_.resize(elements * WireBytes(type));
    std::byte* out = wire_.data();
    for (const auto& run : runs) {
      EncodeWire(run, type, out);
      out += run.size() * WireBytes(type);
    }
    pieces_.push_back({wire_.data(), elements * WireBytes(type)});
  }
  request_bytes_ = 0;
  for (const iovec& piece : pieces_) request_bytes_ += piece.iov_len;
  return static_cast<int64_t>(elements * WireBytes(type));
}

void BulkCall::BuildGrpcRequest() {
  slices_.clear();
  for (const iovec& piece : pieces_) {
    slices_.emplace_back(piece.iov_base, piece.iov_len, grpc::Slice::STATIC_SLICE);
  }
  request = grpc::ByteBuffer(slices_.data(), slices_.size());
}

std::byte* BulkCall::ReplyBuffer(size_t n) {
  if (reply_bytes_.size() < n) reply_bytes_.resize(n);  // keeps what it held
  reply_size_ = n;
  return reply_bytes_.data();
}

absl::Status PsCallStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  if (status.error_code() == grpc::StatusCode::CANCELLED) {
    return absl::UnavailableError(
        absl::StrCat("the ps cancelled the call (stopping?): ", status.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::Status BulkCall::DecodeReply(proto::TransferReply* reply) {
  if (!status.ok()) return PsCallStatus(status);
  reply_source.Clear();
  if (via_link) {
    reply_source.Add({reply_bytes_.data(), reply_size_});
  } else {
    if (!response.Dump(&reply_slices_).ok()) return absl::InternalError("unreadable reply");
    for (const grpc::Slice& s : reply_slices_) {
      reply_source.Add({reinterpret_cast<const std::byte*>(s.begin()), s.size()});
    }
  }
  return DecodeFrameHeader(reply_source, reply);
}

CallWindow::CallWindow(size_t connections, size_t window, size_t max_calls)
    : window_(window), queues_(connections), links_(connections, nullptr) {
  Reserve(max_calls);
}

CallWindow::~CallWindow() { Wait(); }

void CallWindow::Reserve(size_t max_calls) {
  std::lock_guard lock(mu_);
  for (Queue& q : queues_) q.calls.reserve(max_calls);
}

void CallWindow::Route(size_t connection, BulkLink* link) { links_[connection] = link; }

void CallWindow::Add(BulkCall* call, std::chrono::system_clock::time_point deadline) {
  call->via_link = links_[call->connection] != nullptr;
  call->payload_placed = false;
  if (call->via_link) {
    call->deadline_ = deadline;
  } else {
    call->context.emplace();
    call->context->set_deadline(deadline);
    call->BuildGrpcRequest();
  }
  {
    std::lock_guard lock(mu_);
    ++pending_;
    Queue& q = queues_[call->connection];
    if (q.in_flight >= window_) {
      q.calls.push_back(call);
      return;
    }
    ++q.in_flight;
  }
  Start(call);
}

void CallWindow::Start(BulkCall* call) {
  if (std::optional<grpc::Status> failed = Launch(call)) Done(call, *std::move(failed));
}

std::optional<grpc::Status> CallWindow::Launch(BulkCall* call) {
  if (call->via_link) {
    return links_[call->connection]->Start(
        call, call->kind, call->deadline_,
        [this, call](grpc::Status status) { Done(call, std::move(status)); });
  }
  // gRPC runs the callback after UnaryCall has taken the call (libgrpc orders the two).
  TsanRelease(call);
  call->stub->UnaryCall(&*call->context, *call->method, grpc::StubOptions(), &call->request,
                        &call->response, [this, call](grpc::Status status) {
                          TsanAcquire(call);
                          Done(call, std::move(status));
                        });
  return std::nullopt;
}

void CallWindow::Done(BulkCall* call, grpc::Status status) {
  // A loop, not recursion: a successor that fails as it starts (a broken link) is completed here,
  // however many are queued.
  for (;;) {
    call->status = std::move(status);
    BulkCall* next = nullptr;
    {
      std::lock_guard lock(mu_);
      Queue& q = queues_[call->connection];
      if (q.head < q.calls.size()) {
        next = q.calls[q.head++];
      } else {
        --q.in_flight;
        q.calls.clear();  // keeps its capacity
        q.head = 0;
      }
    }
    // The successor goes before this call's observer runs.
    std::optional<grpc::Status> failed;
    if (next != nullptr) failed = Launch(next);
    if (call->observer != nullptr) call->observer->Completed(*call);
    {
      std::lock_guard lock(mu_);
      // Once pending_ reaches zero the waiter may return and destroy this window: nothing after
      // the lock is released touches it (a failed successor is still pending, so it is not zero
      // then).
      if (--pending_ == 0) done_.notify_all();
    }
    if (!failed.has_value()) return;
    call = next;
    status = *std::move(failed);
  }
}

void CallWindow::Wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
}

}  // namespace psflow
