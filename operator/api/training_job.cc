#include "operator/api/training_job.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/read_file.h"
#include "core/status_macros.h"
#include "operator/api/kube_names.h"
#include "worker/models/model_file.h"
#include "worker/models/yaml_error.h"

namespace psflow::api {
namespace {

constexpr int64_t kMaxPolicyValue = 315'360'000;  // ten years of seconds

// Parsing errors carry their YAML path; the caller prefixes the source.
absl::Status Bad(absl::string_view path, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}

// A value from the input for an error line: quoted, escaped, cut at 80 bytes.
std::string Quoted(absl::string_view value) {
  return absl::StrCat("\"", absl::CHexEscape(value.substr(0, 80)),
                      value.size() > 80 ? "...\"" : "\"");
}

// The documents of a YAML stream that hold something ("---" and nothing holds nothing), from at
// most the first kMaxDocuments; throws YAML::Exception where the stream does not parse. Counted
// without building them: yaml-cpp's LoadAll never ends on some malformed streams (a fuzzer found
// one: it kept returning empty documents until memory ran out).
int DocumentsWithContent(absl::string_view yaml) {
  struct Counter final : YAML::EventHandler {
    bool content = false;
    void OnDocumentStart(const YAML::Mark&) override { content = false; }
    void OnDocumentEnd() override {}
    void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
    void OnAlias(const YAML::Mark&, YAML::anchor_t) override { content = true; }
    void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  const std::string&) override {
      content = true;
    }
    void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                         YAML::EmitterStyle::value) override {
      content = true;
    }
    void OnSequenceEnd() override {}
    void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                    YAML::EmitterStyle::value) override {
      content = true;
    }
    void OnMapEnd() override {}
  };
  constexpr int kMaxDocuments = 100;
  std::istringstream stream{std::string(yaml)};
  YAML::Parser parser(stream);
  Counter counter;
  int documents = 0;
  for (int i = 0; i < kMaxDocuments && parser.HandleNextDocument(counter); ++i) {
    documents += counter.content ? 1 : 0;
  }
  return documents;
}

std::string FieldPath(absl::string_view path, absl::string_view key) {
  return path.empty() ? std::string(key) : absl::StrCat(path, ".", key);
}

// No map anywhere in the document gives a key twice (YAML keeps both and a lookup finds the
// first; kubectl refuses such a manifest). Aliases are followed, so a document nested deeper than
// kMaxDepth (an alias inside what it names never ends) or of more than kMaxNodes nodes (aliases
// of aliases) is refused.
struct KeyWalk {
  static constexpr int kMaxDepth = 64;
  static constexpr int64_t kMaxNodes = 100'000;
  int64_t nodes = 0;

  absl::Status Check(const YAML::Node& node, const std::string& path, int depth) {
    if (depth > kMaxDepth) {
      return Bad(path.size() > 100 ? absl::StrCat(path.substr(0, 100), "...") : path,
                 absl::StrCat("nested deeper than ", kMaxDepth,
                              " levels (an alias inside what it names?)"));
    }
    if (++nodes > kMaxNodes) {
      return Bad("manifest",
                 absl::StrCat("more than ", kMaxNodes, " YAML nodes (aliases of aliases?)"));
    }
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        RETURN_IF_ERROR(Check(node[i], absl::StrCat(path, "[", i, "]"), depth + 1));
      }
    }
    if (!node.IsMap()) return absl::OkStatus();
    std::set<std::string> seen;
    for (const auto& field : node) {
      const std::string key = field.first.IsScalar() ? field.first.Scalar() : "?";
      if (!seen.insert(key).second) return Bad(FieldPath(path, key), "given twice");
      RETURN_IF_ERROR(Check(field.second, FieldPath(path, key), depth + 1));
    }
    return absl::OkStatus();
  }
};

