#include "ps/ps_service.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <vector>

#include "core/byte_source.h"
#include "core/chunk_plan.h"
#include "core/frame.h"
#include "core/wire_type.h"
#include "ps/parked_pull.h"
#include "ps/versioned_values.h"

namespace psflow {
namespace {

// What a call parked on a stopping ps gets: the task is going away, as a lost connection is (the
// worker recovers and waits for it to come back).
grpc::Status Stopping() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, kStoppingMessage); }

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

grpc::ServerUnaryReactor* Answer(grpc::CallbackServerContext* context, const absl::Status& s) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpc(s));
  return reactor;
}

}  // namespace

// Chunk-sized buffers for 16-bit pull replies (float32 ones send the partitions' own versions),
// reused: a freshly malloc'ed multi-MiB buffer costs page faults on every call.
class PsService::BufferPool : public std::enable_shared_from_this<BufferPool> {
 public:
  static constexpr size_t kBufferBytes = kChunkBytes;
  static constexpr size_t kMaxIdle = 16;

  // A slice of `bytes` (<= kBufferBytes) bytes whose storage returns to the pool when gRPC
  // releases it; *data points at it.
  grpc::Slice Take(size_t bytes, std::byte** data) {
    std::unique_ptr<std::byte[]> buffer;
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        buffer = std::move(idle_.back());
        idle_.pop_back();
      }
    }
    if (buffer == nullptr) buffer.reset(new std::byte[kBufferBytes]);
    *data = buffer.get();
    auto* lease = new Lease{shared_from_this(), std::move(buffer)};
    return grpc::Slice(lease->buffer.get(), bytes, &BufferPool::Release, lease);
  }

 private:
  struct Lease {
    std::shared_ptr<BufferPool> pool;
    std::unique_ptr<std::byte[]> buffer;
  };
  static void Release(void* p) {
    std::unique_ptr<Lease> lease(static_cast<Lease*>(p));
    std::lock_guard lock(lease->pool->mu_);
    if (lease->pool->idle_.size() < kMaxIdle) {
      lease->pool->idle_.push_back(std::move(lease->buffer));
    }
  }
  std::mutex mu_;
  std::vector<std::unique_ptr<std::byte[]>> idle_;
};

grpc::ByteBuffer PsService::PullReply(const proto::TransferHeader& header, int64_t payload) {
  if (WireTypeOf(header.wire_dtype()).value_or(WireType::kFloat32) == WireType::kFloat32) {
    // The frame header first, then the pinned versions, each released when gRPC is done with it.
    std::vector<grpc::Slice> parts(1);
    // A pin per block a segment touches.
    parts.reserve(1 + 2 * static_cast<size_t>(header.segments_size()) +
                  static_cast<size_t>(payload) / 4 / VersionedValues::kDefaultBlockElements);
    const proto::TransferReply reply = state_.PinPull(header, [&](const VersionedValues::Pin& pin) {
      // gRPC only reads the slice (its constructor takes a mutable pointer).
      parts.emplace_back(const_cast<float*>(pin.values.data()), pin.values.size_bytes(),
                         &VersionedValues::Unpin, pin.handle);
    });
    parts[0] = grpc::Slice(EncodeFrameHeader(reply));
    return grpc::ByteBuffer(parts.data(), parts.size());
  }
  std::byte* data = nullptr;
  grpc::Slice body = pool_->Take(static_cast<size_t>(payload), &data);
  const proto::TransferReply reply = state_.FillPull(header, data);
  grpc::Slice parts[2] = {grpc::Slice(EncodeFrameHeader(reply)), std::move(body)};
  return grpc::ByteBuffer(parts, 2);
}

PsService::PsService(PsState& state, PsMetrics* metrics)
    : state_(state), metrics_(metrics), pool_(std::make_shared<BufferPool>()) {}

PsService::~PsService() { Stop(); }

void PsService::Stop() { state_.coordinator().Stop(); }

