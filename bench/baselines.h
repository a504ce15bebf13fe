// Baselines for the parameter-server transport benchmark: the same bytes, in the same pattern as
// psflow's push/pull, moved by (a) raw TCP sockets, the physical limit of loopback on this
// machine, and (b) the plain gRPC service a user without psflow would write (one protobuf `bytes`
// message per call). Everything runs in this process: the servers are threads listening on
// 127.0.0.1 (ports chosen by the OS), started and stopped inside each Run call.
#ifndef PSFLOW_BENCH_BASELINES_H_
#define PSFLOW_BENCH_BASELINES_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace psflow::bench {

struct TransferPattern {
  int workers = 1;   // concurrent clients
  int ps_tasks = 1;  // servers
  // The whole model; each ps task holds model_bytes / ps_tasks (the last one takes the remainder).
  int64_t model_bytes = 0;
  // Steps; in each step every worker pushes its gradients (model_bytes in total, split over the
  // tasks) and then pulls the parameters back (model_bytes).
  int rounds = 1;
  int64_t warmup_rounds = 1;  // not timed
};

// This process's CPU time so far (getrusage RUSAGE_SELF): user + sys, and sys alone.
struct CpuTime {
  double total = 0;
  double kernel = 0;
};
CpuTime ProcessCpu();

struct TransferResult {
  double seconds = 0;  // wall time of the timed rounds
  // Process CPU time (user + sys, getrusage RUSAGE_SELF) during the timed rounds, and its kernel
  // (sys) part.
  double cpu_seconds = 0;
  double kernel_seconds = 0;
  // Payload bytes moved in the timed rounds: 2 * model_bytes * workers * rounds.
  int64_t bytes_moved = 0;
  double gb_per_s() const { return bytes_moved / seconds / 1e9; }
};

// Both baselines run one thread per (worker, ps task) connection. In each round (step) a worker's
// threads push its share to every task in parallel and pull the task's share back; the worker's
// next round starts when all of its threads are done (workers do not wait for each other). Timing
// starts when every worker has finished its warmup rounds and stops when every worker has finished
// its timed rounds. After the timed rounds the pulled bytes are checked against what the servers
// hold. Errors: INVALID_ARGUMENT for a bad pattern; otherwise the error names what failed (socket
// call, RPC, worker and task); a failure anywhere aborts the whole run (no hangs) and every thread
// is joined before returning.

// The physical limit: one TCP connection per (worker, ps task) on 127.0.0.1 (TCP_NODELAY), blocking
// send/recv of raw bytes and a server thread per connection. In each round the server receives the
// worker's share into a buffer of that connection's own, then sends the task's share back from the
// task's buffer; the worker receives it into its parameter buffer. All buffers are allocated once
// and touched before timing.
absl::StatusOr<TransferResult> RunTcpPump(const TransferPattern& pattern);

// What a plain gRPC user writes: the unary sync service of bench/bench_bytes.proto, Push(bytes) ->
// Empty and Pull(Empty) -> bytes, one message per (worker, task) per direction carrying that task's
// whole share (message size limits lifted), the worker's calls to its tasks in parallel, one
// channel (TCP connection) per (worker, task). The client copies its gradients into the request
// (set_data) and the pulled bytes out of the response into its parameter buffer; the server copies
// a pushed message's bytes into the task's buffer (under the task's mutex, as a ps applying them
// would) and answers Pull from that buffer (set_data copies it). A share must be under 2 GiB.
absl::StatusOr<TransferResult> RunGrpcBytes(const TransferPattern& pattern);

}  // namespace psflow::bench

#endif  // PSFLOW_BENCH_BASELINES_H_
