// psflow-ps: one parameter-server task. Serves the ParameterServer gRPC service on the port of
// its own address in the cluster spec until SIGTERM or SIGINT, then shuts down gracefully.
#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/certificates.h"
#include "core/free_ports.h"
#include "core/grpc_tuning.h"
#include "core/log.h"
#include "core/memory_limit.h"
#include "core/metrics.h"
#include "core/status_macros.h"
#include "core/task_flags.h"
#include "core/task_main.h"
#include "ps/bulk_server.h"
#include "ps/checkpoint.h"
#include "ps/checkpoint_scheduler.h"
#include "ps/ps_service.h"
#include "ps/ps_state.h"

ABSL_FLAG(std::string, bind_address, "0.0.0.0",
          "Address to listen on; the port comes from this task's address in the cluster spec");
ABSL_FLAG(int, shutdown_grace_s, 5,
          "Seconds in-flight calls get to finish on SIGTERM (with --checkpoint_dir, also a sync "
          "step partly applied, before the final checkpoint)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Folder for this task's checkpoints (<dir>/ps-<task>/); empty: no checkpoints. On "
          "start the newest valid checkpoint there is restored");
ABSL_FLAG(double, checkpoint_every_s, 60, "Seconds between checkpoints (0: not by time)");
ABSL_FLAG(int64_t, checkpoint_every_steps, 0,
          "A checkpoint as the global step reaches each multiple of this (0: not by steps)");
ABSL_FLAG(int, keep_checkpoints, 3, "Checkpoints kept per task");
ABSL_FLAG(int64_t, max_variable_bytes, 0,
          "Most bytes this task's variables may take with their optimizer slots (and sync "
          "accumulators); a model that needs more is refused at initialisation with "
          "RESOURCE_EXHAUSTED. 0: 90% of the container's memory limit (cgroup), else of the "
          "machine's physical memory");
ABSL_FLAG(std::string, transport, "bulk",
          "bulk: also serve the bulk channel for tensor bytes (under mutual TLS with the same "
          "certificates as gRPC); grpc: serve gRPC only");
ABSL_FLAG(int, bulk_port, -1,
          "Port of the bulk channel: -1 $PSFLOW_BULK_PORT (the operator sets it), else this "
          "task's gRPC port + 1 (a port the OS picks where that one is taken); 0 a port the OS "
          "picks. Workers learn it over gRPC");
ABSL_FLAG(
    std::string, bulk_socket, "",
    "Also serve the workers of this host the bulk channel through shared memory, at a Unix "
    "socket at this path, or @name for Linux's abstract namespace (2 to 107 characters; "
    "empty: $PSFLOW_BULK_SOCKET, which psflow run sets; neither: not). Workers learn it, with "
    "a token, over gRPC, and use TCP where they cannot reach it: for pods, a path in a "
    "volume the ps and worker pods of one node mount, or @name between hostNetwork pods");
ABSL_FLAG(int, max_bulk_connections, psflow::BulkServer::kDefaultMaxConnections,
          "Bulk channel connections served at once (each takes two threads); more are closed at "
          "once and their workers use gRPC. A job needs one per worker and evaluator");
ABSL_FLAG(double, push_timeout_s, 30,
          "Seconds a worker's push may stay incomplete (a worker killed mid-push) before it is "
          "given up: sync mode drops its pieces and completes the step without it. Keep it under "
          "the workers' --ps_timeout_s");

