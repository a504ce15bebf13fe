// The TrainingJob API (psflow.io/v1alpha1), as typed structs, and its parser/validator.
//
// The same types serve the operator (from the Kubernetes API) and `psflow run` (from a file).
// Only the fields psflow acts on are modelled; a pod template's other fields pass through the
// operator untouched.
#ifndef PSFLOW_OPERATOR_API_TRAINING_JOB_H_
#define PSFLOW_OPERATOR_API_TRAINING_JOB_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "operator/api/failure_policy.h"

namespace psflow::api {

inline constexpr char kApiVersion[] = "psflow.io/v1alpha1";
inline constexpr char kKind[] = "TrainingJob";
inline constexpr int kDefaultPort = 2222;
inline constexpr char kPortName[] = "psflow-port";
// A ps task's bulk channel (tensor bytes beside gRPC): the ps pod's port of this name, by default
// its psflow-port + 1, given to psflow-ps as $PSFLOW_BULK_PORT.
inline constexpr char kBulkPortName[] = "psflow-bulk";

enum class ReplicaType { kChief, kPS, kWorker, kEvaluator };
// "Chief", "PS", "Worker", "Evaluator" as in the manifest.
absl::string_view ReplicaTypeName(ReplicaType type);
// "chief", "ps", "worker", "evaluator" as in TF_CONFIG and pod names.
absl::string_view TaskTypeName(ReplicaType type);
// Replicas of a type, at most: Chief 1, PS 100, Worker 1000, Evaluator 10 (the CRD's maxima).
// Every replica's TF_CONFIG names every replica (~35 bytes each), so a job's pods hold
// O(replicas^2) bytes: 1111 replicas make ~40 KB per pod and ~45 MB of pod objects in etcd;
// 10000 would make 3.5 GB, past etcd's 2 GB default quota.
int MaxReplicas(ReplicaType type);

enum class RestartPolicy { kNever, kOnFailure, kAlways, kExitCode };
// "Never", "OnFailure", "Always", "ExitCode".
absl::string_view RestartPolicyName(RestartPolicy policy);
enum class SuccessPolicy { kChiefOrWorker0, kAllWorkers };
enum class CleanPodPolicy { kRunning, kAll, kNone };

struct EnvVar {
  std::string name;
  std::string value;
  bool value_from = false;  // valueFrom (a Secret, a ConfigMap, a field): the kubelet's to resolve
};

struct ContainerPort {
  std::string name;
  int container_port = 0;
};

struct Container {
  std::string name;
  std::string image;
  std::vector<std::string> command;
  std::vector<std::string> args;
  std::vector<EnvVar> env;
  std::vector<ContainerPort> ports;
  std::string working_dir;  // workingDir
};

// Where the ps tasks keep their checkpoints (spec.replicaSpecs.PS.checkpoint). The operator adds
// the volume to each ps pod, mounts it at kCheckpointMountPath in the main container and passes
// --checkpoint_dir=kCheckpointMountPath (controller/checkpoint_volume.h). An emptyDir outlives
// container restarts (the pod stays); a PersistentVolumeClaim outlives the pod (deleted,
// rescheduled, replaced). `psflow run` ignores it: locally, pass --checkpoint_dir in args.
enum class CheckpointVolumeKind { kEmptyDir, kPersistentVolumeClaim };
struct CheckpointVolume {
  CheckpointVolumeKind kind = CheckpointVolumeKind::kEmptyDir;
  std::string claim_name;  // kPersistentVolumeClaim: the claim, in the job's namespace
  std::string size_limit;  // kEmptyDir: a quantity ("10Gi"), or "" for no limit
};
inline constexpr char kCheckpointMountPath[] = "/var/lib/psflow/checkpoints";

struct ReplicaSpec {
  int replicas = 1;
  RestartPolicy restart_policy = RestartPolicy::kNever;
  std::vector<FailureRule> failure_rules;      // podFailurePolicy.rules (api/failure_policy.h)
  std::vector<Container> containers;           // template.spec.containers
  std::optional<CheckpointVolume> checkpoint;  // PS only

