// Gang scheduling (spec.runPolicy.schedulingPolicy): the job's PodGroup, which a gang scheduler
// reads to place every pod of the job together or none, and what the job's pods carry to belong
// to it.
//
// gang volcano: a scheduling.volcano.sh/v1beta1 PodGroup named after the job: minMember every
// replica of the job, minTaskMember each replica type's count (by its TF_CONFIG name: "ps",
// "worker", ...), minResources the sum of every replica's container requests (a limit stands in
// for a missing request, as Kubernetes defaults it), queue and priorityClassName when given. Each
// pod: schedulerName (default "volcano"), annotations scheduling.k8s.io/group-name (the
// PodGroup), volcano.sh/task-spec (its type) and, with a queue, scheduling.volcano.sh/queue-name.
// gang coscheduling (scheduler-plugins): a scheduling.x-k8s.io/v1alpha1 PodGroup with minMember,
// minResources and, when runPolicy.schedulingTimeoutSeconds is set, scheduleTimeoutSeconds; each
// pod: schedulerName (default "scheduler-plugins-scheduler") and the label
// scheduling.x-k8s.io/pod-group.
// The PodGroup carries the job-name label and a controller ownerReference to the job (deleted with
// it). Init containers are not summed (psflow's pods have none of their own).
#ifndef PSFLOW_OPERATOR_CONTROLLER_POD_GROUP_H_
#define PSFLOW_OPERATOR_CONTROLLER_POD_GROUP_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "operator/api/training_job.h"

namespace psflow::controller {

inline constexpr char kVolcanoGroupAnnotation[] = "scheduling.k8s.io/group-name";
inline constexpr char kVolcanoTaskAnnotation[] = "volcano.sh/task-spec";
inline constexpr char kVolcanoQueueAnnotation[] = "scheduling.volcano.sh/queue-name";
inline constexpr char kCoschedulingLabel[] = "scheduling.x-k8s.io/pod-group";
inline constexpr char kKueueQueueLabel[] = "kueue.x-k8s.io/queue-name";
inline constexpr char kKueueGroupLabel[] = "kueue.x-k8s.io/pod-group-name";
inline constexpr char kKueueGroupCountAnnotation[] = "kueue.x-k8s.io/pod-group-total-count";

// The PodGroup of a job whose schedulingPolicy names a gang. `job_object` is the TrainingJob as
// stored (its uid, and the templates' resources are read). INVALID_ARGUMENT naming the field for
// a request that is no quantity (the API server would refuse the pod too).
absl::StatusOr<nlohmann::json> BuildPodGroup(const nlohmann::json& job_object,
                                             const api::TrainingJob& job);

// Makes a pod of replica type `type` a member of the job's gang (nothing without one): its
// schedulerName in `pod_spec`, annotations or label in `metadata`.
void JoinPodGroup(const api::TrainingJob& job, api::ReplicaType type, nlohmann::json& metadata,
                  nlohmann::json& pod_spec);

// Kueue (plain pods, as its documentation for pod groups specifies; a C++ operator cannot use its
// Go job framework): when the TrainingJob carries the label kueue.x-k8s.io/queue-name, each pod
// gets that label, the label kueue.x-k8s.io/pod-group-name (the job's name) and the annotation
// kueue.x-k8s.io/pod-group-total-count (every replica of the job), so that Kueue admits the
// job's pods as one workload. Kueue's own webhook gates them until then. Nothing without the
// label. `job_object` is the TrainingJob as stored.
void JoinKueuePodGroup(const nlohmann::json& job_object, const api::TrainingJob& job,
                       nlohmann::json& metadata);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_POD_GROUP_H_
