#include "operator/controller/controller.h"

#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "core/http_get.h"
#include "core/log.h"
#include "operator/controller/job_status.h"
#include "operator/controller/replica_objects.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {

class Controller::InformerView : public ClusterView {
 public:
  InformerView(const kube::Informer& jobs, const kube::Informer& pods,
               const kube::Informer& services)
      : jobs_(jobs), pods_(pods), services_(services) {}
  ObjectPtr Job(const std::string& ns, const std::string& name) const override {
    return jobs_.Get(ns, name);
  }
  std::vector<ObjectPtr> Pods(const std::string& ns, const std::string& job) const override {
    return pods_.ListByLabel(ns, kJobNameLabel, job);
  }
  std::vector<ObjectPtr> Services(const std::string& ns, const std::string& job) const override {
    return services_.ListByLabel(ns, kJobNameLabel, job);
  }

 private:
  const kube::Informer& jobs_;
  const kube::Informer& pods_;
  const kube::Informer& services_;
};

Controller::Controller(kube::KubeClient& client, ControllerOptions options,
                       OperatorMetrics* metrics)
    : client_(client),
      options_(std::move(options)),
      metrics_(metrics),
      queue_(options_.queue),
      expectations_(options_.expectations_ttl),
      events_(client, options_.component) {
  kube::Informer::Options base;
  base.ns = options_.ns;
  base.watch_timeout_seconds = options_.watch_timeout_seconds;
  base.backoff_initial = options_.informer_backoff_initial;
  base.backoff_max = options_.informer_backoff_max;

  auto enqueue = [this](const kube::Json& job) { queue_.Add(kube::Key(job)); };
  jobs_ = std::make_unique<kube::Informer>(
      client_, kube::TrainingJobs(), base,
      kube::Informer::Handlers{
          enqueue, [enqueue](const kube::Json&, const kube::Json& job) { enqueue(job); }, enqueue});

  kube::Informer::Options owned = base;
  owned.label_selector = kJobNameLabel;  // only objects some TrainingJob owns
  pods_ = std::make_unique<kube::Informer>(
      client_, kube::Pods(), owned,
      kube::Informer::Handlers{
          [this](const kube::Json& o) { EnqueueOwner(o, OwnedChange::kPodAdded); },
          [this](const kube::Json&, const kube::Json& o) {
            EnqueueOwner(o, OwnedChange::kPodUpdated);
          },
          [this](const kube::Json& o) { EnqueueOwner(o, OwnedChange::kPodGone); }});
  const auto service = [this](const kube::Json& o) { EnqueueOwner(o, OwnedChange::kService); };
  services_ = std::make_unique<kube::Informer>(
      client_, kube::Services(), owned,
      kube::Informer::Handlers{
          service, [service](const kube::Json&, const kube::Json& o) { service(o); }, service});
  view_ = std::make_unique<InformerView>(*jobs_, *pods_, *services_);
  if (options_.throughput_interval > absl::ZeroDuration()) {
    ThroughputProbe::Options probe_options;
    probe_options.interval = options_.throughput_interval;
    const std::chrono::milliseconds timeout = options_.throughput_scrape_timeout;
    probe_ = std::make_unique<ThroughputProbe>(
        probe_options, [this] { return ProbedJobs(); },
        [timeout](const ScrapeTarget& target) {
          return HttpGet(target.ip, target.port, "/metrics", timeout);
        },
        [this](const std::string& key) { queue_.Add(key); }, absl::Now, metrics_);
    options_.reconciler.throughput = [this](const std::string& key) { return probe_->Latest(key); };
  }
  options_.reconciler.stopping = [this] { return stopping_.load(); };
  reconciler_ = std::make_unique<Reconciler>(client_, *view_, expectations_, events_, absl::Now,
                                             options_.reconciler);
}

Controller::~Controller() {
  queue_.ShutDown();
  services_->Stop();
  pods_->Stop();
  jobs_->Stop();
}

void Controller::EnqueueOwner(const kube::Json& object, OwnedChange change) {
  const std::string job = kube::Label(object, kJobNameLabel);
  if (job.empty()) return;
  const std::string key = kube::Key(kube::Namespace(object), job);
  if (change == OwnedChange::kPodAdded) expectations_.CreationObserved(key);
  if (change == OwnedChange::kPodGone) {
    expectations_.PodGone(key, kube::Uid(object));
  } else if (change != OwnedChange::kService && kube::BeingDeleted(object)) {
    expectations_.PodTerminating(key, kube::Uid(object));
  }
  queue_.Add(key);
}

