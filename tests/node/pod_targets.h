// Stands in for Prometheus's Kubernetes service discovery (kubernetes_sd_configs, role: pod),
// which Debian's prometheus is built without: its packaging removed Kubernetes discovery for the
// size of client-go's dependencies (/usr/share/doc/prometheus/NEWS.Debian.gz, 1.5.0+ds-1), and
// no other Prometheus can be installed here. The real relabeling still runs: the test feeds these
// groups to Prometheus through file_sd_configs in place of kubernetes_sd_configs, and
// deploy/prometheus/scrape-kubernetes.yml's relabel_configs act on them unchanged.
//
// What it plays, as Prometheus 2.42 documents role pod: one target per declared port of each
// container, address <pod IP>:<port>, with the labels
//   __meta_kubernetes_namespace, __meta_kubernetes_pod_{name,ip,uid,phase,ready,node_name,host_ip}
//   __meta_kubernetes_pod_label_<name>, __meta_kubernetes_pod_labelpresent_<name> ("true")
//   __meta_kubernetes_pod_annotation_<name>, __meta_kubernetes_pod_annotationpresent_<name>
//   __meta_kubernetes_pod_container_{name,image,init}
//   __meta_kubernetes_pod_container_port_{name,number,protocol}
//   __meta_kubernetes_pod_controller_{kind,name} (the controlling owner, when there is one)
// where <name> is the label's or annotation's name with every character outside [a-zA-Z0-9_]
// made '_'. A container without ports gives one target at the pod's IP alone; a pod without an IP
// yet gives none (Kubernetes discovery lists it with no targets).
#ifndef PSFLOW_TESTS_NODE_POD_TARGETS_H_
#define PSFLOW_TESTS_NODE_POD_TARGETS_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace psflow::node {

// `name` as Prometheus makes a label name of it: [^a-zA-Z0-9_] -> '_'.
std::string SanitizeLabelName(const std::string& name);

// The file_sd target groups ([{"targets": [...], "labels": {...}}, ...]) that Kubernetes
// discovery would give for `pods` (Pod objects as the API server returns them).
nlohmann::json PodTargetGroups(const std::vector<nlohmann::json>& pods);

}  // namespace psflow::node

#endif  // PSFLOW_TESTS_NODE_POD_TARGETS_H_
