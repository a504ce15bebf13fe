#include "worker/bulk_calls.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/tsan_annotations.h"

namespace psflow {

int64_t BulkCall::SetRequest(std::span<const std::span<const float>> runs, WireType type) {
  const std::span<const std::byte> head = header.With(varying);
  slices_.clear();
  slices_.emplace_back(head.data(), head.size(), grpc::Slice::STATIC_SLICE);
  size_t elements = 0;
  for (const auto& run : runs) elements += run.size();
  if (type == WireType::kFloat32) {
    for (const auto& run : runs) {
      if (!run.empty())
        slices_.emplace_back(run.data(), run.size_bytes(), grpc::Slice::STATIC_SLICE);
    }
  } else if (elements > 0) {
    if (wire_.size() < elements * WireBytes(type)) wire_.resize(elements * WireBytes(type));
    std::byte* out = wire_.data();
    for (const auto& run : runs) {
      EncodeWire(run, type, out);
      out += run.size() * WireBytes(type);
    }
    slices_.emplace_back(wire_.data(), elements * WireBytes(type), grpc::Slice::STATIC_SLICE);
  }
  request = grpc::ByteBuffer(slices_.data(), slices_.size());
  return static_cast<int64_t>(elements * WireBytes(type));
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
  if (!response.Dump(&reply_slices_).ok()) return absl::InternalError("unreadable reply");
  reply_source.Clear();
  for (const grpc::Slice& s : reply_slices_) {
    reply_source.Add({reinterpret_cast<const std::byte*>(s.begin()), s.size()});
  }
  return DecodeFrameHeader(reply_source, reply);
}

CallWindow::CallWindow(size_t connections, size_t window, size_t max_calls)
    : window_(window), queues_(connections) {
  Reserve(max_calls);
}

CallWindow::~CallWindow() { Wait(); }

void CallWindow::Reserve(size_t max_calls) {
  std::lock_guard lock(mu_);
  for (Queue& q : queues_) q.calls.reserve(max_calls);
}

void CallWindow::Add(BulkCall* call, std::chrono::system_clock::time_point deadline) {
  call->context.emplace();
  call->context->set_deadline(deadline);
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
  // gRPC runs the callback after UnaryCall has taken the call (libgrpc orders the two).
  TsanRelease(call);
  call->stub->UnaryCall(&*call->context, *call->method, grpc::StubOptions(), &call->request,
                        &call->response, [this, call](grpc::Status status) {
                          TsanAcquire(call);
                          Done(call, std::move(status));
                        });
}

void CallWindow::Done(BulkCall* call, grpc::Status status) {
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
  if (next != nullptr) Start(next);
  if (call->observer != nullptr) call->observer->Completed(*call);
  std::lock_guard lock(mu_);
  // Once pending_ reaches zero the waiter may return and destroy this window: nothing after the
  // lock is released touches it.
  if (--pending_ == 0) done_.notify_all();
}

void CallWindow::Wait() {
  std::unique_lock lock(mu_);
  done_.wait(lock, [this] { return pending_ == 0; });
}

}  // namespace psflow
