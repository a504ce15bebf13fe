// Whether a ps task that came back kept its training progress, as the operator can tell from
// outside (it cannot ask the ps, and the pods have no API credentials). A ps holds its variables
// in memory and, when it starts, re-reads only its newest checkpoint (checkpoint_life.h), so:
//  - the kubelet restarted its container in place (the main container's restartCount grew in the
//    same pod): the progress survived when the checkpoints outlive the container (kPod or
//    kBeyondPod: an emptyDir or persistentVolumeClaim spec.replicaSpecs.PS.checkpoint);
//  - its pod was replaced (a new pod uid at its index: the operator replaced a failed pod, someone
//    deleted or evicted it, the job was suspended and resumed): when they outlive the pod
//    (kBeyondPod: a persistentVolumeClaim).
// A ps that lost its progress is re-initialised by the chief from the chief's own copy and the
// global step resumes from the workers' last (worker/ps_client.cc), but the optimizer's slots
// and the updates the chief had not pulled are gone; one that kept it restores its checkpoint
// and the steps since that checkpoint are trained again.
//
// Each pass compares the ps pods it sees with status.replicaStatuses.PS.observedPods (the pod each
// task last ran in and its restart count) and records them there, so each restart is reported
// once: by the pass that first sees the new pod started or the count grown. A pod that has not
// started (Pending) or is being deleted changes nothing: a pod replaced before its ps ever ran is
// no restart. A task seen for the first time already restarted counts as restarted, unless the
// index's restarts in status (written by an operator without observedPods) already count them.
#ifndef PSFLOW_OPERATOR_CONTROLLER_PS_RESTARTS_H_
#define PSFLOW_OPERATOR_CONTROLLER_PS_RESTARTS_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "operator/controller/checkpoint_life.h"
#include "operator/controller/job_status.h"
#include "operator/controller/pod_state.h"

namespace psflow::controller {

struct PsRestart {
  int index = 0;
  std::string pod;        // the pod the task runs in now
  bool replaced = false;  // in a new pod; false: its container was restarted in place
  PodState state;         // of that pod (in place: how the container last ended)
  PsCheckpoints checkpoints;

  bool ProgressLost() const;
  // The Condition reason of a loss: "NoCheckpoint" or "CheckpointLostWithPod".
  const char* LossReason() const;
  // One line for events, the condition and the log, e.g. "PS 0 (pod mnist-ps-0) was restarted in
  // place after exit code 137 (OOMKilled) and lost its training progress: no --checkpoint_dir
  // (...)".
  std::string Describe() const;
};

// `pods`: the ps pod of each index the pass sees (indexes without one are left out); `replicas`:
// the spec's PS count; `indexes`: status.replicaStatuses.PS.indexes. Updates `observed` (indexes
// at or past `replicas` are dropped) and returns the restarts since it was written, by index.
std::vector<PsRestart> TrackPsRestarts(const std::map<int, const nlohmann::json*>& pods,
                                       int replicas, const std::map<int, IndexStatus>& indexes,
                                       std::map<int, ObservedPod>& observed);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_PS_RESTARTS_H_
