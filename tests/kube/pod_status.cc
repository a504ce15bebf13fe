#include "tests/kube/pod_status.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"
#include "tests/kube/object_naming.h"

namespace psflow::kubetest {
namespace {

using Json = nlohmann::json;

struct Container {
  std::string name;
  std::string image;
};

std::vector<Container> SpecContainers(const Json& pod) {
  std::vector<Container> containers;
  if (!pod.is_object() || !pod.contains("spec") || !pod["spec"].is_object()) return containers;
  const Json& spec = pod["spec"];
  auto list = spec.find("containers");
  if (list == spec.end() || !list->is_array()) return containers;
  for (const Json& c : *list) {
    if (!c.is_object()) continue;
    containers.push_back({c.value("name", ""), c.value("image", "")});
  }
  return containers;
}

// The current status, or an empty object.
Json CurrentStatus(const Json& pod) {
  if (pod.is_object() && pod.contains("status") && pod["status"].is_object()) return pod["status"];
  return Json::object();
}

// The status of container `name` in `status`, or a fresh one.
Json ContainerStatus(const Json& status, const Container& container) {
  if (auto list = status.find("containerStatuses"); list != status.end() && list->is_array()) {
    for (const Json& c : *list) {
      if (c.is_object() && c.value("name", "") == container.name) return c;
    }
  }
  return Json{{"name", container.name},
              {"image", container.image},
              {"imageID", ""},
              {"restartCount", 0},
              {"lastState", Json::object()}};
}

Json Condition(absl::string_view type, bool status, absl::string_view now,
               absl::string_view reason = "") {
  Json c{{"type", type},
         {"status", status ? "True" : "False"},
         {"lastProbeTime", nullptr},
         {"lastTransitionTime", now}};
  if (!reason.empty()) c["reason"] = reason;
  return c;
}

std::string DefaultReason(int exit_code, absl::string_view reason) {
  if (!reason.empty()) return std::string(reason);
  return exit_code == 0 ? "Completed" : "Error";
}

// A stable address in the pod network for this pod.
std::string PodIp(const Json& pod) {
  const size_t h = std::hash<std::string>()(kube::Uid(pod));
  return absl::StrCat("10.244.", (h >> 8) % 250 + 1, ".", h % 250 + 2);
}

// When the current container state began ("" when it is not running).
std::string RunningSince(const Json& container_status) {
  auto state = container_status.find("state");
  if (state == container_status.end() || !state->is_object()) return "";
  return kube::StringAt(*state, "running", "startedAt");
}

}  // namespace

absl::StatusOr<Json> PodStatusForPhase(const Json& pod, absl::string_view phase, int exit_code,
                                       absl::string_view reason, absl::Time now_time) {
  const bool terminal = phase == "Succeeded" || phase == "Failed";
  if (!terminal && phase != "Pending" && phase != "Running") {
    return absl::InvalidArgumentError(
        absl::StrCat("pod phase \"", phase, "\": want Pending, Running, Succeeded or Failed"));
  }
  if (phase == "Succeeded" && exit_code != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("a Succeeded pod's containers exit with 0, not ", exit_code));
  }
  const bool evicted = reason == "Evicted";
  if (evicted && phase != "Failed") {
    return absl::InvalidArgumentError("an evicted pod's phase is Failed");
  }
  const std::vector<Container> containers = SpecContainers(pod);
  if (containers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("pod ", kube::Key(pod), " has no spec.containers"));
  }
  const std::string now = Rfc3339(now_time);
  const Json old = CurrentStatus(pod);
  Json status{{"phase", phase}, {"hostIP", "10.0.0.1"}, {"qosClass", "BestEffort"}};
  status["startTime"] = old.contains("startTime") ? old["startTime"] : Json(now);
  if (phase != "Pending") {
    status["podIP"] = PodIp(pod);
    status["podIPs"] = Json::array({{{"ip", PodIp(pod)}}});
  }
  if (evicted) {
    status["reason"] = "Evicted";
    status["message"] = "The node was low on resource: memory. ";
  }
  const bool running = phase == "Running";
  const char* not_ready_reason = running ? "" : terminal ? "PodCompleted" : "ContainersNotReady";
  status["conditions"] = Json::array({Condition("Initialized", true, now),
                                      Condition("Ready", running, now, not_ready_reason),
                                      Condition("ContainersReady", running, now, not_ready_reason),
                                      Condition("PodScheduled", true, now)});
  Json statuses = Json::array();
  for (const Container& container : containers) {
    Json c = ContainerStatus(old, container);
    const std::string started = RunningSince(c);
    if (phase == "Pending") {
      c["state"] = {{"waiting", {{"reason", "ContainerCreating"}}}};
    } else if (running) {
      c["state"] = {{"running", {{"startedAt", started.empty() ? now : started}}}};
    } else {
      c["state"] = {{"terminated",
                     {{"exitCode", exit_code},
                      {"reason", DefaultReason(exit_code, evicted ? "" : reason)},
                      {"startedAt", started.empty() ? now : started},
                      {"finishedAt", now}}}};
    }
    c["ready"] = running;
    c["started"] = running;
    statuses.push_back(std::move(c));
  }
  status["containerStatuses"] = std::move(statuses);
  return status;
}

absl::StatusOr<Json> PodStatusAfterRestart(const Json& pod, absl::string_view container,
                                           int exit_code, absl::string_view reason,
                                           absl::Time now_time) {
  const std::string policy = kube::StringAt(pod, "spec", "restartPolicy");
  if (policy == "Never" || (policy == "OnFailure" && exit_code == 0)) {
    return absl::FailedPreconditionError(
        absl::StrCat("pod ", kube::Key(pod), " has restartPolicy ", policy,
                     ": the kubelet does not restart a container that exited with ", exit_code));
  }
  const std::vector<Container> containers = SpecContainers(pod);
  const Container* target = nullptr;
  for (const Container& c : containers) {
    if (container.empty() || c.name == container) {
      target = &c;
      break;
    }
  }
  if (target == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("pod ", kube::Key(pod), " has no container \"", container, "\""));
  }
  const std::string now = Rfc3339(now_time);
  Json status = CurrentStatus(pod);
  if (!status.contains("phase")) status["phase"] = "Running";
  Json statuses = Json::array();
  for (const Container& c : containers) statuses.push_back(ContainerStatus(status, c));
  for (Json& c : statuses) {
    if (c["name"] != target->name) continue;
    const std::string started = RunningSince(c);
    c["lastState"] = {{"terminated",
                       {{"exitCode", exit_code},
                        {"reason", DefaultReason(exit_code, reason)},
                        {"startedAt", started.empty() ? now : started},
                        {"finishedAt", now}}}};
    c["restartCount"] = c.value("restartCount", 0) + 1;
    c["state"] = {{"running", {{"startedAt", now}}}};
    c["ready"] = true;
    c["started"] = true;
  }
  status["containerStatuses"] = std::move(statuses);
  return status;
}

}  // namespace psflow::kubetest
