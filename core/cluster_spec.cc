#include "core/cluster_spec.h"

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

using nlohmann::json;

absl::Status ValidateAddress(absl::string_view type, size_t index, absl::string_view address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos || colon == 0 ||
      absl::StrContains(address.substr(0, colon), ' ') ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster spec: ", type, "[", index, "] = \"", address, "\" is not host:port"));
  }
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& ClusterSpec::Tasks(absl::string_view type) const {
  static const std::vector<std::string> kNone;
  auto it = cluster.find(std::string(type));
  return it == cluster.end() ? kNone : it->second;
}

const std::string& ClusterSpec::SelfAddress() const { return Tasks(task.type).at(task.index); }

bool ClusterSpec::IsChief() const {
  if (!Tasks("chief").empty()) return task.type == "chief" && task.index == 0;
  return task.type == "worker" && task.index == 0;
}

absl::Status ValidateClusterSpec(const ClusterSpec& spec) {
  if (spec.cluster.empty()) return absl::InvalidArgumentError("cluster spec: no tasks");
  for (const auto& [type, addresses] : spec.cluster) {
    for (size_t i = 0; i < addresses.size(); ++i) {
      RETURN_IF_ERROR(ValidateAddress(type, i, addresses[i]));
    }
  }
  const auto& own = spec.Tasks(spec.task.type);
  if (own.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster spec: task type \"", spec.task.type, "\" is not in the cluster"));
  }
  if (spec.task.index < 0 || static_cast<size_t>(spec.task.index) >= own.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cluster spec: task index ", spec.task.index,
                                                   " is out of range: \"", spec.task.type,
                                                   "\" has ", own.size(), " task(s)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ClusterSpec> ParseTfConfig(absl::string_view text) {
  const json doc =
      json::parse(text.begin(), text.end(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError("TF_CONFIG is not valid JSON");
  if (!doc.is_object()) return absl::InvalidArgumentError("TF_CONFIG must be a JSON object");
  ClusterSpec spec;
  auto cluster = doc.find("cluster");
  if (cluster == doc.end() || !cluster->is_object()) {
    return absl::InvalidArgumentError("TF_CONFIG has no \"cluster\" object");
  }
  for (const auto& [type, list] : cluster->items()) {
    if (!list.is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat("TF_CONFIG cluster.", type, " must be a list of \"host:port\""));
    }
    auto& addresses = spec.cluster[type];
    for (const auto& a : list) {
      if (!a.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("TF_CONFIG cluster.", type, " must be a list of \"host:port\""));
      }
      addresses.push_back(a.get<std::string>());
    }
  }
  auto task = doc.find("task");
  if (task == doc.end() || !task->is_object()) {
    return absl::InvalidArgumentError("TF_CONFIG has no \"task\" object");
  }
  auto type = task->find("type");
  auto index = task->find("index");
  if (type == task->end() || !type->is_string()) {
    return absl::InvalidArgumentError("TF_CONFIG task.type must be a string");
  }
  if (index == task->end() || !index->is_number_integer()) {
    return absl::InvalidArgumentError("TF_CONFIG task.index must be an integer");
  }
  spec.task.type = type->get<std::string>();
  const int64_t task_index = index->get<int64_t>();
  if (task_index < 0 || task_index > 1'000'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster spec: task index ", task_index, " is out of range"));
  }
  spec.task.index = static_cast<int>(task_index);
  if (auto env = doc.find("environment"); env != doc.end() && env->is_string()) {
    spec.environment = env->get<std::string>();
  }
  RETURN_IF_ERROR(ValidateClusterSpec(spec));
  return spec;
}

std::string ToTfConfig(const ClusterSpec& spec) {
  json doc;
  doc["cluster"] = json::object();
  for (const auto& [type, addresses] : spec.cluster) doc["cluster"][type] = addresses;
  doc["task"] = {{"type", spec.task.type}, {"index", spec.task.index}};
  doc["environment"] = spec.environment;
  return doc.dump();
}

std::vector<std::string> SplitHostList(absl::string_view hosts) {
  std::vector<std::string> out;
  for (absl::string_view h : absl::StrSplit(hosts, ',')) {
    h = absl::StripAsciiWhitespace(h);
    if (!h.empty()) out.emplace_back(h);
  }
  return out;
}

absl::StatusOr<ClusterSpec> ClusterSpecFromFlags(absl::string_view job_name, int task_index,
                                                 absl::string_view ps_hosts,
                                                 absl::string_view worker_hosts) {
  ClusterSpec spec;
  if (!ps_hosts.empty()) spec.cluster["ps"] = SplitHostList(ps_hosts);
  if (!worker_hosts.empty()) spec.cluster["worker"] = SplitHostList(worker_hosts);
  spec.task = {std::string(job_name), task_index};
  RETURN_IF_ERROR(ValidateClusterSpec(spec));
  return spec;
}

}  // namespace psflow