namespace psflow {
namespace {

// The bulk channel's port (--bulk_port, see its help): -1 for "the gRPC port + 1, else one the
// OS picks", 0 for one the OS picks, or the port.
absl::StatusOr<int> ResolveBulkPort() {
  int flag = absl::GetFlag(FLAGS_bulk_port);
  if (flag < -1 || flag > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bulk_port must be -1, 0 or a port number, got ", flag));
  }
  if (const char* env = std::getenv("PSFLOW_BULK_PORT"); flag == -1 && env != nullptr && *env) {
    if (!absl::SimpleAtoi(env, &flag) || flag < 1 || flag > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("PSFLOW_BULK_PORT=\"", env, "\" is not a port number"));
    }
  }
  return flag;
}

// The bulk channel's server on --bind_address, at `flag` (ResolveBulkPort).
absl::StatusOr<std::unique_ptr<BulkServer>> StartBulkServer(PsState& state, PsMetrics* metrics,
                                                            int grpc_port, int flag,
                                                            const TransportSecurity& security) {
  const std::string bind = absl::GetFlag(FLAGS_bind_address);
  const int wanted = flag == -1 ? (grpc_port < 65535 ? grpc_port + 1 : 0) : flag;
  BulkServer::Options options;
  options.bind_address = bind;
  options.port = wanted;
  options.max_connections = absl::GetFlag(FLAGS_max_bulk_connections);
  options.local_socket = absl::GetFlag(FLAGS_bulk_socket);
  if (const char* env = std::getenv("PSFLOW_BULK_SOCKET");
      options.local_socket.empty() && env != nullptr) {
    options.local_socket = env;
  }
  if (security.tls()) {
    ASSIGN_OR_RETURN(options.tls, BulkTlsContext::Make(security, BulkTlsContext::Role::kServer));
  }
  absl::StatusOr<std::unique_ptr<BulkServer>> bulk = BulkServer::Start(state, metrics, options);
  // Only a port that cannot be had is worth another try (bad options fail the same way again).
  if (!bulk.ok() && !absl::IsInvalidArgument(bulk.status()) &&
      !absl::IsFailedPrecondition(bulk.status()) && flag == -1 && wanted != 0) {
    PSFLOW_LOG(INFO) << "bulk channel: port " << wanted << " is taken (" << bulk.status().message()
                     << "); using one the OS picks";
    options.port = 0;
    bulk = BulkServer::Start(state, metrics, options);
  }
  if (!bulk.ok()) {
    return absl::Status(bulk.status().code(),
                        absl::StrCat("bulk channel: ", bulk.status().message()));
  }
  PSFLOW_LOG(INFO) << "bulk channel on " << bind << ":" << (*bulk)->port() << " ("
                   << security.Describe() << ")"
                   << ((*bulk)->local_socket().empty()
                           ? ""
                           : absl::StrCat(", and through shared memory for workers of this host "
                                          "at ",
                                          (*bulk)->local_socket()));
  return bulk;
}

// What the task is told, resolved and checked before anything starts (--check_config stops
// here; the checkpoint folder, the certificate and the ports are checked by Main).
struct PsSettings {
  ClusterSpec spec;
  int port = 0;  // of this task's address in the cluster spec
  int metrics_port = -1;
  int bulk_port = -1;  // ResolveBulkPort
  std::string transport;
  CheckpointScheduler::Options schedule;
  PsState::Options state;
};

absl::StatusOr<PsSettings> ResolvePsSettings() {
  PsSettings s;
  ASSIGN_OR_RETURN(s.spec, ResolveClusterSpec());
  if (s.spec.task.type != "ps") {
    return absl::InvalidArgumentError(absl::StrCat(
        "psflow-ps runs ps tasks, but the cluster spec says task type \"", s.spec.task.type, "\""));
  }
  const std::string& self = s.spec.SelfAddress();
  if (!absl::SimpleAtoi(self.substr(self.rfind(':') + 1), &s.port)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in ", self));
  }
  ASSIGN_OR_RETURN(s.metrics_port, ResolveMetricsPort());
  const int keep = absl::GetFlag(FLAGS_keep_checkpoints);
  if (keep < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--keep_checkpoints must be >= 1 (got ", keep, ")"));
  }
  s.schedule = {.every_s = absl::GetFlag(FLAGS_checkpoint_every_s),
                .every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps)};
  RETURN_IF_ERROR(CheckpointScheduler::Check(s.schedule));
  const double push_timeout_s = absl::GetFlag(FLAGS_push_timeout_s);
  if (!(push_timeout_s >= 1) || push_timeout_s > 86400) {
    return absl::InvalidArgumentError(
        absl::StrCat("--push_timeout_s must be in [1, 86400] (got ", push_timeout_s, ")"));
  }
  s.state.task = s.spec.task.index;
  s.state.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  s.state.keep_checkpoints = keep;
  s.state.incomplete_push_timeout =
      std::chrono::milliseconds(static_cast<int64_t>(push_timeout_s * 1000));
  if (const int64_t given = absl::GetFlag(FLAGS_max_variable_bytes); given != 0) {
    if (given < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("--max_variable_bytes must be >= 0 (got ", given, ")"));
    }
    s.state.max_variable_bytes = given;
    s.state.max_variable_bytes_source = "--max_variable_bytes";
  } else {
    // Headroom for gRPC's buffers, sync staging and the checkpoint's copy.
    const MemoryLimit limit = ProcessMemoryLimit();
    s.state.max_variable_bytes = limit.bytes / 10 * 9;
    s.state.max_variable_bytes_source = absl::StrCat("90% of ", limit.source);
  }
  s.transport = absl::GetFlag(FLAGS_transport);
  if (s.transport != "bulk" && s.transport != "grpc") {
    return absl::InvalidArgumentError(
        absl::StrCat("--transport must be bulk or grpc, got \"", s.transport, "\""));
  }
  if (s.transport == "bulk") {
    ASSIGN_OR_RETURN(s.bulk_port, ResolveBulkPort());
  }
  return s;
}

