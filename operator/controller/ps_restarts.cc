#include "operator/controller/ps_restarts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "operator/controller/job_decision.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {

using nlohmann::json;

bool PsRestart::ProgressLost() const {
  return checkpoints.life == CheckpointLife::kNone ||
         (replaced && checkpoints.life == CheckpointLife::kPod);
}

const char* PsRestart::LossReason() const {
  return checkpoints.life == CheckpointLife::kNone ? "NoCheckpoint" : "CheckpointLostWithPod";
}

// A ps restarted before it wrote its first checkpoint finds none, whatever its volume.
constexpr char kNoCheckpointYet[] =
    " (had it written none yet, the chief re-initialises it and the ps and chief logs say the "
    "progress was lost)";

std::string PsRestart::Describe() const {
  const std::string what =
      absl::StrCat(ReplicaPodLabel(api::ReplicaType::kPS, index, pod),
                   replaced ? " runs in a new pod (the one before was deleted or replaced)"
                            : absl::StrCat(" was restarted in place after ", state.DescribeEnd()));
  if (!ProgressLost()) {
    return absl::StrCat(what, "; it restores its newest checkpoint (", checkpoints.where,
                        "): the steps since that checkpoint are trained again", kNoCheckpointYet);
  }
  const std::string why =
      checkpoints.life == CheckpointLife::kNone
          ? absl::StrCat("it keeps no checkpoint (", checkpoints.where,
                         "; spec.replicaSpecs.PS.checkpoint gives it one)")
          : absl::StrCat("its checkpoints (", checkpoints.where,
                         ") went with the old pod (a persistentVolumeClaim checkpoint outlives "
                         "it)");
  return absl::StrCat(what, " and lost its training progress: ", why,
                      ". The chief re-initialises its variables from the chief's copy and the "
                      "global step resumes from the workers' last; the updates the chief had not "
                      "pulled and the optimizer's slots are lost");
}

std::vector<PsRestart> TrackPsRestarts(const std::map<int, const json*>& pods, int replicas,
                                       const std::map<int, IndexStatus>& indexes,
                                       std::map<int, ObservedPod>& observed) {
  for (auto it = observed.begin(); it != observed.end();) {
    it = it->first >= replicas ? observed.erase(it) : std::next(it);
  }
  std::vector<PsRestart> restarts;
  for (const auto& [index, pod] : pods) {
    if (index < 0 || index >= replicas || pod == nullptr) continue;
    const PodState state = ReadPodState(*pod);
    const std::string uid = kube::Uid(*pod);
    if (state.being_deleted || !state.main_started || uid.empty()) continue;
    PsRestart restart;
    bool restarted = false;
    if (auto seen = observed.find(index); seen == observed.end()) {
      // Restarts the status counted already, for this index's pod now (its kubelet restarts).
      int counted = 0;
      if (auto is = indexes.find(index); is != indexes.end()) {
        counted = std::max(0, is->second.restarts - is->second.replaced_restarts);
      }
      restarted = state.main_restarts > counted;
    } else if (seen->second.uid != uid) {
      restarted = restart.replaced = true;
    } else {
      restarted = state.main_restarts > seen->second.restarts;
    }
    observed[index] = {uid, state.main_restarts};
    if (!restarted) continue;
    restart.index = index;
    restart.pod = kube::Name(*pod);
    restart.state = state;
    restart.checkpoints = ReadPsCheckpoints(*pod);
    restarts.push_back(std::move(restart));
  }
  return restarts;
}

}  // namespace psflow::controller
