// The worker's side of the ps protocol.
//
// Placement: PlaceVariables (core/placement.h) over the model's variables and the ps list, so
// every worker agrees on which task holds which rows without talking. Transfer: each task's
// partitions are cut into chunks of at most kChunkBytes, planned once (at Create) as reusable
// calls (worker/ps_task.h); a Pull or Push sends every chunk of every task as its own call, on
// the task's bulk channel (worker/bulk_link.h: TCP, or shared memory on the task's host) or as a
// raw gRPC call, a few in flight per connection, spread over Options::connections_per_task
// connections per task, all tasks in parallel, and waits for all (worker/bulk_calls.h). A float32
// push sends the gradient buffer itself (no copy; a 16-bit wire type converts into the call's own
// buffer); a pull reply is read into the parameter buffer as it arrives (a float32 one on a bulk
// link straight from the socket or ring). Apart from gRPC's own allocations a steady-state step
// allocates nothing here.
//
// Sparse pulls: when the ParameterSet pulled into says pulls_rows(), a sparse parameter's
// partitions bring only its rows_to_pull (the rows the step being served reads: an embedding's
// rows for the batch's ids, as TensorFlow 1.x gathered them on the ps), in calls of at most a
// chunk each and at least one per partition (in sync mode every pull learns every partition's
// step); the dense partitions go in chunks as always. Otherwise every row. (A chief that
// re-creates a task lost without a checkpoint, below, sends its own copy: with sparse pulls an
// embedding row it has not read lately is as old as its last pull of that row.)
//
// Early sending (GradientsReady): a dense gradient chunk goes as soon as every parameter it
// covers is ready; a sparse parameter's touched rows go at Push (the touched rows of every sparse
// parameter must be final before a step's first GradientsReady: layers set them before forward).
// Push sends what is left, waits for every reply, early ones included, and reports a failed early
// send as it reports its own. A GradientsReady must be followed by that step's Push; a Pull
// before it waits for the early sends and forgets them.
//
// Sync mode: a pull after a push asks the ps for the next step and is parked there until that
// step has been aggregated. Recovery: when a ps task becomes unreachable mid-training (killed and
// restarted), the push in flight is dropped and the next Pull waits, for up to connect_timeout,
// until the task is ready again — restored from its checkpoint, or (without one) re-created by
// the chief from the chief's latest parameters at the highest global step the chief saw from it
// (so the step never goes back; the chief logs the lost progress as a WARNING, as does a worker
// that finds the task behind the step it saw) — and starts from its state. A SetLearningRate or
// Leave that finds a task gone is made again once the task is back (the next Pull waits for it):
// a task restored from an older checkpoint would otherwise keep the old rate, or count on a
// worker that has left.
//
// Not thread-safe: one trainer thread uses it.
#ifndef PSFLOW_WORKER_PS_CLIENT_H_
#define PSFLOW_WORKER_PS_CLIENT_H_

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/bulk_stream.h"
#include "core/chunk_plan.h"
#include "core/placement.h"
#include "core/transport_security.h"
#include "core/wire_type.h"
#include "worker/bulk_calls.h"
#include "worker/parameter_sync.h"
#include "worker/ps_task.h"
#include "worker/stop_request.h"

namespace psflow {

enum class Transport { kBulk, kGrpc };
// "bulk" or "grpc"; INVALID_ARGUMENT otherwise.
absl::StatusOr<Transport> ParseTransport(absl::string_view name);

class PsClient final : public ParameterSync {
 public:
  struct Options {
    std::vector<std::string> ps_addresses;  // "host:port", in task order
    TrainingConfig training;
    // How long recovery keeps retrying an unreachable ps or waiting for the chief; also how long
    // one attempt of Prepare lasts before it logs and tries again (see startup_timeout).
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
    // How long Prepare, at the job's start, keeps waiting for each ps task to be reachable and
    // (on a non-chief) initialised by the chief; 0: as long as it takes. A worker of a job whose
    // ps or chief is not running yet (a pod the scheduler has not placed, an image being pulled)
    // waits for it, logging every connect_timeout, rather than exiting: the job's own limits
    // (schedulingTimeoutSeconds, activeDeadlineSeconds) end a wait that lasts too long.
    std::chrono::milliseconds startup_timeout{std::chrono::seconds(60)};
    // Deadline of each call; also how long a sync pull may wait for its step.
    std::chrono::milliseconds rpc_timeout{std::chrono::seconds(60)};
    // Element type of parameters and gradients on the wire (--wire_dtype); the ps keeps float32.
    WireType wire_type = WireType::kFloat32;
    // How the variables are spread over the ps tasks (--placement); every worker must agree (the
    // placement's fingerprint is checked against the ps's).
    PlacementStrategy placement = PlacementStrategy::kBalanced;
    // Connections per ps task (--ps_connections): gRPC channels with their own subchannel and as
    // many bulk links; a task's chunks are spread over them, and the ps serves each connection on
    // a thread of its own (so one worker's push is applied on that many threads).
    // bench_ps_throughput --connections=1,2,4 on 2 cores: alike (medians 0.51, 0.48, 0.48 of the
    // TCP pump, docs/benchmarks.md), so one by default; not yet measured with spare cores.
    int connections_per_task = kDefaultConnectionsPerTask;
    // Plaintext or mutual TLS (--tls_ca, --tls_cert, --tls_key); every channel to a task is
    // opened by OpenPsChannel with it.
    TransportSecurity security;
    // Where the tensor bytes of pulls and pushes go (--transport): on the bulk channel
    // (worker/bulk_link.h, connections_per_task links per task, under `security` as gRPC is)
    // when the task advertises a bulk port, or as raw gRPC calls. When a task advertises none or
    // its bulk port cannot be reached (one WARNING naming the cause), gRPC. A task that also
    // offers its bulk channel through shared memory (psflow-ps --bulk_socket) is reached that way
    // where its socket is on this host; elsewhere (one INFO line), over TCP.
    Transport transport = Transport::kBulk;
    // Once a stop is requested (SIGTERM, worker/stop_request.h), a lost ps task is not waited
    // for: the call that finds it gone fails at once (UNAVAILABLE), as the task is most likely
    // being stopped with this worker (the whole job deleted, psflow run interrupted). Null: never.
    const StopRequest* stop = nullptr;
    // False for a client that only pulls (an evaluator): the task's optimizer and step rules are
    // not its to agree with, so WaitReady does not compare them with `training`.
    bool pushes = true;
  };
  static constexpr int kDefaultConnectionsPerTask = 1;
  static constexpr int kMaxConnectionsPerTask = 64;
  // OK when n is in [1, kMaxConnectionsPerTask]; else INVALID_ARGUMENT "<what> must be in [1, 64],
  // got <n>" (`what`: the flag or option that gave it).
  static absl::Status CheckConnectionsPerTask(int n, absl::string_view what);

