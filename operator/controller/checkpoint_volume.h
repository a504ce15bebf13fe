// spec.replicaSpecs.PS.checkpoint (api::CheckpointVolume) on a ps pod: where psflow-ps writes its
// checkpoints (ps/checkpoint.h) and restores the newest from when it starts again.
//
// Adds the volume "psflow-checkpoints" (an emptyDir with the sizeLimit, or the
// persistentVolumeClaim claimName), mounts it at api::kCheckpointMountPath in the main container,
// and appends --checkpoint_dir=<that path> to its args (the last value of a flag wins, so it
// overrides a --checkpoint_dir the template passes). The ps checkpoints every
// --checkpoint_every_s (default 60) seconds.
#ifndef PSFLOW_OPERATOR_CONTROLLER_CHECKPOINT_VOLUME_H_
#define PSFLOW_OPERATOR_CONTROLLER_CHECKPOINT_VOLUME_H_

#include <cstddef>
#include <nlohmann/json.hpp>

#include "operator/api/training_job.h"

namespace psflow::controller {

inline constexpr char kCheckpointVolumeName[] = "psflow-checkpoints";

// `pod_spec`: a core/v1 PodSpec with its containers; `main_container` indexes the ps container.
void AddCheckpointVolume(const api::CheckpointVolume& checkpoint, nlohmann::json& pod_spec,
                         size_t main_container);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_CHECKPOINT_VOLUME_H_
