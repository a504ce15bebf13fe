// The TrainingJob controller: three informers (TrainingJobs; the pods and services labelled
// psflow.io/job-name), a rate-limited work queue of job keys, and N workers running the
// Reconciler. Pod and service events enqueue their job; reconcile reads the informers' caches
// only, so an idle operator sends no requests besides its watches. With a throughput interval,
// a ThroughputProbe thread scrapes the running jobs' workers and enqueues a job whose rates
// changed.
#ifndef PSFLOW_OPERATOR_CONTROLLER_CONTROLLER_H_
#define PSFLOW_OPERATOR_CONTROLLER_CONTROLLER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <stop_token>
#include <string>

#include "absl/status/status.h"
#include "operator/controller/cluster_view.h"
#include "operator/controller/event_recorder.h"
#include "operator/controller/expectations.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/reconciler.h"
#include "operator/controller/throughput_probe.h"
#include "operator/controller/work_queue.h"
#include "operator/kube/informer.h"
#include "operator/kube/kube_client.h"

namespace psflow::controller {

struct ControllerOptions {
  std::string ns;  // the namespace watched; empty: all
  int workers = 4;
  int64_t watch_timeout_seconds = 300;
  std::chrono::milliseconds informer_backoff_initial{200};
  std::chrono::milliseconds informer_backoff_max{std::chrono::seconds(30)};
  std::chrono::milliseconds metrics_period{std::chrono::seconds(5)};
  absl::Duration expectations_ttl = absl::Minutes(5);
  WorkQueue::Options queue;
  ReconcilerOptions reconciler;
  std::string component = "psflow-operator";  // Events' source
  // How often the throughput probe scrapes the running jobs' workers (throughput_probe.h);
  // zero: never (status.throughput is then left as it is).
  absl::Duration throughput_interval = absl::ZeroDuration();
  std::chrono::milliseconds throughput_scrape_timeout{2000};
};

class Controller {
 public:
  // `metrics` may be null.
  Controller(kube::KubeClient& client, ControllerOptions options, OperatorMetrics* metrics);
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Starts the informers, waits for their first lists, then reconciles until `stop` is
  // requested; drains the workers and stops the informers before returning.
  void Run(std::stop_token stop);
  // True once the caches hold their first lists (for /readyz).
  bool Synced() const { return synced_.load(); }
  int64_t reconciles() const { return reconciles_.load(); }

 private:
  class InformerView;
  void Worker();
  // What the informers saw of an object a TrainingJob owns (its job label names the job).
  enum class OwnedChange { kPodAdded, kPodUpdated, kPodGone, kService };
  // Enqueues the job named by the object's psflow.io/job-name label; for pods, counts what the
  // change shows against the job's expectations (a creation, a deletion) first.
  void EnqueueOwner(const kube::Json& object, OwnedChange change);
  void PublishGauges();
  // The jobs the probe measures and their pods, from the caches.
  std::vector<ProbedJob> ProbedJobs() const;

  kube::KubeClient& client_;
  ControllerOptions options_;
  OperatorMetrics* metrics_;
  WorkQueue queue_;
  Expectations expectations_;
  EventRecorder events_;
  std::unique_ptr<kube::Informer> jobs_;
  std::unique_ptr<kube::Informer> pods_;
  std::unique_ptr<kube::Informer> services_;
  std::unique_ptr<InformerView> view_;
  std::unique_ptr<ThroughputProbe> probe_;  // null when the throughput interval is zero
  std::unique_ptr<Reconciler> reconciler_;
  std::atomic<bool> synced_{false};
  std::atomic<bool> stopping_{false};  // set before the queue shuts down: workers only drain
  std::atomic<int64_t> reconciles_{0};
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_CONTROLLER_H_
