// bench_ps_throughput: how fast psflow's ps moves parameters and gradients, against the physical
// limit (a raw TCP pump) and a plain gRPC `bytes` service moving the same bytes in the same
// pattern, all in this process on loopback.
//
// W workers (threads, one PsClient each) push and pull a model of M MiB (8 equal variables) to P
// ps tasks (PsState + PsService each, real gRPC servers on 127.0.0.1). One round = every worker
// pushes its gradients, then pulls the parameters. The ps applies plain SGD to every push (async)
// or averages the workers' gradients (--sync), so psflow's figures include the update work the
// baselines do not do. Prints GB/s of payload (2 * M * W per round), the ratios against the TCP
// pump and plain gRPC, and process CPU-seconds per GB moved (all, and the kernel's); with the
// baselines, the median psflow / pump and the CPU-bound ceiling: the pump's CPU s/GB over psflow's
// kernel s/GB, the most psflow could reach where every party is CPU-bound on the same cores even if
// its own code cost nothing. psflow runs once per --transports entry, in the same call: over the
// bulk channel on TCP (bulk), through shared memory (shm: core/shm_stream.h, the workers on the ps
// tasks' host) and as raw gRPC calls (grpc). With --tls, psflow again over mutual TLS on
// the last of --transports and its ratio to the same transport in plaintext (what encrypting and
// authenticating the ps traffic costs).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "bench/baselines.h"
#include "core/certificates.h"
#include "core/command_line.h"
#include "core/memory_tuning.h"
#include "core/status_macros.h"
#include "core/transport_security.h"
#include "ps/loopback_ps.h"
#include "worker/ps_client.h"

ABSL_FLAG(std::string, model_mib, "1,16,64,256", "Model sizes in MiB");
ABSL_FLAG(std::string, ps_tasks, "1,2,4", "Numbers of ps tasks");
ABSL_FLAG(std::string, workers, "1,2", "Numbers of workers");
ABSL_FLAG(int, rounds, 0, "Timed rounds per configuration (0: about 2 GB of traffic, 3..50)");
ABSL_FLAG(int, connections, psflow::PsClient::kDefaultConnectionsPerTask,
          "TCP connections from each worker to each ps task");
ABSL_FLAG(std::string, transports, "shm,grpc,bulk",
          "psflow's transports to run, in this order: grpc (raw gRPC calls), bulk (the bulk "
          "channel on TCP), shm (the bulk channel through shared memory); --tls and the sync "
          "step use the last");
ABSL_FLAG(bool, baselines, true, "Also run the TCP pump and plain gRPC baselines");
ABSL_FLAG(bool, tls, false,
          "Also run psflow's transport over mutual TLS (certificates of a CA made for the run, as "
          "the operator and `psflow run` give every job) and print its GB/s, CPU s per GB and "
          "ratio to the plaintext run");
ABSL_FLAG(bool, sync_overhead, true,
          "Also measure the sync-mode step (2 workers, aggregate 2) against async");

