// One ps task as the worker's PsClient sees it: its connections, the partitions it holds, and the
// bulk calls of its pulls and pushes, planned once (PsTask::Plan, at PsClient::Create) and aimed
// anew at each step's buffers (AimPull, AimPush). What the calls carry is fixed here; sending them
// and reading their replies is PsClient's (worker/ps_client.h), running them is the CallWindow's
// (worker/bulk_calls.h).
//
// The plan: the task's partitions (from the placement) cut into chunks of at most kChunkBytes
// (core/chunk_plan.h); one pull call per chunk, and one gradient call per chunk of the dense
// partitions (sparse partitions push their touched rows, at least one call each, numbered after
// the dense chunks). Where the task holds sparse partitions a pull of rows (ParameterSet::
// pulls_rows) is the dense chunks plus calls of each sparse partition's rows to pull, grown as a
// pull needs more. A call's chunk number decides its connection (chunk % connections).
//
// Not thread-safe: one trainer thread plans and aims; a pull call's reply is decoded on the gRPC
// thread that completes it (ChunkCall::Completed), into that call's own runs of the values.
#ifndef PSFLOW_WORKER_PS_TASK_H_
#define PSFLOW_WORKER_PS_TASK_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/uio.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/chunk_plan.h"
#include "core/placement.h"
#include "core/transport_security.h"
#include "core/wire_type.h"
#include "proto/ps.grpc.pb.h"
#include "worker/bulk_calls.h"
#include "worker/bulk_link.h"
#include "worker/nn/parameter_set.h"
#include "worker/parameter_sync.h"

namespace psflow {

// One partition of a task, as the worker sees it: a run of one parameter's elements.
struct TaskPartition {
  nn::ParameterSet::Handle handle = 0;
  int64_t first_element = 0;  // within the parameter
  int64_t row_begin = 0;      // rows of the parameter's first dimension
  int64_t row_end = 0;
  int64_t row_elements = 0;
  bool sparse = false;
};

// A planned call of one dense chunk (a pull, an assignment or a gradient push), or of a sparse
// partition's rows to pull.
struct ChunkCall final : BulkCall::Observer {
  BulkCall call;
  std::vector<SegmentRange> segments;
  // Gradient chunks: the distinct parameters the chunk covers (ascending), how many of them are
  // not ready yet this step, and whether it went this step.
  std::vector<nn::ParameterSet::Handle> parameters;
  int missing = 0;
  bool sent = false;

  // Pull calls read their reply as it completes (the call's observer): its header into `reply`,
  // its payload into `dest`, runs of a parameter set's values (each call's runs are its own, so
  // calls decode concurrently). `decoded`: the call's error or an unreadable header;
  // `short_reply`: the payload ended early (a timed-out parked pull carries none).
  const std::vector<TaskPartition>* partitions = nullptr;
  WireType wire_type = WireType::kFloat32;
  std::vector<std::span<float>> dest;
  int64_t dest_elements = 0;
  proto::TransferReply reply;
  absl::Status decoded;
  bool short_reply = false;

  // A dense chunk's destination: its segments' runs of `into`'s values.
  void AimAtSegments(nn::ParameterSet& into);
  // `rows` of partition `partition`'s parameter (row numbers of the whole parameter, sorted,
  // inside the partition): the destination, consecutive rows as one run, and the request's
  // segment (rows local to the partition), added to the call's per-send header.
  void AimAtRows(nn::ParameterSet& into, uint32_t partition, std::span<const int64_t> rows);

  // A float32 reply's payload goes straight into `dest`, in order (BulkLink reads it there).
  std::span<iovec> PayloadTargets(uint64_t bytes) override;
  void Completed(BulkCall& completed) override;

 private:
  void SetTargets();
  std::vector<iovec> targets_;
  uint64_t target_bytes_ = 0;
};

struct PsTask {
  // How the tasks are reached and what their calls carry (from PsClient::Options).
  struct Settings {
    std::vector<std::string> addresses;  // "host:port", in task order
    int connections = 1;                 // per task, each its own gRPC channel and TCP connection
    const TransportSecurity* security = nullptr;
    const TrainingConfig* training = nullptr;  // the chief initialises a task with its optimizer
    WireType wire_type = WireType::kFloat32;
    std::chrono::milliseconds rpc_timeout{0};  // a pull's timeout_ms (how long it may be parked)
  };

