// The bulk channel's client side (core/bulk_wire.h): one TCP connection from a worker to a ps
// task's bulk port (plaintext, or mutual TLS: core/bulk_stream.h), or shared memory with a task
// on this host (core/shm_stream.h), carrying bulk calls
// (worker/bulk_calls.h) instead of gRPC.
//
// A writer thread sends requests in the order they were started, gathered straight from the
// call's pieces (its frame header and the caller's buffers: no copy for float32); a reader thread
// matches each reply to its call by id, reads it into the call's reply buffer and completes the
// call on that thread. Several calls may be in flight; the ps may answer them in any order.
//
// Any failure breaks the link for good: a refused or closed connection, a reply that is not the
// protocol (the ps or something else on that port sent garbage), a write or a reply that does not
// come by its call's deadline. Every call in flight, and every call started afterwards, then
// completes with UNAVAILABLE (DEADLINE_EXCEEDED for a deadline) naming the cause, once, so the
// worker takes the path a lost ps task takes and opens a new link. A call is completed only after
// neither thread touches its buffers any more. Steady state (calls of sizes seen before, no more
// in flight than before) allocates nothing. Thread-safe.
#ifndef PSFLOW_WORKER_BULK_LINK_H_
#define PSFLOW_WORKER_BULK_LINK_H_

#include <grpcpp/grpcpp.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "core/bulk_stream.h"
#include "core/bulk_wire.h"
#include "core/socket.h"

namespace psflow {

struct BulkCall;

class BulkLink {
 public:
  using Completion = std::function<void(grpc::Status)>;

  // Connects to host:port (with `tls`: mutual TLS, the ps's certificate naming `host`) and
  // exchanges the hello, by `deadline`.
  static absl::StatusOr<std::unique_ptr<BulkLink>> Connect(
      const std::string& host, int port, SteadyTime deadline,
      std::shared_ptr<const BulkTlsContext> tls = nullptr);
  // Connects to a ps task of this host through shared memory (core/shm_stream.h): its Unix socket
  // at `socket_path`, showing `token` (both advertised over gRPC), and exchanges the hello.
  static absl::StatusOr<std::unique_ptr<BulkLink>> ConnectLocal(const std::string& socket_path,
                                                                const std::string& token,
                                                                SteadyTime deadline);
  ~BulkLink();  // breaks the link (calls in flight complete UNAVAILABLE) and joins its threads
  BulkLink(const BulkLink&) = delete;
  BulkLink& operator=(const BulkLink&) = delete;

  // Sends `call` (its request set) as `kind`: done runs once, on the reader or writer thread,
  // with OK once the reply is in the call (BulkCall::ReplyBuffer), or with the link's failure.
  // On a link already broken nothing is sent, done is not kept, and the failure is returned.
  std::optional<grpc::Status> Start(BulkCall* call, BulkKind kind,
                                    std::chrono::system_clock::time_point deadline,
                                    Completion done);
  bool broken() const;
  const std::string& peer() const { return peer_; }

 private:
  // A call in flight. Its id on the wire is the slot's index and, in the top 8 bits, the slot's
  // generation (bumped at each reuse), so a late or duplicated reply never lands on a later call.
  static constexpr uint32_t kIndexBits = 24;
  struct Slot {
    uint32_t generation = 0;
    bool queued = false;  // not yet taken by the writer: no reply can be due
    BulkCall* call = nullptr;
    Completion done;
    SteadyTime deadline;
    std::array<std::byte, kBulkPrefixBytes> prefix{};
    bool busy = false;
    bool writing = false;   // the writer is sending its request
    bool reading = false;   // the reader is reading its reply
    bool finished = false;  // result is final
    grpc::Status result;
  };
  BulkLink(std::unique_ptr<BulkStream> stream, std::string peer);
  // Handshakes `stream`, exchanges the hello and starts the threads.
  static absl::StatusOr<std::unique_ptr<BulkLink>> Open(std::unique_ptr<BulkStream> stream,
                                                        const std::string& peer,
                                                        SteadyTime deadline);
  void WriteLoop();
  void ReadLoop();
  absl::Status ReadReplies();
  // A reply frame of `length` bytes into the call: its payload straight to the observer's
  // targets where it has them (BulkCall::Observer::PayloadTargets), else all into its buffer.
  absl::Status ReadReply(BulkCall& call, uint64_t length, SteadyTime deadline);
  // Marks every unfinished call failed; the completions to run (outside the lock) go to
  // done/results. A call whose own deadline has passed fails DEADLINE_EXCEEDED when `deadline` is
  // set; every other call, and every later one, fails UNAVAILABLE "why" (the link is gone).
  void FailLocked(const std::string& why, bool deadline, std::vector<Completion>* done,
                  std::vector<grpc::Status>* results) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Fail(const std::string& why, bool deadline = false);
  // Moves out the slot's completion and result and frees it, when it is finished and neither
  // thread holds it; false otherwise.
  bool TakeIfDone(uint32_t id, Completion* done, grpc::Status* result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  SteadyTime EarliestDeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::unique_ptr<BulkStream> stream_;
  const std::string peer_;
  mutable std::mutex mu_;
  std::condition_variable to_send_;
  // Owned one by one: a slot's prefix is written by the writer outside the lock while new slots
  // are added.
  std::vector<std::unique_ptr<Slot>> slots_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> free_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> queue_ ABSL_GUARDED_BY(mu_);  // ids to write, from queue_head_
  size_t queue_head_ ABSL_GUARDED_BY(mu_) = 0;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status failure_ ABSL_GUARDED_BY(mu_);
  std::thread writer_;
  std::thread reader_;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_BULK_LINK_H_
