#include "tests/node/pod_targets.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace psflow::node {

using Json = nlohmann::json;

std::string SanitizeLabelName(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') c = '_';
  }
  return out;
}

namespace {

constexpr char kPrefix[] = "__meta_kubernetes_pod_";

std::string Ready(const Json& pod) {
  for (const Json& c : pod["status"].value("conditions", Json::array())) {
    if (c.value("type", "") == "Ready") {
      return absl::AsciiStrToLower(c.value("status", "unknown"));
    }
  }
  return "unknown";
}

// The labels every target of `pod` carries.
Json PodLabels(const Json& pod) {
  const Json& meta = pod["metadata"];
  const Json& status = pod["status"];
  Json labels = {{"__meta_kubernetes_namespace", meta.value("namespace", "")},
                 {absl::StrCat(kPrefix, "name"), meta.value("name", "")},
                 {absl::StrCat(kPrefix, "ip"), status.value("podIP", "")},
                 {absl::StrCat(kPrefix, "uid"), meta.value("uid", "")},
                 {absl::StrCat(kPrefix, "phase"), status.value("phase", "")},
                 {absl::StrCat(kPrefix, "ready"), Ready(pod)},
                 {absl::StrCat(kPrefix, "node_name"), pod["spec"].value("nodeName", "")},
                 {absl::StrCat(kPrefix, "host_ip"), status.value("hostIP", "")}};
  for (const auto& [kind, field] :
       {std::pair<std::string, std::string>{"label", "labels"}, {"annotation", "annotations"}}) {
    const Json entries =
        meta.value(field, Json::object());  // not a temporary: items() refers to it
    for (const auto& [name, value] : entries.items()) {
      const std::string key = SanitizeLabelName(name);
      labels[absl::StrCat(kPrefix, kind, "_", key)] =
          value.is_string() ? value.get<std::string>() : "";
      labels[absl::StrCat(kPrefix, kind, "present_", key)] = "true";
    }
  }
  for (const Json& owner : meta.value("ownerReferences", Json::array())) {
    if (owner.value("controller", false)) {
      labels[absl::StrCat(kPrefix, "controller_kind")] = owner.value("kind", "");
      labels[absl::StrCat(kPrefix, "controller_name")] = owner.value("name", "");
    }
  }
  return labels;
}

}  // namespace

Json PodTargetGroups(const std::vector<Json>& pods) {
  Json groups = Json::array();
  for (const Json& pod : pods) {
    const std::string ip = pod["status"].value("podIP", "");
    if (ip.empty()) continue;
    const Json common = PodLabels(pod);
    for (const auto& [list, init] :
         {std::pair<const char*, bool>{"initContainers", true}, {"containers", false}}) {
      for (const Json& container : pod["spec"].value(list, Json::array())) {
        Json labels = common;
        labels[absl::StrCat(kPrefix, "container_name")] = container.value("name", "");
        labels[absl::StrCat(kPrefix, "container_image")] = container.value("image", "");
        labels[absl::StrCat(kPrefix, "container_init")] = init ? "true" : "false";
        const Json ports = container.value("ports", Json::array());
        if (ports.empty()) {
          groups.push_back({{"targets", Json::array({ip})}, {"labels", labels}});
          continue;
        }
        for (const Json& port : ports) {
          const int number = port.value("containerPort", 0);
          Json with_port = labels;
          with_port[absl::StrCat(kPrefix, "container_port_name")] = port.value("name", "");
          with_port[absl::StrCat(kPrefix, "container_port_number")] = std::to_string(number);
          with_port[absl::StrCat(kPrefix, "container_port_protocol")] =
              port.value("protocol", "TCP");
          groups.push_back(
              {{"targets", Json::array({absl::StrCat(ip, ":", number)})}, {"labels", with_port}});
        }
      }
    }
  }
  return groups;
}

}  // namespace psflow::node
