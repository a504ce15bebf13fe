#include "operator/controller/pod_state.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "operator/controller/job_status.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {
namespace {

using nlohmann::json;

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

const json* Field(const json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool ReadTerminated(const json& container_state, PodState& out) {
  const json* terminated = Field(container_state, "terminated");
  if (terminated == nullptr || !terminated->is_object()) return false;
  const json* code = Field(*terminated, "exitCode");
  if (code != nullptr && code->is_number_integer()) out.exit_code = code->get<int>();
  out.reason = kube::StringField(*terminated, "reason");
  out.message = kube::StringField(*terminated, "message");
  return true;
}

// The time of condition `type` with status True; InfinitePast when there is none.
absl::Time TrueSince(const json& status, const char* type) {
  const json* conditions = Field(status, "conditions");
  if (conditions == nullptr || !conditions->is_array()) return absl::InfinitePast();
  for (const json& c : *conditions) {
    if (kube::StringField(c, "type") == type && kube::StringField(c, "status") == "True") {
      return ParseTimestamp(kube::StringField(c, "lastTransitionTime"));
    }
  }
  return absl::InfinitePast();
}

// Whether the pod's maker set spec.nodeName (a managedFields entry of the pod itself, not of a
// subresource, owns it): such a pod is never bound, and its kubelet dates PodScheduled by the
// node's clock. A scheduler's binding sets nodeName without such an entry.
bool NodeNamedByItsMaker(const json& meta) {
  const json* managed = Field(meta, "managedFields");
  if (managed == nullptr || !managed->is_array()) return false;
  for (const json& entry : *managed) {
    if (!kube::StringField(entry, "subresource").empty()) continue;
    const json* fields = Field(entry, "fieldsV1");
    const json* spec = fields != nullptr ? Field(*fields, "f:spec") : nullptr;
    if (spec != nullptr && Field(*spec, "f:nodeName") != nullptr) return true;
  }
  return false;
}

// When `status` (read into `read`) is not the pod's own, what it claims (PodState::stale_status);
// else "".
std::string StaleStatus(const json& pod, const json& status, const PodState& read) {
  const json* meta = Field(pod, "metadata");
  if (meta == nullptr) return "";
  const std::string ip = kube::StringField(status, "podIP");
  // What the status claims, said only of one that is not the pod's own (every pod is read often).
  const auto claims = [&] {
    std::string out = absl::StrCat("phase ", kube::StringField(status, "phase"));
    if (read.exit_code || !read.reason.empty()) absl::StrAppend(&out, ", ", read.DescribeEnd());
    if (!ip.empty()) absl::StrAppend(&out, ", pod IP ", ip);
    return out;
  };
  // A pod on no node has run nothing and has no address.
  const json* spec = Field(pod, "spec");
  if ((spec == nullptr || kube::StringField(*spec, "nodeName").empty()) &&
      (read.main_started || !ip.empty())) {
    return absl::StrCat("its status is an earlier pod's (", claims(),
                        "): it says the pod ran, but the pod is on no node");
  }
  if (NodeNamedByItsMaker(*meta)) return "";
  const absl::Time created = ParseTimestamp(kube::StringField(*meta, "creationTimestamp"));
  const absl::Time scheduled = TrueSince(status, "PodScheduled");
  if (created == absl::InfinitePast() || scheduled == absl::InfinitePast() ||
      scheduled >= created - absl::Seconds(1)) {
    return "";
  }
  return absl::StrCat("its status is an earlier pod's (", claims(), "): scheduled at ",
                      FormatTimestamp(scheduled), ", before the pod was made at ",
                      FormatTimestamp(created));
}

}  // namespace

std::string MainContainerName(const json& pod) {
  const json* spec = Field(pod, "spec");
  const json* containers = spec ? Field(*spec, "containers") : nullptr;
  if (containers == nullptr || !containers->is_array() || containers->empty()) return "";
  for (const json& c : *containers) {
    if (kube::StringField(c, "name") == "psflow") return "psflow";
  }
  return kube::StringField((*containers)[0], "name");
}

std::string PodState::DescribeEnd() const {
  if (exit_code) {
    return reason.empty() ? absl::StrCat("exit code ", *exit_code)
                          : absl::StrCat("exit code ", *exit_code, " (", reason, ")");
  }
  if (!reason.empty()) return message.empty() ? reason : absl::StrCat(reason, ": ", message);
  return "unknown cause";
}

PodState ReadPodState(const json& pod) {
  PodState out;
  out.being_deleted = kube::BeingDeleted(pod);
  if (const json* spec = Field(pod, "spec"); spec != nullptr) {
    if (const json* gates = Field(*spec, "schedulingGates");
        gates != nullptr && gates->is_array()) {
      for (const json& gate : *gates) {
        if (!kube::StringField(gate, "name").empty())
          out.scheduling_gates.push_back(kube::StringField(gate, "name"));
      }
    }
  }
  const json* status = Field(pod, "status");
  if (status == nullptr || !status->is_object()) return out;
  const std::string phase = kube::StringField(*status, "phase");
  if (phase == "Pending") out.phase = PodPhase::kPending;
  if (phase == "Running") out.phase = PodPhase::kRunning;
  if (phase == "Succeeded") out.phase = PodPhase::kSucceeded;
  if (phase == "Failed") out.phase = PodPhase::kFailed;
  if (const json* conditions = Field(*status, "conditions");
      conditions != nullptr && conditions->is_array()) {
    for (const json& c : *conditions) {
      if (!kube::StringField(c, "type").empty())
        out.conditions[kube::StringField(c, "type")] = kube::StringField(c, "status");
      if (kube::StringField(c, "type") == "Ready")
        out.ready = kube::StringField(c, "status") == "True";
      if (kube::StringField(c, "type") == "PodScheduled" &&
          kube::StringField(c, "status") == "False" &&
          kube::StringField(c, "reason") == "Unschedulable") {
        out.unschedulable = kube::StringField(c, "message");
        if (out.unschedulable.empty()) out.unschedulable = "Unschedulable";
      }
    }
  }
  const std::string main = MainContainerName(pod);
  if (const json* statuses = Field(*status, "containerStatuses");
      statuses != nullptr && statuses->is_array()) {
    for (const json& cs : *statuses) {
      const json* count = Field(cs, "restartCount");
      if (count != nullptr && count->is_number_integer()) {
        // Saturating: a malformed pod's counts must not overflow the sum.
        const int64_t sum =
            int64_t{out.restarts} + std::clamp<int64_t>(count->get<int64_t>(), 0, kMaxInt);
        out.restarts = static_cast<int>(std::min<int64_t>(sum, kMaxInt));
      }
      if (kube::StringField(cs, "name") != main) continue;
      if (count != nullptr && count->is_number_integer()) {
        out.main_restarts =
            static_cast<int>(std::clamp<int64_t>(count->get<int64_t>(), 0, kMaxInt));
      }
      const json* state = Field(cs, "state");
      const json* last = Field(cs, "lastState");
      out.main_started =
          out.main_restarts > 0 || (state != nullptr && state->is_object() &&
                                    (state->contains("running") || state->contains("terminated")));
      if (!(state && ReadTerminated(*state, out)) && last != nullptr) ReadTerminated(*last, out);
    }
  }
  // Pod-level reasons (Evicted, NodeLost, UnexpectedAdmissionError) say more than a container's.
  if (const std::string reason = kube::StringField(*status, "reason"); !reason.empty()) {
    out.reason = reason;
    out.message = kube::StringField(*status, "message");
    if (out.phase == PodPhase::kFailed && reason == "Evicted") out.exit_code.reset();
  }
  if (std::string stale = StaleStatus(pod, *status, out); !stale.empty()) {
    // Nothing of it is this pod's: what is left is what its spec and metadata say.
    PodState own;
    own.phase = PodPhase::kPending;
    own.being_deleted = out.being_deleted;
    own.scheduling_gates = std::move(out.scheduling_gates);
    own.stale_status = std::move(stale);
    return own;
  }
  return out;
}

}  // namespace psflow::controller
