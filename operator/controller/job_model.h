// spec.modelFile on Kubernetes: the model file lives in the ConfigMap <job>-model (key
// model.yaml), owned by the job (deleted with it), mounted read-only into every Chief, Worker and
// Evaluator pod at kModelMountPath, whose main container gets --model_file=<mount>/model.yaml.
#ifndef PSFLOW_OPERATOR_CONTROLLER_JOB_MODEL_H_
#define PSFLOW_OPERATOR_CONTROLLER_JOB_MODEL_H_

#include <string>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"
#include "operator/api/training_job.h"
#include "operator/kube/kube_client.h"

namespace psflow::controller {

inline constexpr char kModelVolumeName[] = "psflow-model";
inline constexpr char kModelMountPath[] = "/etc/psflow/model";
inline constexpr char kModelFileKey[] = "model.yaml";

std::string ModelConfigMapName(const api::TrainingJob& job);  // "<job>-model"

// The ConfigMap holding job.model_file (which must not be empty), labelled with the job's name
// and owned by `job_object`.
nlohmann::json BuildModelConfigMap(const nlohmann::json& job_object, const api::TrainingJob& job);

// Creates the job's ConfigMap, or, where it exists and is the job's, updates it to the spec's
// text when that was edited (pods created from then on get the new model; running ones keep the
// one they started with, as with any other edit of the spec). UNAVAILABLE when a ConfigMap of that
// name belongs to something else; the API server's errors as they are.
absl::Status EnsureModelConfigMap(kube::KubeClient& client, const nlohmann::json& job_object,
                                  const api::TrainingJob& job);

// Adds the ConfigMap's volume to pod_spec, its read-only mount to `container` and
// --model_file=<kModelMountPath>/model.yaml to its args.
void MountModelFile(const api::TrainingJob& job, nlohmann::json& pod_spec,
                    nlohmann::json& container);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_JOB_MODEL_H_
