// Measures each running TrainingJob's throughput the way Prometheus would: every `interval` it
// GETs /metrics of the job's worker and chief pods and turns the counters
// psflow_worker_examples_total / psflow_worker_words_total into rates (throughput_rate.h). The
// reconciler reads the latest rates (Latest) and writes them to status.throughput, which the
// CRD's WORDS/S and EXAMPLES/S columns show.
//
// Which jobs and pods: `list_jobs` (the controller answers from its informer caches) names the
// jobs in state Running or Restarting and their scrape targets (ScrapeTargets). A job no longer
// listed (finished, suspended, deleted) is dropped: its status keeps the last value written,
// which is what the job last did.
//
// Threads: Run() scrapes on the caller's thread (the controller gives it one of its own, never a
// reconcile worker); Latest() may be called from any thread. Scrapes go one after another, each
// bounded by the scrape function's timeout, so an unreachable pod delays the round by at most
// that. A failed scrape logs one line per job per streak of failing rounds and never stops the
// probe.
#ifndef PSFLOW_OPERATOR_CONTROLLER_THROUGHPUT_PROBE_H_
#define PSFLOW_OPERATOR_CONTROLLER_THROUGHPUT_PROBE_H_

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "operator/controller/cluster_view.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/throughput_rate.h"

namespace psflow::controller {

// One pod's /metrics: http://<ip>:<port>/metrics.
struct ScrapeTarget {
  std::string uid;
  std::string name;
  std::string ip;
  int port = 0;
};

struct ProbedJob {
  std::string key;  // namespace/name, as queued
  std::vector<ScrapeTarget> targets;
};

// Whether the job's throughput is measured: status.state Running or Restarting.
bool ProbedState(const kube::Json& job);
// The pods of `job` to scrape: worker and chief pods it controls that are Running, not being
// deleted, and have a status.podIP; the port is the container port named "metrics" (9100 when
// no container names one).
std::vector<ScrapeTarget> ScrapeTargets(const kube::Json& job, const std::vector<ObjectPtr>& pods);

class ThroughputProbe {
 public:
  using ListJobs = std::function<std::vector<ProbedJob>()>;
  // The body of the target's /metrics; any error counts as a failed scrape.
  using Scrape = std::function<absl::StatusOr<std::string>(const ScrapeTarget&)>;
  // Called (on the probe's thread) with a job's key when its rates appeared, changed by more
  // than change_fraction, or went away while the job is still probed.
  using Changed = std::function<void(const std::string& key)>;

  struct Options {
    absl::Duration interval = absl::Seconds(30);
    // A printer column needs no finer figure; each change costs a status write.
    double change_fraction = 0.05;
  };

  // `metrics` may be null; otherwise it must outlive the probe.
  ThroughputProbe(Options options, ListJobs list_jobs, Scrape scrape, Changed changed,
                  std::function<absl::Time()> now = absl::Now, OperatorMetrics* metrics = nullptr);

  // Probes now and then every interval (from each round's start) until `stop` is requested.
  void Run(std::stop_token stop);
  // One round: every listed job's pods scraped once, rates updated, Changed called.
  // Stops between jobs once `stop` is requested.
  void ProbeOnce(std::stop_token stop = {});
  // The job's latest rates; nullopt when it has none (not probed, or not two samples yet).
  std::optional<Throughput> Latest(const std::string& key) const;

 private:
  struct JobState {
    ThroughputRate rate;
    bool failing = false;  // the last round had a failed scrape (already logged)
  };
  // Scrapes one job; records the rates and returns whether they changed.
  bool ProbeJob(const ProbedJob& job, JobState& state);

  Options options_;
  ListJobs list_jobs_;
  Scrape scrape_;
  Changed changed_;
  std::function<absl::Time()> now_;
  OperatorMetrics* metrics_;
  std::map<std::string, JobState> jobs_;  // the probe's thread only
  mutable std::mutex mu_;
  std::map<std::string, Throughput> latest_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_THROUGHPUT_PROBE_H_
