// What a reconcile pass makes for a job that lacks objects, and in which order: the rules of
// creation, as a pure function of the job and of what the pass found missing (job_decision.h's
// Decision::create_service and create_pods: the diff of the job's desired objects with the
// cache). The reconciler makes each object of the plan in turn (reconciler.h, step 5); the
// builders of each object's body are pure too (replica_objects.h, network_policy.h, pod_group.h,
// job_certificates.h, job_model.h). Table-tested in creation_plan_test.cc.
//
// The order is what the objects need of each other:
//  1. the job's Service, when missing: its pods' DNS names (TF_CONFIG names the pods by it);
//  2. only when pods are to be made, what they need to exist first:
//     the NetworkPolicy (when opted in), so that no pod runs unprotected;
//     the gang's PodGroup (runPolicy.schedulingPolicy.gang), so that the gang scheduler places
//       none of them until all fit;
//     the TLS Secrets holding the CA and every replica's certificate (TLS is on unless opted
//       out: then a Warning event TLSDisabled instead), which the pods mount;
//     the model ConfigMap (spec.modelFile), which the training pods mount;
//  3. the pods, at most `max_pods` per pass (the rest on the next pass, at once), in slow-start
//     batches of 1, 2, 4, ... as Kubernetes' Job controller makes them: a template the API server
//     refuses costs one request, not hundreds.
// Objects that are not watched (NetworkPolicy, PodGroup, Secrets, ConfigMap) are asked for again
// whenever pods are made: a 409 finds them, a deleted one is put back.
#ifndef PSFLOW_OPERATOR_CONTROLLER_CREATION_PLAN_H_
#define PSFLOW_OPERATOR_CONTROLLER_CREATION_PLAN_H_

#include <cstddef>
#include <vector>

#include "operator/api/training_job.h"
#include "operator/controller/job_decision.h"

namespace psflow::controller {

// An object (or group of objects) the pods of a job need before they are made.
enum class JobObject {
  kService,         // the job's headless Service (replica_objects.h)
  kNetworkPolicy,   // network_policy.h
  kPodGroup,        // pod_group.h: Volcano's or scheduler-plugins'
  kTlsSecrets,      // job_certificates.h
  kTlsDisabled,     // no Secret: the Warning event TLSDisabled
  kModelConfigMap,  // job_model.h
};

struct CreationPlan {
  std::vector<JobObject> before_pods;  // in this order, each before the next
  std::vector<ReplicaSlot> pods;       // the first max_pods of the missing ones
  std::vector<size_t> batches;         // sizes of the slow-start batches of `pods`, in order
  bool more_pods = false;              // pods beyond max_pods: the next pass makes them
};

// The plan for `job` whose pass found its Service missing (`service_missing`) and the pods of
// `missing_pods` (in Decide's order); max_pods >= 1.
CreationPlan PlanCreation(const api::TrainingJob& job, bool service_missing,
                          const std::vector<ReplicaSlot>& missing_pods, size_t max_pods);

// Slow start: 1, 2, 4, ... summing to `count`, the last batch what is left.
std::vector<size_t> SlowStartBatches(size_t count);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_CREATION_PLAN_H_