// --check_config: the task and what it keeps, as one line.
absl::StatusOr<std::string> CheckConfig() {
  ASSIGN_OR_RETURN(const PsSettings s, ResolvePsSettings());
  return absl::StrCat("valid: ps task ", s.spec.task.index, " of ", s.spec.Tasks("ps").size(),
                      " on port ", s.port, ", transport ", s.transport,
                      // None in the args may still be some: the operator adds a spec's own.
                      s.state.checkpoint_dir.empty()
                          ? ""
                          : absl::StrCat(", checkpoints in ", s.state.checkpoint_dir));
}

absl::Status Main(const TransportSecurity& security) {
  // Block the stop signals in every thread (gRPC's included); one thread takes them by sigwait.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  ASSIGN_OR_RETURN(PsSettings settings, ResolvePsSettings());
  const ClusterSpec& spec = settings.spec;
  const std::string& self = spec.SelfAddress();
  const std::string port = absl::StrCat(settings.port);
  if (security.tls()) {
    // Workers reach this task at its cluster-spec host and check that the certificate names it:
    // one that does not would have every worker wait on "Peer name ... is not in peer
    // certificate" while this task serves nobody.
    const std::string host = self.substr(0, self.rfind(':'));
    ASSIGN_OR_RETURN(const std::vector<std::string> names,
                     SubjectAltNames(security.own_pem().certificate));
    if (!NamesHost(names, host)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the certificate of --tls_cert names ", absl::StrJoin(names, ", "), " but not ", host,
          ", this ps task's host in the cluster spec: every worker would refuse it"));
    }
  }
  PsState::Options& options = settings.state;
  if (!options.checkpoint_dir.empty()) {
    const absl::Status writable =
        CheckpointDir(options.checkpoint_dir, spec.task.index, options.keep_checkpoints)
            .CheckWritable();
    if (!writable.ok()) {
      return absl::Status(writable.code(), absl::StrCat("--checkpoint_dir: ", writable.message()));
    }
  }

  std::unique_ptr<MetricsEndpoint> endpoint;
  std::unique_ptr<PsMetrics> metrics;
  if (settings.metrics_port >= 0) {
    ASSIGN_OR_RETURN(endpoint, MetricsEndpoint::Start("0.0.0.0", settings.metrics_port));
    metrics =
        std::make_unique<PsMetrics>(endpoint->registry(), StandardLabels("ps", spec.task.index));
    PSFLOW_LOG(INFO) << "metrics on :" << endpoint->port() << "/metrics";
  }

  // gRPC would bind with SO_REUSEPORT (two ps tasks could then share a port unnoticed) and
  // report a taken port in a multi-line dump; check first and refuse port sharing.
  const int port_number = settings.port;
  if (absl::Status s = CheckCanListen(absl::GetFlag(FLAGS_bind_address), port_number); !s.ok()) {
    return absl::UnavailableError(absl::StrCat("ps task ", spec.task.index, " ", s.message()));
  }
  const CheckpointScheduler::Options schedule = settings.schedule;
  const std::string transport = settings.transport;
  PsState state(std::move(options), metrics.get());
  RETURN_IF_ERROR(state.RestoreFromCheckpoint().status());
  PsService service(state, metrics.get());
  // Started before gRPC serves, so every worker that reaches the task finds it.
  std::unique_ptr<BulkServer> bulk;
  if (transport == "bulk") {
    ASSIGN_OR_RETURN(
        bulk, StartBulkServer(state, metrics.get(), port_number, settings.bulk_port, security));
    service.AdvertiseBulkChannel(*bulk);
  }
  grpc::ServerBuilder builder;
  const std::string listen = absl::StrCat(absl::GetFlag(FLAGS_bind_address), ":", port);
  int bound_port = 0;
  builder.AddListeningPort(listen, security.ServerCredentials(), &bound_port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  ApplyBulkTuning(builder);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    return absl::UnavailableError(
        absl::StrCat("ps task ", spec.task.index, " cannot listen on ", listen, " (port in use?)"));
  }
  PSFLOW_LOG(INFO) << "ps task " << spec.task.index << " of " << spec.Tasks("ps").size()
                   << " serving on " << listen << " (" << security.Describe() << ")";

  std::optional<CheckpointScheduler> checkpoints;
  if (!absl::GetFlag(FLAGS_checkpoint_dir).empty()) checkpoints.emplace(state, schedule);
  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    PSFLOW_LOG(INFO) << "signal " << sig << ": shutting down";
    if (checkpoints.has_value()) {
      // A sync step partly applied gets the grace to finish while the ps still serves; then no
      // more gradients are taken, so the final checkpoint holds whole steps and every update.
      const auto grace = std::chrono::seconds(absl::GetFlag(FLAGS_shutdown_grace_s));
      if (!state.StopUpdates(grace)) {
        PSFLOW_LOG(WARNING) << "step " << state.global_step() << " still partly applied after "
                            << grace.count() << "s (--shutdown_grace_s): a worker's push is "
                            << "incomplete";
      }
    }
    service.Stop();
    if (bulk != nullptr) bulk->Stop();
    server->Shutdown(std::chrono::system_clock::now() +
                     std::chrono::seconds(absl::GetFlag(FLAGS_shutdown_grace_s)));
  });
  server->Wait();  // every gRPC call has ended
  stopper.join();
  // Every bulk connection's threads joined: a push one of them was still applying when the
  // signal came is applied before the final checkpoint, not after it (the checkpoint held step
  // N-1 while the task stopped at N: a SIGTERM'd task lost a step on restart).
  bulk.reset();
  if (checkpoints.has_value()) {
    // The last checkpoint: without it a restart of this task loses the steps since the one before.
    if (absl::Status last = checkpoints->Stop(); !last.ok()) {
      return absl::Status(last.code(),
                          absl::StrCat("ps task ", spec.task.index,
                                       ": the final checkpoint failed (a restart would resume from "
                                       "the one before): ",
                                       last.message()));
    }
  }
  PSFLOW_LOG(INFO) << "ps task " << spec.task.index
                   << " stopped: global_step=" << std::max<int64_t>(0, state.global_step());
  return absl::OkStatus();
}

}  // namespace
}  // namespace psflow

int main(int argc, char** argv) {
  return psflow::RunTaskMain(
      argc, argv, "psflow-ps",
      "one parameter-server task: holds its share of the variables, applies the workers' "
      "gradients.\n"
      "  psflow-ps [flags]  with $TF_CONFIG set, or with --job_name=ps --task_index=N\n"
      "      --ps_hosts=H:P,... --worker_hosts=H:P,...  [--tls_ca=F --tls_cert=F --tls_key=F]",
      psflow::Main, psflow::CheckConfig);
}