namespace psflow::bench {
namespace {

std::vector<int> IntList(const std::string& flag) {
  std::vector<int> out;
  for (absl::string_view s : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    int v = 0;
    if (absl::SimpleAtoi(s, &v) && v > 0) out.push_back(v);
  }
  return out;
}

std::unique_ptr<nn::ParameterSet> MakeModel(int64_t bytes) {
  auto p = std::make_unique<nn::ParameterSet>();
  const int64_t per_variable = std::max<int64_t>(1, bytes / 4 / 8);
  const int64_t cols = 256;
  for (int i = 0; i < 8; ++i) {
    p->Declare(absl::StrCat("v", i), {std::max<int64_t>(1, per_variable / cols), cols},
               nn::Initializer::Uniform(0.1f));
  }
  p->Finalize();
  return p;
}

struct Figures {
  TransferResult transfer;
  double step_ms = 0;
};

// Mutual TLS for a ps task on 127.0.0.1 and for a worker, under one CA made for the run.
struct RunSecurity {
  TransportSecurity ps;
  TransportSecurity worker;
};

absl::StatusOr<RunSecurity> MakeRunSecurity() {
  ASSIGN_OR_RETURN(const CertificateAuthority ca,
                   CertificateAuthority::Create("bench CA", absl::Hours(1)));
  ASSIGN_OR_RETURN(
      PemCertificate ps,
      ca.Issue({.common_name = "ps", .dns_names = {"localhost"}, .ip_addresses = {"127.0.0.1"}},
               absl::Hours(1)));
  ASSIGN_OR_RETURN(PemCertificate worker,
                   ca.Issue({.common_name = "worker", .dns_names = {"worker"}, .ip_addresses = {}},
                            absl::Hours(1)));
  return RunSecurity{TransportSecurity::MutualTls(ca.pem().certificate, std::move(ps)),
                     TransportSecurity::MutualTls(ca.pem().certificate, std::move(worker))};
}

// One of --transports: how the workers reach the ps tasks.
struct Channel {
  Transport transport = Transport::kBulk;
  bool shared_memory = false;  // the tasks offer the bulk channel through shared memory too
};

// `security`: plaintext when null.
absl::StatusOr<Figures> RunPsflow(const TransferPattern& pattern, bool sync, Channel channel,
                                  const RunSecurity* security = nullptr) {
  const Transport transport = channel.transport;
  std::vector<std::unique_ptr<LoopbackPs>> tasks;
  std::vector<std::string> addresses;
  for (int t = 0; t < pattern.ps_tasks; ++t) {
    const std::string local_socket =
        channel.shared_memory ? (std::filesystem::temp_directory_path() /
                                 absl::StrCat("psflow-bench-", getpid(), "-", t, ".sock"))
                                    .string()
                              : "";
    tasks.push_back(std::make_unique<LoopbackPs>(
        security != nullptr ? security->ps : TransportSecurity(), 0, true, local_socket));
    if (!tasks.back()->started()) {
      return absl::UnavailableError("psflow: a loopback ps task did not start");
    }
    addresses.push_back(tasks.back()->address());
  }
  std::vector<std::unique_ptr<nn::ParameterSet>> models;
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < pattern.workers; ++w) {
    models.push_back(MakeModel(pattern.model_bytes));
    PsClient::Options o;
    o.ps_addresses = addresses;
    o.training.optimizer.set_name("sgd");
    o.training.optimizer.set_learning_rate(1e-6f);
    o.training.sync.set_total_workers(pattern.workers);
    o.training.sync.set_sync_replicas(sync);
    o.training.worker_index = w;
    o.connections_per_task = absl::GetFlag(FLAGS_connections);
    o.transport = transport;
    if (security != nullptr) o.security = security->worker;
    auto c = PsClient::Create(o, *models.back());
    if (!c.ok()) return c.status();
    clients.push_back(std::move(*c));
  }
  models[0]->Initialize(1);
  if (absl::Status s = clients[0]->Prepare(*models[0], true); !s.ok()) return s;
  for (int w = 1; w < pattern.workers; ++w) {
    if (absl::Status s = clients[w]->Prepare(*models[w], false); !s.ok()) return s;
  }
  int64_t model_bytes = 0;
  for (const auto& d : models[0]->descs()) model_bytes += d.size * 4;

