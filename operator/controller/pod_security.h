// The restricted Pod Security Standard (kubernetes.io/docs/concepts/security/pod-security-
// standards) on every pod the operator makes, so that a namespace labelled
// pod-security.kubernetes.io/enforce=restricted admits a job's pods as they come.
//
// Each setting is a default: a key the template sets itself is left as the template has it (a
// template that asks for root or privilege escalation gets it, and such a namespace refuses it).
//  - the pod: runAsNonRoot, runAsUser/runAsGroup/fsGroup kImageUid (the USER of psflow's images,
//    docker/*.Dockerfile; fsGroup makes a PersistentVolumeClaim's files writable by it),
//    seccompProfile RuntimeDefault;
//  - every container and init container: allowPrivilegeEscalation false, capabilities drop ALL;
//  - the main container: readOnlyRootFilesystem, and an emptyDir "psflow-tmp" at /tmp unless the
//    template mounts something there (the only place psflow's processes write besides the
//    checkpoint volume, checkpoint_volume.h).
#ifndef PSFLOW_OPERATOR_CONTROLLER_POD_SECURITY_H_
#define PSFLOW_OPERATOR_CONTROLLER_POD_SECURITY_H_

#include <cstddef>
#include <nlohmann/json.hpp>

namespace psflow::controller {

inline constexpr int kImageUid = 65532;
inline constexpr char kTmpVolumeName[] = "psflow-tmp";

// `pod_spec`: a core/v1 PodSpec with its containers; `main_container` indexes the one psflow
// configures.
void ApplyRestrictedSecurity(nlohmann::json& pod_spec, size_t main_container);

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_POD_SECURITY_H_