void Controller::Worker() {
  while (std::optional<std::string> key = queue_.Get()) {
    if (stopping_.load()) {  // the queue drains on shutdown; a stopped leader must not act
      queue_.Done(*key);
      continue;
    }
    const size_t slash = key->find('/');
    const std::string ns = key->substr(0, slash);
    const std::string name = slash == std::string::npos ? *key : key->substr(slash + 1);
    const auto start = std::chrono::steady_clock::now();
    // Never throws: a pass that did says so on the job (Reconciler::Reconcile).
    const ReconcileResult r = reconciler_->Reconcile(ns, name);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++reconciles_;
    if (metrics_ != nullptr) {
      metrics_->reconcile_total.Increment();
      metrics_->reconcile_duration_seconds.Observe(seconds);
      if (!r.status.ok()) metrics_->reconcile_errors_total.Increment();
      metrics_->pods_created_total.Increment(r.pods_created);
      metrics_->pods_deleted_total.Increment(r.pods_deleted);
      metrics_->services_created_total.Increment(r.services_created);
      metrics_->services_deleted_total.Increment(r.services_deleted);
      metrics_->replica_restarts_total.Increment(r.restarts);
      if (r.time_to_running) {
        metrics_->job_time_to_running_seconds.Observe(absl::ToDoubleSeconds(*r.time_to_running));
      }
    }
    if (!r.status.ok()) {
      queue_.AddRateLimited(*key);
    } else {
      queue_.Forget(*key);
    }
    if (r.requeue_after) {  // a deadline or TTL comes due whatever this pass's outcome
      queue_.AddAfter(*key,
                      std::chrono::milliseconds(absl::ToInt64Milliseconds(*r.requeue_after) + 1));
    }
    queue_.Done(*key);
  }
}

std::vector<ProbedJob> Controller::ProbedJobs() const {
  std::vector<ProbedJob> out;
  for (const ObjectPtr& job : jobs_->List(options_.ns, kube::LabelSelector())) {
    if (!ProbedState(*job)) continue;
    const std::string ns = kube::Namespace(*job);
    out.push_back({kube::Key(*job),
                   ScrapeTargets(*job, pods_->ListByLabel(ns, kJobNameLabel, kube::Name(*job)))});
  }
  return out;
}

void Controller::PublishGauges() {
  if (metrics_ == nullptr) return;
  std::map<std::string, int> by_state;
  for (const ObjectPtr& job : jobs_->List(options_.ns, kube::LabelSelector())) {
    const std::string state = kube::StringAt(*job, "status", "state");
    ++by_state[state.empty() ? "Pending" : state];
  }
  metrics_->SetJobsByState(by_state);
  metrics_->workqueue_depth.Set(static_cast<double>(queue_.Depth()));
}

void Controller::Run(std::stop_token stop) {
  jobs_->Start();
  pods_->Start();
  services_->Start();
  PSFLOW_LOG(INFO) << "controller: waiting for caches ("
                   << (options_.ns.empty() ? "all namespaces" : "namespace " + options_.ns) << ")";
  while (!stop.stop_requested()) {
    const auto step = std::chrono::milliseconds(100);
    if (jobs_->WaitForSync(step) && pods_->WaitForSync(step) && services_->WaitForSync(step)) {
      break;
    }
  }
  if (!stop.stop_requested()) {
    synced_ = true;
    PSFLOW_LOG(INFO) << "controller: caches synced; " << options_.workers << " workers";
    std::vector<std::thread> workers;
    for (int i = 0; i < options_.workers; ++i) workers.emplace_back([this] { Worker(); });
    std::stop_source probe_stop;
    std::thread probe;
    if (probe_ != nullptr) {
      probe = std::thread([this, &probe_stop] { probe_->Run(probe_stop.get_token()); });
    }
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock<std::mutex> lock(mu);
    while (!stop.stop_requested()) {
      PublishGauges();
      cv.wait_for(lock, stop, options_.metrics_period, [] { return false; });
    }
    stopping_ = true;  // first: a pass in flight stops creating
    probe_stop.request_stop();
    if (probe.joinable()) probe.join();
    queue_.ShutDown();
    for (std::thread& t : workers) t.join();
  }
  synced_ = false;
  services_->Stop();
  pods_->Stop();
  jobs_->Stop();
  PSFLOW_LOG(INFO) << "controller: stopped after " << reconciles_.load() << " reconciles";
}

}  // namespace psflow::controller