  auto run_rounds = [&](int rounds) -> absl::Status {
    std::vector<absl::Status> status(static_cast<size_t>(pattern.workers));
    std::vector<std::thread> threads;
    for (int w = 0; w < pattern.workers; ++w) {
      threads.emplace_back([&, w] {
        for (int r = 0; r < rounds && status[w].ok(); ++r) {
          auto pushed = clients[w]->Push(*models[w], 1);
          if (!pushed.ok()) status[w] = pushed.status();
          auto pulled = clients[w]->Pull(*models[w]);
          if (!pulled.ok()) status[w] = pulled.status();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (const auto& s : status) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  };
  // The first pull makes every worker's step current.
  for (int w = 0; w < pattern.workers; ++w) {
    if (auto p = clients[w]->Pull(*models[w]); !p.ok()) return p.status();
  }
  if (absl::Status s = run_rounds(static_cast<int>(pattern.warmup_rounds)); !s.ok()) return s;
  const CpuTime cpu0 = ProcessCpu();
  const auto t0 = std::chrono::steady_clock::now();
  if (absl::Status s = run_rounds(pattern.rounds); !s.ok()) return s;
  Figures f;
  f.transfer.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const CpuTime cpu1 = ProcessCpu();
  f.transfer.cpu_seconds = cpu1.total - cpu0.total;
  f.transfer.kernel_seconds = cpu1.kernel - cpu0.kernel;
  f.transfer.bytes_moved = 2 * model_bytes * pattern.workers * pattern.rounds;
  f.step_ms = 1e3 * f.transfer.seconds / pattern.rounds;
  return f;
}

double CpuPerGb(const TransferResult& r) { return r.cpu_seconds / (r.bytes_moved / 1e9); }
double KernelPerGb(const TransferResult& r) { return r.kernel_seconds / (r.bytes_moved / 1e9); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct TransportRun {
  Channel channel;
  std::string name;
  std::vector<double> vs_tcp, ceiling;
};

int Main() {
  const bool tls = absl::GetFlag(FLAGS_tls);
  std::optional<RunSecurity> security;
  if (tls) {
    absl::StatusOr<RunSecurity> made = MakeRunSecurity();
    if (!made.ok()) {
      std::fprintf(stderr, "certificates: %s\n", std::string(made.status().message()).c_str());
      return 1;
    }
    security = *std::move(made);
  }
  std::vector<TransportRun> runs;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_transports), ',', absl::SkipEmpty())) {
    const bool shm = name == "shm";
    absl::StatusOr<Transport> t = shm ? Transport::kBulk : ParseTransport(name);
    if (!t.ok()) {
      std::fprintf(stderr, "--transports: %s (or shm)\n",
                   std::string(t.status().message()).c_str());
      return 1;
    }
    runs.push_back({{*t, shm}, std::string(name), {}, {}});
  }
  if (runs.empty()) {
    std::fprintf(stderr, "--transports names none\n");
    return 1;
  }
  std::printf(
      "ps transport on loopback, in one process; GB/s of payload (push + pull), CPU s per GB%s\n",
      tls ? "; psflow in plaintext and over mutual TLS" : "");
  std::printf("%8s %3s %3s %6s | %8s %6s %6s | %8s %6s", "model", "W", "P", "rounds", "tcp GB/s",
              "cpu/GB", "sys/GB", "grpc GB/s", "cpu/GB");
  for (const TransportRun& r : runs) {
    std::printf(" | %4s GB/s %6s %6s %7s", r.name.c_str(), "cpu/GB", "sys/GB", "vs tcp");
  }
  if (tls) std::printf(" | %8s %6s %9s", "tls GB/s", "cpu/GB", "tls/plain");
  std::printf("\n");
  // Per configuration and transport, with the baselines: psflow / the pump, and the pump's CPU s
  // per GB over psflow's kernel s per GB.
  for (int mib : IntList(absl::GetFlag(FLAGS_model_mib))) {
    for (int w : IntList(absl::GetFlag(FLAGS_workers))) {
      for (int p : IntList(absl::GetFlag(FLAGS_ps_tasks))) {
        TransferPattern pattern;
        pattern.workers = w;
        pattern.ps_tasks = p;
        pattern.model_bytes = int64_t{mib} << 20;
        pattern.rounds = absl::GetFlag(FLAGS_rounds);
        if (pattern.rounds == 0) {
          pattern.rounds = static_cast<int>(
              std::clamp<int64_t>((int64_t{2} << 30) / (2 * pattern.model_bytes * w), 3, 50));
        }
        TransferResult tcp, grpc_bytes;
        if (absl::GetFlag(FLAGS_baselines)) {
          auto t = RunTcpPump(pattern);
          auto g = RunGrpcBytes(pattern);
          if (!t.ok() || !g.ok()) {
            std::fprintf(stderr, "baseline failed: %s\n",
                         std::string((!t.ok() ? t.status() : g.status()).message()).c_str());
            return 1;
          }
          tcp = *t;
          grpc_bytes = *g;
        }
        const double base_tcp = tcp.seconds > 0 ? tcp.gb_per_s() : 0;
        const double base_grpc = grpc_bytes.seconds > 0 ? grpc_bytes.gb_per_s() : 0;
        std::printf("%5d MiB %3d %3d %6d | %8.2f %6.2f %6.2f | %8.2f %6.2f", mib, w, p,
                    pattern.rounds, base_tcp, base_tcp > 0 ? CpuPerGb(tcp) : 0,
                    base_tcp > 0 ? KernelPerGb(tcp) : 0, base_grpc,
                    base_grpc > 0 ? CpuPerGb(grpc_bytes) : 0);
        double plain = 0;  // the last transport's, in plaintext
        for (TransportRun& r : runs) {
          auto ps = RunPsflow(pattern, /*sync=*/false, r.channel);
          if (!ps.ok()) {
            std::fprintf(stderr, "\npsflow (%s) failed: %s\n", r.name.c_str(),
                         std::string(ps.status().message()).c_str());
            return 1;
          }
          const double rate = ps->transfer.gb_per_s();
          plain = rate;
          std::printf(" | %9.2f %6.2f %6.2f %7.2f", rate, CpuPerGb(ps->transfer),
                      KernelPerGb(ps->transfer), base_tcp > 0 ? rate / base_tcp : 0);
          if (base_tcp > 0) r.vs_tcp.push_back(rate / base_tcp);
          // getrusage splits user and kernel time by sampling: a short run can show no kernel
          // time.
          if (base_tcp > 0 && KernelPerGb(ps->transfer) > 0) {
            r.ceiling.push_back(CpuPerGb(tcp) / KernelPerGb(ps->transfer));
          }
        }
        if (security) {
          auto secure = RunPsflow(pattern, /*sync=*/false, runs.back().channel, &*security);
          if (!secure.ok()) {
            std::fprintf(stderr, "\npsflow over TLS failed: %s\n",
                         std::string(secure.status().message()).c_str());
            return 1;
          }
          std::printf(" | %8.2f %6.2f %9.2f", secure->transfer.gb_per_s(),
                      CpuPerGb(secure->transfer),
                      plain > 0 ? secure->transfer.gb_per_s() / plain : 0);
        }
        std::printf("\n");
        std::fflush(stdout);
      }
    }
  }
  for (const TransportRun& r : runs) {
    if (r.vs_tcp.empty() || r.ceiling.empty()) continue;
    // Where every task is CPU-bound (loopback on few cores) a rate is the cores over the CPU
    // seconds per GB: psflow could not pass the pump's rate times the pump's CPU per GB over
    // psflow's kernel share, even if its own code cost nothing.
    std::printf(
        "\n%s: median psflow / TCP pump over %zu configurations: %.2f (%.2f-%.2f); CPU-bound "
        "ceiling, the pump's CPU s/GB over psflow's sys s/GB: median %.2f (%.2f-%.2f)",
        r.name.c_str(), r.vs_tcp.size(), Median(r.vs_tcp),
        *std::min_element(r.vs_tcp.begin(), r.vs_tcp.end()),
        *std::max_element(r.vs_tcp.begin(), r.vs_tcp.end()), Median(r.ceiling),
        *std::min_element(r.ceiling.begin(), r.ceiling.end()),
        *std::max_element(r.ceiling.begin(), r.ceiling.end()));
  }
  std::printf("\n");
  if (absl::GetFlag(FLAGS_sync_overhead)) {
    std::printf(
        "\nsync-mode step (2 workers, aggregate 2, 1 ps, %s) vs async, push + pull per step\n",
        runs.back().name.c_str());
    std::printf("%8s %10s %10s %8s\n", "model", "async ms", "sync ms", "ratio");
    for (int mib : {1, 16}) {
      TransferPattern pattern;
      pattern.workers = 2;
      pattern.ps_tasks = 1;
      pattern.model_bytes = int64_t{mib} << 20;
      pattern.rounds = mib == 1 ? 200 : 20;
      auto a = RunPsflow(pattern, false, runs.back().channel);
      auto s = RunPsflow(pattern, true, runs.back().channel);
      if (!a.ok() || !s.ok()) {
        std::fprintf(stderr, "sync overhead run failed: %s\n",
                     std::string((!a.ok() ? a.status() : s.status()).message()).c_str());
        return 1;
      }
      std::printf("%5d MiB %10.3f %10.3f %8.2f\n", mib, a->step_ms, s->step_ms,
                  s->step_ms / a->step_ms);
    }
  }
  return 0;
}

}  // namespace
}  // namespace psflow::bench

int main(int argc, char** argv) {
  psflow::KeepFreedMemoryForReuse();
  psflow::ParseFlags(argc, argv,
                     "moves a model between psflow-ps and worker tasks and compares psflow with a "
                     "raw TCP pump and plain gRPC (docs/benchmarks.md)");
  return psflow::bench::Main();
}
