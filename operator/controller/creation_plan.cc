#include "operator/controller/creation_plan.h"

#include <algorithm>

namespace psflow::controller {

std::vector<size_t> SlowStartBatches(size_t count) {
  std::vector<size_t> batches;
  for (size_t batch = 1, left = count; left > 0; batch *= 2) {
    batches.push_back(std::min(batch, left));
    left -= batches.back();
  }
  return batches;
}

CreationPlan PlanCreation(const api::TrainingJob& job, bool service_missing,
                          const std::vector<ReplicaSlot>& missing_pods, size_t max_pods) {
  CreationPlan plan;
  if (service_missing) plan.before_pods.push_back(JobObject::kService);
  const size_t pods = std::min(missing_pods.size(), std::max<size_t>(1, max_pods));
  if (pods == 0) return plan;
  if (job.network_policy.enabled) plan.before_pods.push_back(JobObject::kNetworkPolicy);
  if (job.run_policy.scheduling.gang != api::GangScheduler::kNone) {
    plan.before_pods.push_back(JobObject::kPodGroup);
  }
  plan.before_pods.push_back(job.tls ? JobObject::kTlsSecrets : JobObject::kTlsDisabled);
  if (!job.model_file.empty()) plan.before_pods.push_back(JobObject::kModelConfigMap);
  plan.pods.assign(missing_pods.begin(), missing_pods.begin() + static_cast<std::ptrdiff_t>(pods));
  plan.batches = SlowStartBatches(pods);
  plan.more_pods = pods < missing_pods.size();
  return plan;
}

}  // namespace psflow::controller