grpc::ServerUnaryReactor* PsService::Initialize(grpc::CallbackServerContext* context,
                                                const proto::InitializeRequest* request,
                                                proto::InitializeResponse* response) {
  auto r = state_.Initialize(*request);
  if (r.ok()) {
    *response = *r;
    response->set_bulk_port(bulk_port_);
    if (!local_bulk_.socket().empty()) *response->mutable_local_bulk() = local_bulk_;
  }
  return Answer(context, r.status());
}

grpc::ServerUnaryReactor* PsService::WaitReady(grpc::CallbackServerContext* context,
                                               const proto::WaitReadyRequest* request,
                                               proto::WaitReadyResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  state_.coordinator().Park(0, {}, ParkDeadline(request->timeout_ms()),
                            [this, reactor, response](bool) {
                              if (state_.coordinator().stopped()) {
                                reactor->Finish(Stopping());
                                return;
                              }
                              *response = state_.ReadyResponse();
                              response->set_bulk_port(bulk_port_);
                              if (!local_bulk_.socket().empty()) {
                                *response->mutable_local_bulk() = local_bulk_;
                              }
                              reactor->Finish(grpc::Status::OK);
                            });
  return reactor;
}

grpc::ServerUnaryReactor* PsService::SetLearningRate(grpc::CallbackServerContext* context,
                                                     const proto::SetLearningRateRequest* request,
                                                     proto::SetLearningRateResponse* response) {
  auto r = state_.SetLearningRate(request->learning_rate());
  if (r.ok()) response->set_learning_rate(*r);
  return Answer(context, r.status());
}

grpc::ServerUnaryReactor* PsService::Leave(grpc::CallbackServerContext* context,
                                           const proto::LeaveRequest* request,
                                           proto::LeaveResponse* response) {
  auto r = state_.Leave(request->worker());
  if (r.ok()) {
    response->set_global_step(*r);
    response->set_workers(state_.workers());
  }
  return Answer(context, r.status());
}

namespace {

// The received message's slices as byte spans (no copy); `slices` keeps them alive.
absl::StatusOr<ByteSource> SourceOf(const grpc::ByteBuffer& buffer,
                                    std::vector<grpc::Slice>* slices) {
  if (!buffer.Dump(slices).ok()) return absl::InvalidArgumentError("unreadable request");
  std::vector<std::span<const std::byte>> pieces;
  pieces.reserve(slices->size());
  for (const grpc::Slice& s : *slices) {
    pieces.emplace_back(reinterpret_cast<const std::byte*>(s.begin()), s.size());
  }
  return ByteSource(std::move(pieces));
}

void SetReply(const proto::TransferReply& reply, grpc::ByteBuffer* response) {
  grpc::Slice header(EncodeFrameHeader(reply));
  *response = grpc::ByteBuffer(&header, 1);
}

}  // namespace

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) {
  std::vector<grpc::Slice> slices;
  auto source = SourceOf(*request, &slices);
  if (!source.ok()) return Answer(context, source.status());
  auto reply = state_.Push(*source);
  if (reply.ok()) SetReply(*reply, response);
  return Answer(context, reply.status());
}

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) {
  std::vector<grpc::Slice> slices;
  auto source = SourceOf(*request, &slices);
  if (!source.ok()) return Answer(context, source.status());
  auto header = std::make_shared<proto::TransferHeader>();
  auto bytes = state_.CheckPull(*source, header.get());
  if (!bytes.ok()) return Answer(context, bytes.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const int64_t payload = *bytes;
  ParkCheckedPull(state_, metrics_, header,
                  [this, reactor, response, header, payload](PullOutcome outcome) {
                    switch (outcome) {
                      case PullOutcome::kStopping:
                        reactor->Finish(Stopping());
                        return;
                      case PullOutcome::kTimedOut:
                        SetReply(TimedOutReply(state_), response);
                        break;
                      case PullOutcome::kReached:
                        *response = PullReply(*header, payload);
                        CountPull(metrics_, payload);
                        break;
                    }
                    reactor->Finish(grpc::Status::OK);
                  });
  return reactor;
}

}  // namespace psflow