  // Task `index` of the placement: opens its channels (OpenPsChannel with `args` and an argument
  // of each connection's own, so each gets its own TCP connection) and plans its calls. Its first
  // connection is number index * settings.connections of the CallWindow.
  static std::unique_ptr<PsTask> Plan(int index, const Placement& placement,
                                      const nn::ParameterSet& params, const Settings& settings,
                                      const grpc::ChannelArguments& args);

  // A call of `chunk` (its connection: chunk % connections) with its fixed header: kind,
  // fingerprint, worker, chunk, wire type (float32 for TK_ASSIGN: initial values are the ps's
  // master copy), a pull's timeout, the chunk count (but for gradients: a step's count varies).
  std::unique_ptr<ChunkCall> MakeChunkCall(proto::TransferKind kind, uint32_t chunk,
                                           std::vector<SegmentRange> segments) const;
  // This pull's calls (`pulling`), aimed at params' values: every chunk, or (params.pulls_rows())
  // the dense chunks and the rows to pull of each sparse partition.
  void AimPull(nn::ParameterSet& params);
  // Fixes this step's push from params' touched rows: the calls of each sparse partition (at
  // least one; sparse_counts), the step's chunk count (push_chunks, returned), sparse calls made
  // where there were too few; every dense call reset to not sent, none of its parameters ready.
  uint32_t AimPush(const nn::ParameterSet& params);
  // Call c of this step's push, c < push_chunks: the dense chunks, then the sparse calls.
  BulkCall& PushCall(size_t c);
  size_t calls_planned() const {
    return pull_calls.size() + push_calls.size() + sparse_calls.size();
  }

  int index = 0;
  std::string address;
  // The fields of every call's fixed header.
  uint64_t fingerprint = 0;
  int worker = 0;
  WireType wire_type = WireType::kFloat32;
  std::chrono::milliseconds pull_timeout{0};
  std::shared_ptr<grpc::Channel> channel;                // connection 0
  std::unique_ptr<proto::ParameterServer::Stub> stub;    // control calls, on connection 0
  std::vector<std::unique_ptr<grpc::GenericStub>> bulk;  // one per connection
  std::vector<std::unique_ptr<BulkLink>> links;          // per connection, when routed on them
  int bulk_port = 0;                                     // the links' port
  // The shared-memory channel the task offered when the links were made ("socket token"; the
  // links may be TCP when this host could not take it).
  std::string local_offer;
  size_t first_connection = 0;                         // bulk[0]'s index in the CallWindow
  std::vector<TaskPartition> partitions;               // in the task's order
  std::vector<std::vector<SegmentRange>> chunks;       // PlanChunks of the partitions
  std::vector<std::unique_ptr<ChunkCall>> pull_calls;  // one per chunk
  // Pulls of rows (ParameterSet::pulls_rows), when the task holds sparse partitions: chunks of the
  // dense partitions, and calls of rows, grown as a pull needs more. `pulling`: this pull's calls.
  std::vector<std::unique_ptr<ChunkCall>> dense_pull_calls;
  std::vector<std::unique_ptr<ChunkCall>> row_pull_calls;
  std::vector<ChunkCall*> pulling;
  std::vector<std::unique_ptr<ChunkCall>> push_calls;  // dense gradient chunks, numbered first
  std::vector<uint32_t> sparse_partitions;
  // Calls of sparse rows, numbered after the dense ones; grown as a step needs more.
  std::vector<std::unique_ptr<BulkCall>> sparse_calls;
  // This step's push: calls per sparse partition (at least one each) and in all.
  std::vector<uint32_t> sparse_counts;
  uint32_t push_chunks = 0;
  proto::InitializeRequest init;  // the chief's request (partitions filled)
  int64_t bytes = 0;
  int64_t pulled_step = 0;    // the task's step at the last pull
  int64_t next_min_step = 0;  // sync: the step the next pull waits for
  // The highest global step this task reported (pulls, pushes), kept across its restarts: the
  // chief re-creates a task that lost its state at this step, so the step never goes back.
  int64_t last_seen_step = 0;

 private:
  std::unique_ptr<ChunkCall> MakePullCall(uint32_t chunk, std::vector<SegmentRange> segments) const;
};

// The rows of a sorted row list that fall in [row_begin, row_end) (a partition's).
std::span<const int64_t> RowsIn(std::span<const int64_t> rows, int64_t row_begin, int64_t row_end);
// Rows of a sparse partition per call: a chunk's bytes at most, and few enough that the row list
// fits a frame header (kMaxFrameHeaderBytes; an int64 row takes at most 10 bytes).
int64_t RowsPerCall(int64_t row_elements);

}  // namespace psflow

#endif  // PSFLOW_WORKER_PS_TASK_H_
