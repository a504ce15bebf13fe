// What a ps pod's checkpoints outlive, read from the pod as it runs: whether a ps that starts again
// finds its variables (psflow-ps restores the newest checkpoint in --checkpoint_dir when it starts,
// ps/main.cc; without the flag it keeps none and holds its variables only in memory).
//
// The ps checkpoints into the last --checkpoint_dir of its main container's command and args
// (`--checkpoint_dir=D`, `-checkpoint_dir=D`, or D as the next argument; for
// spec.replicaSpecs.PS.checkpoint the operator appends its own, checkpoint_volume.h). What D
// outlives is what the volume mounted deepest above it outlives:
//  - kNone: no flag or an empty one; D relative or on the container's own filesystem (no mount
//    above it: read-only under the restricted profile, so every checkpoint fails, and a writable
//    one is new with each container); a read-only mount or kind of volume (configMap, secret,
//    downwardAPI, projected). Nothing survives any restart.
//  - kPod: emptyDir (spec.replicaSpecs.PS.checkpoint's emptyDir, the restricted profile's /tmp),
//    ephemeral, csi and hostPath (neither need follow a replaced pod): the kubelet's restarts of
//    the container find the checkpoints, a new pod does not.
//  - kBeyondPod: persistentVolumeClaim and every other kind (nfs, iscsi, cephfs, cloud disks): a
//    replaced pod finds them too.
// A malformed pod reads as kNone. Pure; never throws.
#ifndef PSFLOW_OPERATOR_CONTROLLER_CHECKPOINT_LIFE_H_
#define PSFLOW_OPERATOR_CONTROLLER_CHECKPOINT_LIFE_H_

#include <nlohmann/json.hpp>
#include <string>

namespace psflow::controller {

enum class CheckpointLife { kNone, kPod, kBeyondPod };

struct PsCheckpoints {
  CheckpointLife life = CheckpointLife::kNone;
  // Where they are, for messages: "--checkpoint_dir=/ckpt on emptyDir volume psflow-checkpoints",
  // "no --checkpoint_dir", "--checkpoint_dir=/ckpt on the container's own filesystem".
  std::string where;
};

// `pod`: a core/v1 Pod (or anything with its spec) of a ps replica.
PsCheckpoints ReadPsCheckpoints(const nlohmann::json& pod);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_CHECKPOINT_LIFE_H_
