// The two baselines of bench/baselines.h on their own: raw TCP (the loopback limit) and plain
// gRPC `bytes` messages, moving a model between workers and ps tasks in this process.
//
//   build/bin/bench_transfer_baselines [--workers=1] [--ps_tasks=1] [--model_mib=64] [--rounds=5]
//                              [--warmup_rounds=1] [--baselines=tcp,grpc]
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "bench/baselines.h"
#include "core/command_line.h"

ABSL_FLAG(int, workers, 1, "Concurrent workers (clients)");
ABSL_FLAG(int, ps_tasks, 1, "ps tasks (servers); each holds an equal share of the model");
ABSL_FLAG(int64_t, model_mib, 64, "Model size in MiB");
ABSL_FLAG(int, rounds, 5, "Timed steps (each worker pushes then pulls the whole model)");
ABSL_FLAG(int64_t, warmup_rounds, 1, "Untimed steps before the timed ones");
ABSL_FLAG(std::string, baselines, "tcp,grpc", "Which baselines to run: tcp, grpc or both");

namespace psflow::bench {
namespace {

int Main() {
  TransferPattern p;
  p.workers = absl::GetFlag(FLAGS_workers);
  p.ps_tasks = absl::GetFlag(FLAGS_ps_tasks);
  p.model_bytes = absl::GetFlag(FLAGS_model_mib) << 20;
  p.rounds = absl::GetFlag(FLAGS_rounds);
  p.warmup_rounds = absl::GetFlag(FLAGS_warmup_rounds);
  std::printf("workers=%d ps_tasks=%d model=%ld MiB rounds=%d (+%ld warmup), %d CPU cores\n",
              p.workers, p.ps_tasks, static_cast<long>(absl::GetFlag(FLAGS_model_mib)), p.rounds,
              static_cast<long>(p.warmup_rounds), static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  std::printf("%-12s %8s %10s %9s %9s\n", "baseline", "GB/s", "CPU-s/GB", "seconds", "CPU-s");
  int rc = 0;
  auto report = [&](const char* name, const absl::StatusOr<TransferResult>& r) {
    if (!r.ok()) {
      std::printf("%-12s failed: %s\n", name, r.status().ToString().c_str());
      rc = 1;
      return;
    }
    std::printf("%-12s %8.3f %10.3f %9.3f %9.3f\n", name, r->gb_per_s(),
                r->cpu_seconds / (static_cast<double>(r->bytes_moved) / 1e9), r->seconds,
                r->cpu_seconds);
  };
  const std::string which = absl::GetFlag(FLAGS_baselines);
  if (absl::StrContains(which, "tcp")) report("tcp_pump", RunTcpPump(p));
  if (absl::StrContains(which, "grpc")) report("grpc_bytes", RunGrpcBytes(p));
  return rc;
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) {
  psflow::ParseFlags(argc, argv,
                     "the raw TCP and plain gRPC baselines of bench_ps_throughput on their own");
  return psflow::bench::Main();
}