  // The container psflow configures: the one named "psflow", else the first.
  const Container& MainContainer() const;
  // Port of MainContainer's port named "psflow-port", else kDefaultPort.
  int Port() const;
};

// spec.runPolicy.schedulingPolicy: gang scheduling, every pod of the job placed together or none
// (controller/pod_group.h). `psflow run` ignores it (processes need no scheduler).
enum class GangScheduler { kNone, kVolcano, kCoscheduling };
// "volcano", "coscheduling" ("" for kNone).
absl::string_view GangSchedulerName(GangScheduler gang);
struct SchedulingPolicy {
  GangScheduler gang = GangScheduler::kNone;
  std::string queue;           // volcano: the Volcano queue (PodGroup spec.queue)
  std::string priority_class;  // volcano: the PodGroup's priorityClassName
  std::string scheduler_name;  // the pods' schedulerName ("" : the gang's default, below)
  // The schedulerName the pods get: scheduler_name, else "volcano" or
  // "scheduler-plugins-scheduler" (scheduler-plugins' second-scheduler deployment).
  std::string SchedulerName() const;
};

struct RunPolicy {
  CleanPodPolicy clean_pod_policy = CleanPodPolicy::kRunning;
  std::optional<int64_t> ttl_seconds_after_finished;
  // After success, how long trainers still running may finish (api::FinishGrace).
  std::optional<int64_t> finish_grace_seconds;
  // How long the replicas may take to be running together at the start (api::SchedulingTimeout).
  std::optional<int64_t> scheduling_timeout_seconds;
  std::optional<int64_t> active_deadline_seconds;
  std::optional<int> backoff_limit;
  bool suspend = false;
  SchedulingPolicy scheduling;
};

// spec.networkPolicy: whether the operator makes the job a NetworkPolicy (controller/
// network_policy.h). `metricsFrom`, a list of networking.k8s.io/v1 NetworkPolicyPeers, passes
// through to it unparsed (the operator reads it from the stored object); `psflow run` ignores both.
struct NetworkPolicySpec {
  bool enabled = false;
};

// spec.sharedMemory: tensor bytes between a ps task and the replicas on its node through shared
// memory instead of TCP (controller/shared_memory_channel.h). Off by default: it takes a hostPath
// volume, which the baseline and restricted Pod Security Standards refuse. Which directory of
// the node is the operator's to say (--shared_memory_dir), never the job's. `psflow run` ignores
// it (its replicas always share a host: it uses shared memory unless a network is emulated).
struct SharedMemorySpec {
  bool enabled = false;
};

struct TrainingJob {
  std::string name;
  std::string namespace_ = "default";
  std::map<ReplicaType, ReplicaSpec> replica_specs;  // ordered Chief, PS, Worker, Evaluator
  RunPolicy run_policy;
  SuccessPolicy success_policy = SuccessPolicy::kChiefOrWorker0;
  NetworkPolicySpec network_policy;
  // spec.modelFile: a model file's text (worker/models/model_file.h) for the training replicas
  // (Chief, Worker, Evaluator), which the operator stores in the ConfigMap <job>-model and mounts
  // (controller/job_model.h) and `psflow run` writes to its run folder; each gets
  // --model_file=<that file>. Empty: the replicas' args name their model.
  std::string model_file;
  // spec.tls.enabled (default true): mutual TLS between every replica and the ps tasks, with
  // certificates of a CA made for the job; false opts out (plaintext, with a Warning).
  bool tls = true;
  SharedMemorySpec shared_memory;

  int Replicas(ReplicaType type) const;
};

// Parses and validates a manifest. INVALID_ARGUMENT with one line naming `source` and the field:
// not YAML, wrong apiVersion/kind, missing metadata.name, no or unknown replica types, negative
// replicas, more than MaxReplicas of a type, no Worker or Chief replica, a replica spec with no
// container, bad enum values, a checkpoint on a replica other than PS or a persistentVolumeClaim
// one without claimName, a networkPolicy.metricsFrom that is not a list of objects, a spec.tls
// that is not {enabled: <boolean>}; a spec.sharedMemory that is not {enabled: <boolean>}; a
// spec.modelFile that is not a valid
// model file (its error, "spec.modelFile:<line>: ...") or beside a --model, --model_file or
// --model_config in the args of a Chief, Worker or Evaluator.
absl::StatusOr<TrainingJob> ParseTrainingJob(absl::string_view yaml, absl::string_view source);

// Reads then parses a file; ReadFile's error when it cannot be read (NOT_FOUND, PERMISSION_DENIED,
// FAILED_PRECONDITION for a directory or a file over 16 MiB).
absl::StatusOr<TrainingJob> LoadTrainingJob(const std::string& path);

// A container argument as absl reads flags: "--name=value", "-name=value", "--name" or "-name"
// (then the next argument may be its value) give the flag's name and the value after '=', if any;
// anything else (a positional argument, "--" alone) gives no name.
struct FlagArgument {
  std::string name;
  std::optional<std::string> value;
};
FlagArgument ParseFlagArgument(absl::string_view arg);

// The CRD's rule for metadata.name (deploy/crd): a DNS-1035 label of at most kMaxJobNameLength
// characters, so every pod's hostname <job>-<type>-<index> fits 63 and, for `psflow run`, the
// name is one folder name. INVALID_ARGUMENT "metadata.name: ..." otherwise.
inline constexpr size_t kMaxJobNameLength = 48;
absl::Status CheckJobName(absl::string_view name);

}  // namespace psflow::api

#endif  // PSFLOW_OPERATOR_API_TRAINING_JOB_H_