  // `params` fixes the variables (names, shapes) and must not change layout afterwards.
  // INVALID_ARGUMENT when there is no ps address or connections_per_task is outside
  // [1, kMaxConnectionsPerTask].
  // Every ParameterSet handed to the calls below has params' layout (it may be another set of
  // that layout, e.g. OverlappedSync's); its buffers are read or written only during the call,
  // and for a step's GradientsReady ... Push, until that Push returns.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(Options options,
                                                          const nn::ParameterSet& params);
  ~PsClient() override;

  absl::Status Prepare(const nn::ParameterSet& params, bool is_chief) override;
  absl::StatusOr<SyncResult> Pull(nn::ParameterSet& params) override;
  absl::StatusOr<SyncResult> Push(nn::ParameterSet& params, int64_t examples) override;
  void GradientsReady(const nn::ParameterSet& params, nn::ParameterSet::Handle first,
                      nn::ParameterSet::Handle last, int64_t examples) override;
  absl::Status SetLearningRate(float learning_rate) override;
  absl::Status Leave() override;
  // Asks each task again by Leave (which changes nothing for a worker that has left). A task that
  // cannot be reached, or is not ready, makes the next Pull recover it and leave again.
  absl::StatusOr<Others> OthersTraining() override;

  const Placement& placement() const { return placement_; }

 private:
  explicit PsClient(Options options);

  // Initialises `task` (chief) or waits for it to be ready (others), retrying an unreachable or
  // uninitialised task until `deadline`. UNAVAILABLE when it could not be reached,
  // DEADLINE_EXCEEDED (WaitReadyTask) when it was reached but never initialised.
  absl::Status InitializeTask(PsTask& task, const nn::ParameterSet& params,
                              std::chrono::steady_clock::time_point deadline);
  // Routes the task's bulk calls: over links through the shared memory the task advertised
  // (`local`) when this host reaches it, else to the bulk port it advertised (reusing working
  // links to the same channel), or over gRPC (see Options::transport).
  void RouteTask(PsTask& task, int bulk_port, const proto::LocalBulkChannel& local);
  absl::Status WaitReadyTask(PsTask& task, std::chrono::steady_clock::time_point deadline);
  // The Leave call to `task` for this worker (Leave, OthersTraining: the same call, repeated).
  grpc::Status LeaveTask(PsTask& task, proto::LeaveResponse* response);
  absl::Status Recover(nn::ParameterSet& params);
  // Options::stop was requested: a task that is gone is not waited for.
  bool Stopping() const;
  // Sends the chief's initial values (params' values) to `task` and waits.
  absl::Status Assign(PsTask& task, const nn::ParameterSet& params);
  // One pull of every task into params' values.
  absl::Status PullOnce(nn::ParameterSet& params, SyncResult* result);

  // A step's push: begun by its first GradientsReady or by Push (fixes each task's chunk count),
  // chunks sent as they become ready, finished (the rest sent, every reply read) by Push.
  void BeginPush(const nn::ParameterSet& params, int64_t examples);
  void SendGradientChunk(PsTask& task, ChunkCall& call, const nn::ParameterSet& params);
  absl::Status SendSparseRows(PsTask& task, const nn::ParameterSet& params);
  absl::Status FinishPush(SyncResult* result);
  // Waits for every call in flight (a begun push is forgotten).
  void Quiesce();
  std::chrono::system_clock::time_point Deadline(bool parked_pull) const;

  Options options_;
  Placement placement_;
  std::vector<std::unique_ptr<PsTask>> tasks_;
  bool need_recovery_ = false;
  // Calls a task missed while it was gone, made again by Recover: the chief's last learning
  // rate, and this worker's Leave.
  std::optional<float> resend_learning_rate_;
  bool leave_again_ = false;
  bool is_chief_ = false;

  std::unique_ptr<CallWindow> window_;
  std::shared_ptr<const BulkTlsContext> bulk_tls_;  // under mutual TLS
  std::vector<std::span<const float>> runs_;  // scratch: the payload runs of the call being set
  // Per parameter: the dense gradient chunks (task, index into its push calls) that cover it.
  std::vector<std::vector<std::pair<PsTask*, size_t>>> chunks_of_parameter_;
  // This step's push: begun, its examples, which parameters are ready, payload bytes sent.
  bool push_open_ = false;
  int64_t push_examples_ = 0;
  std::vector<bool> ready_;
  int64_t push_bytes_ = 0;
};

}  // namespace psflow

#endif  // PSFLOW_WORKER_PS_CLIENT_H_
