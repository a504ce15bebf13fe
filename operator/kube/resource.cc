#include "operator/kube/resource.h"

#include "absl/strings/str_cat.h"

namespace psflow::kube {

std::string Resource::ApiVersion() const {
  return group.empty() ? version : absl::StrCat(group, "/", version);
}

std::string Resource::GroupVersionPath() const {
  return group.empty() ? absl::StrCat("/api/", version)
                       : absl::StrCat("/apis/", group, "/", version);
}

std::string Resource::CollectionPath(absl::string_view ns) const {
  if (!namespaced || ns.empty()) return absl::StrCat(GroupVersionPath(), "/", plural);
  return absl::StrCat(GroupVersionPath(), "/namespaces/", ns, "/", plural);
}

std::string Resource::ObjectPath(absl::string_view ns, absl::string_view name) const {
  return absl::StrCat(CollectionPath(ns), "/", name);
}

std::string Resource::QualifiedName() const {
  return group.empty() ? plural : absl::StrCat(plural, ".", group);
}

const Resource& Pods() {
  static const Resource* r = new Resource{"", "v1", "pods", "Pod", true};
  return *r;
}
const Resource& Services() {
  static const Resource* r = new Resource{"", "v1", "services", "Service", true};
  return *r;
}
const Resource& Secrets() {
  static const Resource* r = new Resource{"", "v1", "secrets", "Secret", true};
  return *r;
}
const Resource& ConfigMaps() {
  static const Resource* r = new Resource{"", "v1", "configmaps", "ConfigMap", true};
  return *r;
}
const Resource& Events() {
  static const Resource* r = new Resource{"", "v1", "events", "Event", true};
  return *r;
}
const Resource& VolcanoPodGroups() {
  static const Resource* r =
      new Resource{"scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", true};
  return *r;
}

const Resource& CoschedulingPodGroups() {
  static const Resource* r =
      new Resource{"scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", true};
  return *r;
}

const Resource& NetworkPolicies() {
  static const Resource* r =
      new Resource{"networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", true};
  return *r;
}

const Resource& Leases() {
  static const Resource* r = new Resource{"coordination.k8s.io", "v1", "leases", "Lease", true};
  return *r;
}
const Resource& TrainingJobs() {
  static const Resource* r =
      new Resource{"psflow.io", "v1alpha1", "trainingjobs", "TrainingJob", true};
  return *r;
}

}  // namespace psflow::kube
