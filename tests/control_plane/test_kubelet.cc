#include "tests/control_plane/test_kubelet.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "operator/kube/api_status.h"
#include "operator/kube/object_meta.h"
#include "tests/control_plane/control_plane.h"
#include "tests/kube/pod_status.h"

namespace psflow::kubereal {
namespace {

// POST .../pods/<name>/binding: the scheduler's way of setting spec.nodeName.
kube::Resource BindingOf(const std::string& pod) {
  return kube::Resource{"", "v1", absl::StrCat("pods/", pod, "/binding"), "Binding"};
}

}  // namespace

TestKubelet::TestKubelet(kube::KubeClient& client, std::string ns)
    : client_(client), ns_(std::move(ns)) {
  thread_ = std::jthread([this](std::stop_token stop) { Loop(stop); });
}

TestKubelet::~TestKubelet() {
  thread_.request_stop();
  thread_.join();
}

void TestKubelet::Loop(std::stop_token stop) {
  while (!stop.stop_requested()) {
    absl::StatusOr<kube::ObjectList> pods = client_.List(kube::Pods(), ns_, {});
    if (pods.ok()) {
      for (const kube::Json& pod : pods->items) {
        const std::string name = kube::Name(pod);
        if (kube::BeingDeleted(pod)) {
          if (hold_deletions_) continue;
          kube::DeleteOptions now;
          now.grace_period_seconds = 0;
          now.precondition_uid = kube::Uid(pod);
          if (client_.Delete(kube::Pods(), ns_, name, now).ok()) ++finished_;
          continue;
        }
        if (!kube::StringAt(pod, "spec", "nodeName").empty()) continue;
        if (Bind(name).ok()) ++bound_;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

absl::Status TestKubelet::Bind(const std::string& pod) {
  const kube::Json binding = {
      {"metadata", {{"name", pod}}},
      {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", ControlPlane::kNodeName}}}};
  return client_.Create(BindingOf(pod), ns_, binding).status();
}

absl::Status TestKubelet::ChangeStatus(
    absl::string_view pod,
    const std::function<absl::StatusOr<kube::Json>(const kube::Json& pod)>& change) {
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<kube::Json> current = client_.Get(kube::Pods(), ns_, pod);
    if (!current.ok()) return current.status();
    // A kubelet reports only the pods bound to its node: one the loop has not bound yet is bound
    // now (a 409: bound in between).
    if (kube::StringAt(*current, "spec", "nodeName").empty()) {
      absl::Status bound = Bind(std::string(pod));
      if (bound.ok()) ++bound_;
      if (!bound.ok() && !kube::IsConflict(bound)) return bound;
      continue;
    }
    absl::StatusOr<kube::Json> status = change(*current);
    if (!status.ok()) return status.status();
    kube::Json updated = *std::move(current);
    updated["status"] = *std::move(status);
    absl::StatusOr<kube::Json> written = client_.UpdateStatus(kube::Pods(), ns_, updated);
    if (written.ok()) return absl::OkStatus();
    if (!kube::IsConflict(written.status()) || attempt >= 20) return written.status();
  }
}

absl::Status TestKubelet::SetPhase(absl::string_view pod, absl::string_view phase, int exit_code,
                                   absl::string_view reason, absl::string_view pod_ip) {
  return ChangeStatus(pod, [&](const kube::Json& current) -> absl::StatusOr<kube::Json> {
    absl::StatusOr<kube::Json> status =
        kubetest::PodStatusForPhase(current, phase, exit_code, reason, absl::Now());
    if (!status.ok()) return status;
    if (phase == "Running") {
      (*status)["podIP"] = std::string(pod_ip);
      (*status)["podIPs"] = kube::Json::array({{{"ip", std::string(pod_ip)}}});
    }
    return status;
  });
}

absl::Status TestKubelet::Evict(absl::string_view pod) {
  return ChangeStatus(pod, [&](const kube::Json& current) -> absl::StatusOr<kube::Json> {
    absl::StatusOr<kube::Json> status =
        kubetest::PodStatusForPhase(current, "Failed", 137, "Evicted", absl::Now());
    if (!status.ok()) return status;
    (*status)["reason"] = "Evicted";
    (*status)["message"] = "The node was low on resource: memory.";
    if (!status->contains("conditions") || !(*status)["conditions"].is_array()) {
      (*status)["conditions"] = kube::Json::array();
    }
    (*status)["conditions"].push_back(
        {{"type", "DisruptionTarget"},
         {"status", "True"},
         {"reason", "TerminationByKubelet"},
         {"message", "The node was low on resource: memory."},
         {"lastTransitionTime",
          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone())}});
    return status;
  });
}

absl::Status TestKubelet::RestartInPlace(absl::string_view pod, int exit_code,
                                         absl::string_view reason) {
  return ChangeStatus(pod, [&](const kube::Json& current) {
    return kubetest::PodStatusAfterRestart(current, "", exit_code, reason, absl::Now());
  });
}

}  // namespace psflow::kubereal
