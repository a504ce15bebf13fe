#include "operator/controller/operator_metrics.h"

#include "absl/strings/str_cat.h"

namespace psflow::controller {
namespace {

prometheus::Counter& Counter(prometheus::Registry& r, const std::string& name,
                             const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}

prometheus::Gauge& Gauge(prometheus::Registry& r, const std::string& name,
                         const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}

prometheus::Histogram& Histogram(prometheus::Registry& r, const std::string& name,
                                 const std::string& help,
                                 const prometheus::Histogram::BucketBoundaries& buckets) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(r).Add({}, buckets);
}

constexpr const char* kStates[] = {"Created",   "Queued", "Running",   "Restarting",
                                   "Succeeded", "Failed", "Suspended", "Pending"};

}  // namespace

OperatorMetrics::OperatorMetrics(prometheus::Registry& r)
    : reconcile_total(Counter(r, "psflow_operator_reconcile_total", "Reconcile passes.")),
      reconcile_errors_total(Counter(r, "psflow_operator_reconcile_errors_total",
                                     "Reconcile passes that ended in an error (retried).")),
      reconcile_duration_seconds(
          Histogram(r, "psflow_operator_reconcile_duration_seconds",
                    "Time of one reconcile pass, API calls included.",
                    {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10})),
      workqueue_depth(Gauge(r, "psflow_operator_workqueue_depth",
                            "TrainingJob keys waiting to be reconciled.")),
      pods_created_total(Counter(r, "psflow_operator_pods_created_total", "Pods created.")),
      pods_deleted_total(Counter(r, "psflow_operator_pods_deleted_total", "Pods deleted.")),
      services_created_total(
          Counter(r, "psflow_operator_services_created_total", "Services created.")),
      services_deleted_total(
          Counter(r, "psflow_operator_services_deleted_total", "Services deleted.")),
      replica_restarts_total(Counter(r, "psflow_operator_replica_restarts_total",
                                     "Failed replica pods replaced by the operator.")),
      job_time_to_running_seconds(
          Histogram(r, "psflow_operator_job_time_to_running_seconds",
                    "From a TrainingJob's creation to every replica running.",
                    {0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800})),
      leader_(Gauge(r, "psflow_operator_leader",
                    "1 while this replica holds the leader Lease, else 0.")),
      jobs_(prometheus::BuildGauge()
                .Name("psflow_operator_jobs")
                .Help("TrainingJobs by state (Pending: no state yet).")
                .Register(r)),
      api_requests_(prometheus::BuildCounter()
                        .Name("psflow_operator_api_requests_total")
                        .Help("Requests to the Kubernetes API server, by verb and HTTP code "
                              "(0: no answer).")
                        .Register(r)),
      throughput_scrapes_(prometheus::BuildCounter()
                              .Name("psflow_operator_throughput_scrapes_total")
                              .Help("GETs of worker /metrics by the throughput probe, by result.")
                              .Register(r)),
      throughput_scrapes_ok_(throughput_scrapes_.Add({{"result", "ok"}})),
      throughput_scrapes_error_(throughput_scrapes_.Add({{"result", "error"}})) {
  for (const char* state : kStates) jobs_by_state_[state] = &jobs_.Add({{"state", state}});
}

void OperatorMetrics::SetLeading(bool leading) {
  leader_.Set(leading ? 1 : 0);
  if (leading) return;
  SetJobsByState({});
  workqueue_depth.Set(0);
}

void OperatorMetrics::SetJobsByState(const std::map<std::string, int>& counts) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [state, gauge] : jobs_by_state_) {
    auto it = counts.find(state);
    gauge->Set(it == counts.end() ? 0 : it->second);
  }
}

void OperatorMetrics::CountApiRequest(absl::string_view verb, int http_code) {
  std::lock_guard<std::mutex> lock(mu_);
  auto key = std::make_pair(std::string(verb), http_code);
  auto it = api_by_verb_code_.find(key);
  if (it == api_by_verb_code_.end()) {
    prometheus::Counter& c =
        api_requests_.Add({{"verb", key.first}, {"code", absl::StrCat(http_code)}});
    it = api_by_verb_code_.emplace(key, &c).first;
  }
  it->second->Increment();
}

void OperatorMetrics::CountThroughputScrape(bool ok) {
  (ok ? throughput_scrapes_ok_ : throughput_scrapes_error_).Increment();
}

}  // namespace psflow::controller