// The fields of a map psflow defines (not one of Kubernetes' own, such as a pod template) are
// all known, as the API server's strict field validation has them: a misspelt
// activeDeadlineSeconds is not silently no deadline.
absl::Status CheckKnownFields(const YAML::Node& node, absl::string_view path,
                              std::initializer_list<absl::string_view> known) {
  if (!node.IsMap()) return absl::OkStatus();  // the caller says what it must be
  for (const auto& field : node) {
    const std::string key = field.first.IsScalar() ? field.first.Scalar() : "?";
    if (absl::c_find(known, key) == known.end()) {
      return Bad(FieldPath(path, key),
                 absl::StrCat("unknown field (known: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

// node[key], or an undefined node when node is not a map (yaml-cpp throws on chained lookups
// through missing keys).
YAML::Node Get(const YAML::Node& node, const char* key) {
  if (!node || !node.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  return node[key];
}

template <class T>
absl::StatusOr<T> Scalar(const YAML::Node& node, absl::string_view path, const char* kind) {
  // A missing key's node throws on any question but this one.
  if (!node.IsDefined()) return Bad(path, absl::StrCat("is required (", kind, ")"));
  if (!node.IsScalar()) return Bad(path, absl::StrCat("must be ", kind));
  // A quoted scalar is a string (yaml-cpp tags it "!"), which the API server refuses where the
  // CRD wants a number or a boolean.
  if (!std::is_same_v<T, std::string> && node.Tag() == "!") {
    return Bad(path, absl::StrCat("must be ", kind, ", got the string \"", node.Scalar(), "\""));
  }
  try {
    return node.as<T>();
  } catch (const YAML::Exception&) {
    return Bad(path, absl::StrCat("must be ", kind, ", got \"", node.Scalar(), "\""));
  }
}

absl::StatusOr<std::vector<std::string>> StringList(const YAML::Node& node,
                                                    absl::string_view path) {
  std::vector<std::string> out;
  if (!node) return out;
  if (!node.IsSequence()) return Bad(path, "must be a list of strings");
  for (size_t i = 0; i < node.size(); ++i) {
    ASSIGN_OR_RETURN(std::string s,
                     Scalar<std::string>(node[i], absl::StrCat(path, "[", i, "]"), "a string"));
    out.push_back(std::move(s));
  }
  return out;
}

template <class Enum>
absl::StatusOr<Enum> EnumValue(const YAML::Node& node, absl::string_view path,
                               const std::vector<std::pair<const char*, Enum>>& values,
                               Enum fallback) {
  if (!node) return fallback;
  ASSIGN_OR_RETURN(std::string s, Scalar<std::string>(node, path, "a string"));
  std::vector<std::string> names;
  for (const auto& [name, value] : values) {
    if (s == name) return value;
    if (*name != '\0') names.emplace_back(name);  // "" (the default, as the CRD allows) unnamed
  }
  return Bad(path, absl::StrCat("\"", s, "\" is not one of ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<Container> ParseContainer(const YAML::Node& node, absl::string_view path) {
  if (!node.IsMap()) return Bad(path, "must be a container object");
  Container c;
  ASSIGN_OR_RETURN(c.name,
                   Scalar<std::string>(node["name"], absl::StrCat(path, ".name"), "a string"));
  if (!IsDns1123Label(c.name)) {
    return Bad(absl::StrCat(path, ".name"),
               absl::StrCat("must be at most 63 lowercase letters, digits and '-', starting and "
                            "ending with a letter or digit (a DNS-1123 label), got ",
                            Quoted(c.name)));
  }
  if (node["image"]) {
    ASSIGN_OR_RETURN(c.image,
                     Scalar<std::string>(node["image"], absl::StrCat(path, ".image"), "a string"));
  }
  if (node["workingDir"]) {
    ASSIGN_OR_RETURN(
        c.working_dir,
        Scalar<std::string>(node["workingDir"], absl::StrCat(path, ".workingDir"), "a string"));
  }
  ASSIGN_OR_RETURN(c.command, StringList(node["command"], absl::StrCat(path, ".command")));
  ASSIGN_OR_RETURN(c.args, StringList(node["args"], absl::StrCat(path, ".args")));
  if (const YAML::Node env = node["env"]) {
    if (!env.IsSequence()) return Bad(absl::StrCat(path, ".env"), "must be a list");
    for (size_t i = 0; i < env.size(); ++i) {
      const std::string p = absl::StrCat(path, ".env[", i, "]");
      EnvVar e;
      ASSIGN_OR_RETURN(e.name, Scalar<std::string>(Get(env[i], "name"), p + ".name", "a string"));
      if (!IsEnvVarName(e.name)) {
        return Bad(p + ".name", absl::StrCat("must be printable ASCII without '=' (an environment "
                                             "variable's name), got ",
                                             Quoted(e.name)));
      }
      if (Get(env[i], "value")) {
        ASSIGN_OR_RETURN(e.value,
                         Scalar<std::string>(Get(env[i], "value"), p + ".value", "a string"));
      }
      e.value_from = Get(env[i], "valueFrom").IsDefined();
      c.env.push_back(std::move(e));
    }
  }
  if (const YAML::Node ports = node["ports"]) {
    if (!ports.IsSequence()) return Bad(absl::StrCat(path, ".ports"), "must be a list");
    for (size_t i = 0; i < ports.size(); ++i) {
      const std::string p = absl::StrCat(path, ".ports[", i, "]");
      ContainerPort port;
      if (Get(ports[i], "name")) {
        ASSIGN_OR_RETURN(port.name,
                         Scalar<std::string>(Get(ports[i], "name"), p + ".name", "a string"));
        if (!IsPortName(port.name)) {
          return Bad(p + ".name",
                     absl::StrCat("must be at most 15 lowercase letters, digits and '-' with at "
                                  "least one letter, no \"--\" and no '-' at either end (an IANA "
                                  "service name), got ",
                                  Quoted(port.name)));
        }
        if (absl::c_any_of(c.ports, [&](const ContainerPort& q) { return q.name == port.name; })) {
          return Bad(p + ".name", absl::StrCat(Quoted(port.name), " names another port too"));
        }
      }
      ASSIGN_OR_RETURN(port.container_port, Scalar<int>(Get(ports[i], "containerPort"),
                                                        p + ".containerPort", "an integer"));
      if (port.container_port < 1 || port.container_port > 65535) {
        return Bad(p + ".containerPort", "must be in 1..65535");
      }
      c.ports.push_back(std::move(port));
    }
  }
  return c;
}

// A Kubernetes quantity as a volume size is written: "512Mi", "10Gi", "1.5G", "1000000".
bool IsSizeQuantity(absl::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (!digits()) return false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  const absl::string_view suffix = s.substr(i);
  for (const char* unit : {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E"}) {
    if (suffix == unit) return true;
  }
  return false;
}

absl::StatusOr<CheckpointVolume> ParseCheckpoint(const YAML::Node& node, absl::string_view path) {
  if (!node.IsMap()) return Bad(path, "must be an object");
  CheckpointVolume c;
  ASSIGN_OR_RETURN(c.kind,
                   EnumValue<CheckpointVolumeKind>(
                       node["volume"], absl::StrCat(path, ".volume"),
                       {{"emptyDir", CheckpointVolumeKind::kEmptyDir},
                        {"persistentVolumeClaim", CheckpointVolumeKind::kPersistentVolumeClaim}},
                       CheckpointVolumeKind::kEmptyDir));
  if (node["claimName"]) {
    ASSIGN_OR_RETURN(
        c.claim_name,
        Scalar<std::string>(node["claimName"], absl::StrCat(path, ".claimName"), "a string"));
  }
  if (node["sizeLimit"]) {
    ASSIGN_OR_RETURN(
        c.size_limit,
        Scalar<std::string>(node["sizeLimit"], absl::StrCat(path, ".sizeLimit"), "a string"));
    if (!IsSizeQuantity(c.size_limit)) {
      return Bad(absl::StrCat(path, ".sizeLimit"),
                 absl::StrCat("\"", c.size_limit, "\" is not a size (e.g. 512Mi, 10Gi)"));
    }
  }
  if (c.kind == CheckpointVolumeKind::kPersistentVolumeClaim) {
    if (c.claim_name.empty()) {
      return Bad(absl::StrCat(path, ".claimName"),
                 "names the PersistentVolumeClaim of volume persistentVolumeClaim; it is missing");
    }
    if (!c.size_limit.empty()) {
      return Bad(absl::StrCat(path, ".sizeLimit"),
                 "applies to volume emptyDir only (a claim's size is the claim's)");
    }
  } else if (!c.claim_name.empty()) {
    return Bad(absl::StrCat(path, ".claimName"), "applies to volume persistentVolumeClaim only");
  }
  return c;
}

absl::StatusOr<ExitCodeRequirement> ParseExitCodes(const YAML::Node& node, absl::string_view path) {
  if (!node.IsMap()) return Bad(path, "must be an object (operator, values)");
  ExitCodeRequirement r;
  if (!node["operator"]) return Bad(absl::StrCat(path, ".operator"), "is required (In or NotIn)");
  ASSIGN_OR_RETURN(r.in, EnumValue<bool>(node["operator"], absl::StrCat(path, ".operator"),
                                         {{"In", true}, {"NotIn", false}}, true));
  const YAML::Node values = node["values"];
  const std::string vpath = absl::StrCat(path, ".values");
  if (!values || !values.IsSequence() || values.size() == 0) {
    return Bad(vpath, "must list at least one exit code");
  }
  if (values.size() > 255) return Bad(vpath, "lists at most 255 exit codes");
  for (size_t i = 0; i < values.size(); ++i) {
    const std::string at = absl::StrCat(vpath, "[", i, "]");
    ASSIGN_OR_RETURN(const int code, Scalar<int>(values[i], at, "an integer"));
    if (code < 0 || code > 255) return Bad(at, "must be an exit code in 0..255");
    if (code == 0 && r.in) {
      return Bad(at, "0 is success, never a failure: operator In cannot list it");
    }
    if (absl::c_linear_search(r.values, code))
      return Bad(at, absl::StrCat(code, " is listed twice"));
    r.values.push_back(code);
  }
  std::sort(r.values.begin(), r.values.end());
  return r;
}

absl::StatusOr<std::vector<FailureRule>> ParseFailurePolicy(const YAML::Node& node,
                                                            absl::string_view path) {
  std::vector<FailureRule> rules;
  if (!node) return rules;
  if (!node.IsMap()) return Bad(path, "must be an object (rules)");
  const YAML::Node list = node["rules"];
  const std::string lpath = absl::StrCat(path, ".rules");
  if (!list || !list.IsSequence() || list.size() == 0)
    return Bad(lpath, "must list at least one rule");
  if (list.size() > static_cast<size_t>(kMaxFailureRules)) {
    return Bad(lpath, absl::StrCat("lists at most ", kMaxFailureRules, " rules"));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = absl::StrCat(lpath, "[", i, "]");
    const YAML::Node r = list[i];
    if (!r.IsMap()) return Bad(at, "must be an object (action, onExitCodes or onPodConditions)");
    FailureRule rule;
    if (!r["action"])
      return Bad(absl::StrCat(at, ".action"), "is required (FailJob, Count or Ignore)");
    ASSIGN_OR_RETURN(rule.action, EnumValue<FailureAction>(r["action"], absl::StrCat(at, ".action"),
                                                           {{"FailJob", FailureAction::kFailJob},
                                                            {"Count", FailureAction::kCount},
                                                            {"Ignore", FailureAction::kIgnore}},
                                                           FailureAction::kCount));
    if (r["onExitCodes"].IsDefined() == r["onPodConditions"].IsDefined()) {
      return Bad(at, "must give exactly one of onExitCodes and onPodConditions");
    }
    if (r["onExitCodes"]) {
      ASSIGN_OR_RETURN(rule.on_exit_codes,
                       ParseExitCodes(r["onExitCodes"], absl::StrCat(at, ".onExitCodes")));
    } else {
      const YAML::Node conditions = r["onPodConditions"];
      const std::string cpath = absl::StrCat(at, ".onPodConditions");
      if (!conditions.IsSequence() || conditions.size() == 0) {
        return Bad(cpath, "must list at least one pod condition (type, status)");
      }
      if (conditions.size() > 20) return Bad(cpath, "lists at most 20 pod conditions");
      for (size_t j = 0; j < conditions.size(); ++j) {
        const std::string cat = absl::StrCat(cpath, "[", j, "]");
        if (!conditions[j].IsMap()) return Bad(cat, "must be an object (type, status)");
        PodConditionRequirement c;
        const YAML::Node type = conditions[j]["type"];
        if (!type) return Bad(absl::StrCat(cat, ".type"), "is required (e.g. DisruptionTarget)");
        ASSIGN_OR_RETURN(c.type, Scalar<std::string>(type, absl::StrCat(cat, ".type"), "a string"));
        if (c.type.empty()) return Bad(absl::StrCat(cat, ".type"), "must not be empty");
        ASSIGN_OR_RETURN(
            c.status, EnumValue<std::string>(
                          conditions[j]["status"], absl::StrCat(cat, ".status"),
                          {{"True", "True"}, {"False", "False"}, {"Unknown", "Unknown"}}, "True"));
        rule.on_pod_conditions.push_back(std::move(c));
      }
    }
    rules.push_back(std::move(rule));
  }
  return rules;
}

absl::StatusOr<ReplicaSpec> ParseReplicaSpec(const YAML::Node& node, ReplicaType type,
                                             absl::string_view path) {
  if (!node.IsMap()) return Bad(path, "must be an object");
  RETURN_IF_ERROR(CheckKnownFields(
      node, path, {"replicas", "restartPolicy", "podFailurePolicy", "template", "checkpoint"}));
  ReplicaSpec r;
  if (node["replicas"]) {
    ASSIGN_OR_RETURN(r.replicas,
                     Scalar<int>(node["replicas"], absl::StrCat(path, ".replicas"), "an integer"));
    if (r.replicas < 0 || r.replicas > MaxReplicas(type)) {
      return Bad(absl::StrCat(path, ".replicas"),
                 absl::StrCat("must be in 0..", MaxReplicas(type)));
    }
  }
  ASSIGN_OR_RETURN(
      r.restart_policy,
      EnumValue<RestartPolicy>(node["restartPolicy"], absl::StrCat(path, ".restartPolicy"),
                               {{"Never", RestartPolicy::kNever},
                                {"OnFailure", RestartPolicy::kOnFailure},
                                {"Always", RestartPolicy::kAlways},
                                {"ExitCode", RestartPolicy::kExitCode}},
                               RestartPolicy::kNever));
  ASSIGN_OR_RETURN(r.failure_rules, ParseFailurePolicy(node["podFailurePolicy"],
                                                       absl::StrCat(path, ".podFailurePolicy")));
  const YAML::Node containers = Get(Get(Get(node, "template"), "spec"), "containers");
  const std::string cpath = absl::StrCat(path, ".template.spec.containers");
  if (!containers || !containers.IsSequence() || containers.size() == 0) {
    return Bad(cpath, "must list at least one container");
  }
  for (size_t i = 0; i < containers.size(); ++i) {
    ASSIGN_OR_RETURN(Container c, ParseContainer(containers[i], absl::StrCat(cpath, "[", i, "]")));
    if (absl::c_any_of(r.containers, [&](const Container& o) { return o.name == c.name; })) {
      return Bad(absl::StrCat(cpath, "[", i, "].name"),
                 absl::StrCat(Quoted(c.name), " names another container too"));
    }
    r.containers.push_back(std::move(c));
  }
  if (node["checkpoint"]) {
    const std::string checkpoint_path = absl::StrCat(path, ".checkpoint");
    if (type != ReplicaType::kPS) {
      return Bad(checkpoint_path, "only PS replicas checkpoint (they hold the variables)");
    }
    ASSIGN_OR_RETURN(r.checkpoint, ParseCheckpoint(node["checkpoint"], checkpoint_path));
  }
  return r;
}

absl::StatusOr<NetworkPolicySpec> ParseNetworkPolicy(const YAML::Node& node) {
  NetworkPolicySpec n;
  if (!node) return n;
  if (!node.IsMap()) return Bad("spec.networkPolicy", "must be an object");
  RETURN_IF_ERROR(CheckKnownFields(node, "spec.networkPolicy", {"enabled", "metricsFrom"}));
  if (node["enabled"]) {
    ASSIGN_OR_RETURN(n.enabled,
                     Scalar<bool>(node["enabled"], "spec.networkPolicy.enabled", "a boolean"));
  }
  if (const YAML::Node from = node["metricsFrom"]) {
    if (!from.IsSequence()) {
      return Bad("spec.networkPolicy.metricsFrom", "must be a list of NetworkPolicyPeers");
    }
    for (size_t i = 0; i < from.size(); ++i) {
      if (!from[i].IsMap()) {
        return Bad(absl::StrCat("spec.networkPolicy.metricsFrom[", i, "]"),
                   "must be a NetworkPolicyPeer (podSelector, namespaceSelector or ipBlock)");
      }
    }
  }
  return n;
}

absl::StatusOr<SharedMemorySpec> ParseSharedMemory(const YAML::Node& node) {
  SharedMemorySpec s;
  if (!node) return s;
  if (!node.IsMap()) return Bad("spec.sharedMemory", "must be an object (enabled)");
  // No hostPath: the node's directory is the operator's to choose (--shared_memory_dir).
  RETURN_IF_ERROR(CheckKnownFields(node, "spec.sharedMemory", {"enabled"}));
  if (node["enabled"]) {
    ASSIGN_OR_RETURN(s.enabled,
                     Scalar<bool>(node["enabled"], "spec.sharedMemory.enabled", "a boolean"));
  }
  return s;
}

absl::StatusOr<SchedulingPolicy> ParseSchedulingPolicy(const YAML::Node& node) {
  SchedulingPolicy s;
  if (!node) return s;
  const std::string path = "spec.runPolicy.schedulingPolicy";
  if (!node.IsMap())
    return Bad(path, "must be an object (gang, queue, priorityClass, schedulerName)");
  RETURN_IF_ERROR(
      CheckKnownFields(node, path, {"gang", "queue", "priorityClass", "schedulerName"}));
  if (!node["gang"]) return Bad(path + ".gang", "is required (volcano or coscheduling)");
  ASSIGN_OR_RETURN(s.gang,
                   EnumValue<GangScheduler>(node["gang"], path + ".gang",
                                            {{"volcano", GangScheduler::kVolcano},
                                             {"coscheduling", GangScheduler::kCoscheduling}},
                                            GangScheduler::kNone));
  for (const auto& [key, field] : {std::pair<const char*, std::string*>{"queue", &s.queue},
                                   {"priorityClass", &s.priority_class},
                                   {"schedulerName", &s.scheduler_name}}) {
    if (!node[key]) continue;
    ASSIGN_OR_RETURN(*field,
                     Scalar<std::string>(node[key], absl::StrCat(path, ".", key), "a string"));
    if (field->empty()) return Bad(absl::StrCat(path, ".", key), "must not be empty");
  }
  if (s.gang == GangScheduler::kCoscheduling) {
    for (const char* key : {"queue", "priorityClass"}) {
      if (node[key]) {
        return Bad(absl::StrCat(path, ".", key),
                   "applies to gang volcano only (coscheduling has no queues; give the pods a "
                   "priorityClassName in their template)");
      }
    }
  }
  return s;
}

absl::StatusOr<RunPolicy> ParseRunPolicy(const YAML::Node& node) {
  RunPolicy p;
  if (!node) return p;
  if (!node.IsMap()) return Bad("spec.runPolicy", "must be an object");
  RETURN_IF_ERROR(
      CheckKnownFields(node, "spec.runPolicy",
                       {"cleanPodPolicy", "ttlSecondsAfterFinished", "schedulingTimeoutSeconds",
                        "finishGraceSeconds", "activeDeadlineSeconds", "backoffLimit", "suspend",
                        "schedulingPolicy"}));
  ASSIGN_OR_RETURN(p.clean_pod_policy, EnumValue<CleanPodPolicy>(
                                           node["cleanPodPolicy"], "spec.runPolicy.cleanPodPolicy",
                                           {{"Running", CleanPodPolicy::kRunning},
                                            {"All", CleanPodPolicy::kAll},
                                            {"None", CleanPodPolicy::kNone}},
                                           CleanPodPolicy::kRunning));
  auto non_negative = [&](const char* field, auto& out) -> absl::Status {
    if (!node[field]) return absl::OkStatus();
    const std::string path = absl::StrCat("spec.runPolicy.", field);
    using T = typename std::decay_t<decltype(out)>::value_type;
    ASSIGN_OR_RETURN(T v, Scalar<T>(node[field], path, "an integer"));
    if (v < 0) return Bad(path, "must be >= 0");
    if (v > kMaxPolicyValue) return Bad(path, absl::StrCat("must be <= ", kMaxPolicyValue));
    out = v;
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(non_negative("ttlSecondsAfterFinished", p.ttl_seconds_after_finished));
  RETURN_IF_ERROR(non_negative("finishGraceSeconds", p.finish_grace_seconds));
  RETURN_IF_ERROR(non_negative("schedulingTimeoutSeconds", p.scheduling_timeout_seconds));
  RETURN_IF_ERROR(non_negative("activeDeadlineSeconds", p.active_deadline_seconds));
  RETURN_IF_ERROR(non_negative("backoffLimit", p.backoff_limit));
  if (node["suspend"]) {
    ASSIGN_OR_RETURN(p.suspend,
                     Scalar<bool>(node["suspend"], "spec.runPolicy.suspend", "a boolean"));
  }
  ASSIGN_OR_RETURN(p.scheduling, ParseSchedulingPolicy(node["schedulingPolicy"]));
  return p;
}

// spec.modelFile: a valid model file, and the only model the training replicas are given.
absl::Status CheckModelFile(const TrainingJob& job) {
  absl::StatusOr<models::ModelDefinition> m =
      models::ParseModelFile(job.model_file, "spec.modelFile");
  if (!m.ok()) return m.status();
  for (const auto& [type, spec] : job.replica_specs) {
    if (type == ReplicaType::kPS) continue;
    for (const std::string& arg : spec.MainContainer().args) {
      const std::string flag = ParseFlagArgument(arg).name;
      if (flag == "model" || flag == "model_file" || flag == "model_config") {
        return Bad(absl::StrCat("spec.replicaSpecs.", ReplicaTypeName(type)),
                   absl::StrCat("passes ", arg,
                                ", but spec.modelFile gives the model: "
                                "remove one"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

FlagArgument ParseFlagArgument(absl::string_view arg) {
  FlagArgument f;
  if (!absl::ConsumePrefix(&arg, "-")) return f;
  absl::ConsumePrefix(&arg, "-");
  const size_t eq = arg.find('=');
  f.name = std::string(arg.substr(0, eq));
  if (eq != absl::string_view::npos) f.value = std::string(arg.substr(eq + 1));
  return f;
}

absl::Status CheckJobName(absl::string_view name) {
  const auto lower = [](char c) { return c >= 'a' && c <= 'z'; };
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  const bool label = !name.empty() && lower(name.front()) && name.back() != '-' &&
                     absl::c_all_of(name, [&](char c) { return lower(c) || digit(c) || c == '-'; });
  if (label && name.size() <= kMaxJobNameLength) return absl::OkStatus();
  return Bad("metadata.name",
             absl::StrCat("must be at most ", kMaxJobNameLength,
                          " lowercase letters, digits and '-', starting with a letter and not "
                          "ending with '-' (a DNS-1035 label: every pod's hostname "
                          "<job>-<type>-<index> must fit 63), got ",
                          Quoted(name)));
}

namespace {

absl::StatusOr<TrainingJob> Parse(const YAML::Node& doc) {
  if (!doc.IsMap()) return Bad("manifest", "must be a YAML object (a TrainingJob)");
  RETURN_IF_ERROR(KeyWalk().Check(doc, "", 0));
  RETURN_IF_ERROR(CheckKnownFields(doc, "", {"apiVersion", "kind", "metadata", "spec", "status"}));
  ASSIGN_OR_RETURN(std::string api_version,
                   Scalar<std::string>(doc["apiVersion"], "apiVersion", "a string"));
  if (api_version != kApiVersion) {
    return Bad("apiVersion", absl::StrCat("must be ", kApiVersion, ", got ", api_version));
  }
  ASSIGN_OR_RETURN(std::string kind, Scalar<std::string>(doc["kind"], "kind", "a string"));
  if (kind != kKind) return Bad("kind", absl::StrCat("must be ", kKind, ", got ", kind));
  TrainingJob job;
  ASSIGN_OR_RETURN(job.name, Scalar<std::string>(Get(Get(doc, "metadata"), "name"), "metadata.name",
                                                 "a string"));
  RETURN_IF_ERROR(CheckJobName(job.name));
  if (Get(Get(doc, "metadata"), "namespace")) {
    ASSIGN_OR_RETURN(job.namespace_, Scalar<std::string>(Get(Get(doc, "metadata"), "namespace"),
                                                         "metadata.namespace", "a string"));
  }
  const YAML::Node spec = doc["spec"];
  if (!spec || !spec.IsMap()) return Bad("spec", "is missing");
  RETURN_IF_ERROR(CheckKnownFields(spec, "spec",
                                   {"replicaSpecs", "runPolicy", "networkPolicy", "modelFile",
                                    "sharedMemory", "successPolicy", "tls"}));
  const YAML::Node replicas = spec["replicaSpecs"];
  if (!replicas || !replicas.IsMap() || replicas.size() == 0) {
    return Bad("spec.replicaSpecs", "must map replica types (PS, Worker, ...) to specs");
  }
  for (const auto& entry : replicas) {
    const std::string type_name = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    std::optional<ReplicaType> type;
    for (ReplicaType t :
         {ReplicaType::kChief, ReplicaType::kPS, ReplicaType::kWorker, ReplicaType::kEvaluator}) {
      if (type_name == ReplicaTypeName(t)) type = t;
    }
    if (!type) {
      return Bad(absl::StrCat("spec.replicaSpecs.", type_name),
                 "unknown replica type (known: Chief, PS, Worker, Evaluator)");
    }
    ASSIGN_OR_RETURN(
        job.replica_specs[*type],
        ParseReplicaSpec(entry.second, *type, absl::StrCat("spec.replicaSpecs.", type_name)));
  }
  const int trainers = job.Replicas(ReplicaType::kWorker) + job.Replicas(ReplicaType::kChief);
  if (trainers == 0) {
    return Bad("spec.replicaSpecs", "needs at least one Worker (or a Chief) replica");
  }
  // What the workers themselves would refuse at start, over and over (worker_config.cc).
  if (job.Replicas(ReplicaType::kPS) == 0 && trainers > 1) {
    return Bad("spec.replicaSpecs",
               absl::StrCat(trainers,
                            " Chief and Worker replicas need at least one PS replica to "
                            "share the model through (one Worker alone needs none)"));
  }
  if (job.Replicas(ReplicaType::kPS) == 0 && job.Replicas(ReplicaType::kEvaluator) > 0) {
    return Bad("spec.replicaSpecs",
               "an Evaluator evaluates what the PS replicas hold, and there is no PS replica");
  }
  ASSIGN_OR_RETURN(job.run_policy, ParseRunPolicy(spec["runPolicy"]));
  ASSIGN_OR_RETURN(job.network_policy, ParseNetworkPolicy(spec["networkPolicy"]));
  ASSIGN_OR_RETURN(job.shared_memory, ParseSharedMemory(spec["sharedMemory"]));
  if (const YAML::Node sp = spec["successPolicy"]) {
    ASSIGN_OR_RETURN(job.success_policy,
                     EnumValue<SuccessPolicy>(sp, "spec.successPolicy",
                                              {{"", SuccessPolicy::kChiefOrWorker0},
                                               {"ChiefOrWorker0", SuccessPolicy::kChiefOrWorker0},
                                               {"AllWorkers", SuccessPolicy::kAllWorkers}},
                                              SuccessPolicy::kChiefOrWorker0));
  }
  if (const YAML::Node model = spec["modelFile"]) {
    ASSIGN_OR_RETURN(job.model_file,
                     Scalar<std::string>(model, "spec.modelFile", "a string: a model file's text"));
    RETURN_IF_ERROR(CheckModelFile(job));
  }
  if (const YAML::Node tls = spec["tls"]) {
    if (!tls.IsMap()) return Bad("spec.tls", "must be an object");
    RETURN_IF_ERROR(CheckKnownFields(tls, "spec.tls", {"enabled"}));
    if (tls["enabled"]) {
      ASSIGN_OR_RETURN(job.tls, Scalar<bool>(tls["enabled"], "spec.tls.enabled", "a boolean"));
    }
  }
  return job;
}

}  // namespace

absl::string_view GangSchedulerName(GangScheduler gang) {
  switch (gang) {
    case GangScheduler::kNone:
      return "";
    case GangScheduler::kVolcano:
      return "volcano";
    case GangScheduler::kCoscheduling:
      return "coscheduling";
  }
  return "";
}

std::string SchedulingPolicy::SchedulerName() const {
  if (!scheduler_name.empty()) return scheduler_name;
  return gang == GangScheduler::kVolcano ? "volcano" : "scheduler-plugins-scheduler";
}

absl::string_view ReplicaTypeName(ReplicaType type) {
  switch (type) {
    case ReplicaType::kChief:
      return "Chief";
    case ReplicaType::kPS:
      return "PS";
    case ReplicaType::kWorker:
      return "Worker";
    case ReplicaType::kEvaluator:
      return "Evaluator";
  }
  return "?";
}

absl::string_view RestartPolicyName(RestartPolicy policy) {
  switch (policy) {
    case RestartPolicy::kNever:
      return "Never";
    case RestartPolicy::kOnFailure:
      return "OnFailure";
    case RestartPolicy::kAlways:
      return "Always";
    case RestartPolicy::kExitCode:
      return "ExitCode";
  }
  return "Never";
}

absl::string_view TaskTypeName(ReplicaType type) {
  switch (type) {
    case ReplicaType::kChief:
      return "chief";
    case ReplicaType::kPS:
      return "ps";
    case ReplicaType::kWorker:
      return "worker";
    case ReplicaType::kEvaluator:
      return "evaluator";
  }
  return "?";
}

const Container& ReplicaSpec::MainContainer() const {
  for (const auto& c : containers) {
    if (c.name == "psflow") return c;
  }
  return containers.front();
}

int ReplicaSpec::Port() const {
  for (const auto& p : MainContainer().ports) {
    if (p.name == kPortName) return p.container_port;
  }
  return kDefaultPort;
}

int MaxReplicas(ReplicaType type) {
  switch (type) {
    case ReplicaType::kChief:
      return 1;
    case ReplicaType::kPS:
      return 100;
    case ReplicaType::kWorker:
      return 1000;
    case ReplicaType::kEvaluator:
      return 10;
  }
  return 0;
}

int TrainingJob::Replicas(ReplicaType type) const {
  auto it = replica_specs.find(type);
  return it == replica_specs.end() ? 0 : it->second.replicas;
}

absl::StatusOr<TrainingJob> ParseTrainingJob(absl::string_view yaml, absl::string_view source) {
  YAML::Node doc;
  try {
    if (const int documents = DocumentsWithContent(yaml); documents > 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": holds ", documents, " YAML documents; give one TrainingJob per file"));
    }
    doc = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid YAML: ", models::DescribeYamlError(e), " (line ",
                     e.mark.line + 1, ")"));
  }
  try {
    auto job = Parse(doc);
    if (!job.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", job.status().message()));
    }
    return job;
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": malformed manifest: ", e.msg));
  }
}

absl::StatusOr<TrainingJob> LoadTrainingJob(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  return ParseTrainingJob(text, path);
}

}  // namespace psflow::api
