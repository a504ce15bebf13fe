// A REST collection of the Kubernetes API (group, version, plural) and the paths to it.
#ifndef PSFLOW_OPERATOR_KUBE_RESOURCE_H_
#define PSFLOW_OPERATOR_KUBE_RESOURCE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace psflow::kube {

struct Resource {
  std::string group;    // "" for the core group
  std::string version;  // "v1", "v1alpha1"
  std::string plural;   // "pods", "trainingjobs"
  std::string kind;     // "Pod", "TrainingJob"
  bool namespaced = true;

  // "v1" or "psflow.io/v1alpha1": the apiVersion field of this resource's objects.
  std::string ApiVersion() const;
  // "/api/v1" or "/apis/psflow.io/v1alpha1".
  std::string GroupVersionPath() const;
  // ".../namespaces/<ns>/<plural>", or ".../<plural>" across all namespaces when `ns` is empty
  // (or the resource is cluster-scoped).
  std::string CollectionPath(absl::string_view ns) const;
  // CollectionPath(ns) + "/<name>".
  std::string ObjectPath(absl::string_view ns, absl::string_view name) const;
  // "trainingjobs.psflow.io", "pods": as RBAC and kubectl name it.
  std::string QualifiedName() const;
};

// The resources the operator reads and writes.
const Resource& Pods();
const Resource& Services();
const Resource& Secrets();
const Resource& ConfigMaps();
const Resource& Events();
const Resource& Leases();           // coordination.k8s.io/v1
const Resource& TrainingJobs();     // psflow.io/v1alpha1
const Resource& NetworkPolicies();  // networking.k8s.io/v1
// Gang schedulers' PodGroups (controller/pod_group.h): served only where they are installed.
const Resource& VolcanoPodGroups();       // scheduling.volcano.sh/v1beta1
const Resource& CoschedulingPodGroups();  // scheduling.x-k8s.io/v1alpha1 (scheduler-plugins)

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_RESOURCE_H_
