// The operator's Prometheus metrics (psflow_operator_*), registered on the process's
// MetricsEndpoint registry. Every member is thread-safe (prometheus-cpp's are).
#ifndef PSFLOW_OPERATOR_CONTROLLER_OPERATOR_METRICS_H_
#define PSFLOW_OPERATOR_CONTROLLER_OPERATOR_METRICS_H_

#include <map>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace psflow::controller {

class OperatorMetrics {
 public:
  explicit OperatorMetrics(prometheus::Registry& registry);

  prometheus::Counter& reconcile_total;
  prometheus::Counter& reconcile_errors_total;
  prometheus::Histogram& reconcile_duration_seconds;
  prometheus::Gauge& workqueue_depth;
  prometheus::Counter& pods_created_total;
  prometheus::Counter& pods_deleted_total;
  prometheus::Counter& services_created_total;
  prometheus::Counter& services_deleted_total;
  prometheus::Counter& replica_restarts_total;
  prometheus::Histogram& job_time_to_running_seconds;

  // psflow_operator_leader: 1 while this replica leads. Leading stops: the gauges only a leader
  // keeps (jobs by state, work queue depth) go to 0 too, so that a standby does not go on
  // showing what it saw last (dashboards take the max over the replicas).
  void SetLeading(bool leading);

  // psflow_operator_jobs{state}: sets every state's count (states absent from `counts` to 0).
  void SetJobsByState(const std::map<std::string, int>& counts);
  // psflow_operator_api_requests_total{verb,code}: one request to the API server.
  void CountApiRequest(absl::string_view verb, int http_code);
  // psflow_operator_throughput_scrapes_total{result="ok"|"error"}: one GET of a pod's /metrics
  // by the throughput probe (error: no answer, or no psflow_worker_examples_total in it).
  void CountThroughputScrape(bool ok);

 private:
  prometheus::Gauge& leader_;
  prometheus::Family<prometheus::Gauge>& jobs_;
  prometheus::Family<prometheus::Counter>& api_requests_;
  prometheus::Family<prometheus::Counter>& throughput_scrapes_;
  prometheus::Counter& throughput_scrapes_ok_;
  prometheus::Counter& throughput_scrapes_error_;
  std::mutex mu_;
  std::map<std::string, prometheus::Gauge*> jobs_by_state_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, int>, prometheus::Counter*> api_by_verb_code_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_OPERATOR_METRICS_H_
