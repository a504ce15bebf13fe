// `psflow run`: runs a TrainingJob on this machine, each replica a local process.
//
// Every replica gets TF_CONFIG naming free 127.0.0.1 ports, PSFLOW_JOB_NAME,
// PSFLOW_REPLICA_TYPE/INDEX and PSFLOW_METRICS_PORT. Unless spec.tls.enabled is false, the
// replicas talk over mutual TLS: each gets --tls_ca, --tls_cert and --tls_key appended to its
// command, naming files of a private temporary folder removed when the run ends
// (local_certificates.h). Each replica's output goes to
// <run folder>/<replica>.log (run_folder.h; the folder is printed at the start and the end), and
// to stdout prefixed with the replica name only when `verbose`. A progress display (steps of the
// total, percentage, examples/s or words/s, loss, elapsed time, ETA: progress_bar.h) comes from
// scraping the replicas' /metrics. When a replica fails, its last lines and its log's path are
// printed; when the job ends, a table of every replica's exit and figures (run_summary.h).
// What happens when a replica exits is the operator's rule too (api/job_policy.h):
// restartPolicy and backoffLimit (default 6) decide restarts, an evaluator never decides the
// outcome, and the job succeeds per successPolicy; the remaining workers then get a grace period
// to finish, and the ps tasks are stopped. runPolicy.activeDeadlineSeconds passing fails the job.
// From the start of RunLocally, SIGINT or SIGTERM stops every child (SIGTERM, then SIGKILL after
// stop_grace or at a second signal). At most 64 replicas.
// With emulate_network, every replica runs in a network namespace of its own behind a shaped link
// (network_emulation.h): TF_CONFIG names the replicas' addresses there, the progress display
// scrapes them from a thread that joins the namespaces' bridge, and the namespaces are deleted
// when the run ends, however it ends (short of SIGKILL: the next emulated run deletes those).
#ifndef PSFLOW_OPERATOR_LOCAL_RUNNER_H_
#define PSFLOW_OPERATOR_LOCAL_RUNNER_H_

#include <chrono>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "operator/api/training_job.h"
#include "operator/local/link_shape.h"

namespace psflow::local {

struct RunOptions {
  enum class Progress { kAuto, kAlways, kNever };
  // kAuto: a live line redrawn in place when stdout is a terminal, else a plain line every
  // `progress_every`; kAlways: the live line even when stdout is not a terminal.
  Progress progress = Progress::kAuto;
  std::chrono::seconds progress_every{10};
  // The folder for the replicas' logs; empty: psflow-runs/<job>-<time> in the working directory.
  // A folder that cannot be written stops the run before any replica starts.
  std::string run_dir;
  // Also stream every replica's output to stdout, each line prefixed "[<replica>] ".
  bool verbose = false;
  // Between SIGTERM and SIGKILL when stopping replicas.
  std::chrono::seconds stop_grace{10};
  // When set: a Prometheus file_sd JSON file listing every replica's metrics endpoint
  // (127.0.0.1:<port>, labels job, replica_type, replica_index), written before any replica
  // starts and emptied ("[]") as the run ends, before the replicas are stopped; each time
  // atomically (a temporary file renamed over it). A path that cannot be written stops the run
  // before it starts.
  std::string prometheus_targets;
  // When set: each replica in its own network namespace, its link shaped so. Needs root and
  // iproute2 (checked before anything starts); not with prometheus_targets (Prometheus, in this
  // machine's own namespace, cannot reach the replicas').
  std::optional<LinkShape> emulate_network;
};

enum class JobOutcome { kSucceeded, kFailed, kInterrupted };

// Runs the job to its end. Errors only for what stops it from starting (a replica without a
// command, a command that cannot be run, no free ports, a run folder or prometheus_targets path
// that cannot be written, an emulated network that cannot be set up); every started process is
// stopped then, and every namespace created deleted.
absl::StatusOr<JobOutcome> RunLocally(const api::TrainingJob& job, const RunOptions& options);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_RUNNER_H_
