// The ps client's bulk Pull/Push calls, planned once and reused every step, and the window that
// runs them (PsClient: what each call carries; here: how a call goes out and comes back: as a raw
// gRPC call, or on the bulk channel's connection when the window has a link for it,
// worker/bulk_link.h).
//
// A BulkCall keeps everything one call needs across steps: its frame header with the fixed
// fields serialized once (FrameHeaderBuffer), the slices it sends (the header, then views of the
// caller's buffers or of its own 16-bit copy), the reply's slices and a ByteSource over them.
// Apart from what gRPC allocates itself, a call sent again with payloads no larger than before
// allocates nothing.
#ifndef PSFLOW_WORKER_BULK_CALLS_H_
#define PSFLOW_WORKER_BULK_CALLS_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/uio.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "core/bulk_wire.h"
#include "core/byte_source.h"
#include "core/frame.h"
#include "core/wire_type.h"
#include "proto/ps.pb.h"

namespace psflow {

// The status of any call the worker made to a ps, as absl::Status. CANCELLED reads as
// UNAVAILABLE: the worker never cancels its own calls, so a stopping ps (or its transport) did,
// and the caller recovers as from any lost task.
absl::Status PsCallStatus(const grpc::Status& status);

struct BulkCall {
  // Told when a call completes, on the gRPC thread that completed it, before the CallWindow counts
  // the call done (so before Wait returns): e.g. a pull's decoding, so replies are read as they
  // arrive, in parallel with each other and with the calls still in flight.
  class Observer {
   public:
    virtual void Completed(BulkCall& call) = 0;
    // Where a reply's payload of `bytes` may be read straight to (a bulk link reads it there
    // instead of into the call's buffer, and sets payload_placed): pieces adding up to exactly
    // `bytes`, or none to take it as usual. Only between the call's Add and its completion.
    virtual std::span<iovec> PayloadTargets(uint64_t bytes) {
      (void)bytes;
      return {};
    }

   protected:
    ~Observer() = default;
  };

  // Where it goes: a stub of one of its task's connections, the method, and the connection's
  // index in the CallWindow (which may route it over a BulkLink instead of the stub).
  grpc::GenericStub* stub = nullptr;
  const std::string* method = nullptr;
  BulkKind kind = BulkKind::kPush;  // the method, on a bulk link
  size_t connection = 0;
  FrameHeaderBuffer header;
  proto::TransferHeader varying;  // the fields set per send, appended to the fixed ones

  // Sets the request: the header with `varying`, then the payload runs. float32 runs are sent as
  // they are (they must outlive the call); 16-bit ones are converted into the call's own buffer.
  // Returns the payload bytes.
  int64_t SetRequest(std::span<const std::span<const float>> runs, WireType type);
  // The request set, as pieces to send (header, payload) and their bytes.
  std::span<const iovec> request_pieces() const { return pieces_; }
  uint64_t request_bytes() const { return request_bytes_; }
  // A bulk link's reply goes here: room for n bytes (the call's own, grown only when a reply is
  // larger than any before, keeping the bytes it held), which reply_source reads.
  std::byte* ReplyBuffer(size_t n);
  // The reply's frame header into `reply`, leaving reply_source at its payload. The call's
  // status first (PsCallStatus), then INTERNAL for an unreadable reply.
  absl::Status DecodeReply(proto::TransferReply* reply);

  std::optional<grpc::ClientContext> context;  // fresh for every send (gRPC)
  bool via_link = false;                       // sent on a BulkLink: the reply is in reply_bytes_
  bool payload_placed = false;  // the link read the reply's payload to the observer's targets
  grpc::ByteBuffer request;     // gRPC: the pieces as slices
  grpc::ByteBuffer response;
  grpc::Status status;
  ByteSource reply_source;
  Observer* observer = nullptr;  // none: the caller reads the reply after Wait

 private:
  friend class CallWindow;
  // gRPC: `request` from the pieces (slices over the same bytes).
  void BuildGrpcRequest();
  std::vector<iovec> pieces_;                       // header, then payload
  std::chrono::system_clock::time_point deadline_;  // on a bulk link
  uint64_t request_bytes_ = 0;
  std::vector<grpc::Slice> slices_;        // the pieces, for gRPC
  std::vector<std::byte> wire_;            // a 16-bit payload
  std::vector<grpc::Slice> reply_slices_;  // what reply_source reads (gRPC)
  std::vector<std::byte> reply_bytes_;     // what reply_source reads (a BulkLink)
  size_t reply_size_ = 0;
};

// Runs calls with at most `window` in flight per connection (the rest queued in the order they
// were added) and waits for them. The adding thread may add calls while others are in flight
// (early sending); Wait returns once every call added so far has completed and its observer
// returned. One thread adds and waits; gRPC's callback threads complete calls (a completed call's
// queued successor is started before its observer runs).
class BulkLink;

class CallWindow {
 public:
  CallWindow(size_t connections, size_t window, size_t max_calls);
  ~CallWindow();  // waits for the calls in flight
  CallWindow(const CallWindow&) = delete;
  CallWindow& operator=(const CallWindow&) = delete;

  // Sends `call` (request set) with a fresh context and `deadline`, now or when its connection
  // has room. The call must stay alive and untouched until Wait returns.
  void Add(BulkCall* call, std::chrono::system_clock::time_point deadline);
  void Wait();
  // Calls may be added this many times between two Waits without the queues allocating.
  void Reserve(size_t max_calls);
  // Calls of `connection` go on `link` from now on (null: gRPC, through their stubs). Only
  // between a Wait and the next Add; the link outlives its use here.
  void Route(size_t connection, BulkLink* link);

 private:
  struct Queue {
    std::vector<BulkCall*> calls;  // calls[head..] wait for room
    size_t head = 0;
    size_t in_flight = 0;
  };
  void Start(BulkCall* call);
  // Sends a call; its status when it failed at once (a broken link), nullopt when in flight.
  std::optional<grpc::Status> Launch(BulkCall* call);
  void Done(BulkCall* call, grpc::Status status);

  const size_t window_;
  std::mutex mu_;
  std::condition_variable done_;
  std::vector<Queue> queues_ ABSL_GUARDED_BY(mu_);
  std::vector<BulkLink*> links_;  // per connection; set only while no call is in flight
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_BULK_CALLS_H_
