#include "operator/controller/reconciler.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/log.h"
#include "operator/api/cluster_spec_builder.h"
#include "operator/api/job_policy.h"
#include "operator/api/training_job.h"
#include "operator/controller/creation_plan.h"
#include "operator/controller/job_certificates.h"
#include "operator/controller/job_decision.h"
#include "operator/controller/job_model.h"
#include "operator/controller/job_status.h"
#include "operator/controller/network_policy.h"
#include "operator/controller/pod_group.h"
#include "operator/controller/pod_state.h"
#include "operator/controller/ps_restarts.h"
#include "operator/controller/replica_objects.h"
#include "operator/kube/api_status.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {

using api::ReplicaType;
using kube::Json;

namespace {

constexpr ReplicaType kTypes[] = {ReplicaType::kChief, ReplicaType::kPS, ReplicaType::kWorker,
                                  ReplicaType::kEvaluator};

std::optional<ReplicaType> TypeFromLabel(const std::string& task_type) {
  for (ReplicaType t : kTypes) {
    if (api::TaskTypeName(t) == task_type) return t;
  }
  return std::nullopt;
}

// The replica a pod or service stands for, from its labels; nullopt when they are not ours.
std::optional<std::pair<ReplicaType, int>> Slot(const Json& object) {
  std::optional<ReplicaType> type = TypeFromLabel(kube::Label(object, kReplicaTypeLabel));
  int index = -1;
  if (!type || !absl::SimpleAtoi(kube::Label(object, kReplicaIndexLabel), &index) || index < 0) {
    return std::nullopt;
  }
  return std::make_pair(*type, index);
}

ReplicaFailure FailureOf(const PodState& state, const std::string& pod, absl::Time now) {
  ReplicaFailure failure;
  // Within the CRD's limits (a status the schema refuses is not stored at all).
  failure.reason = state.reason.empty() ? "Unknown" : state.reason.substr(0, 256);
  failure.exit_code = state.exit_code;
  failure.message = state.message.substr(0, 4096);
  failure.pod = pod;
  failure.time = FormatTimestamp(now);
  return failure;
}

// Runs `tasks` on up to `max_parallel` threads; returns the first error, a refusal before any
// other (all tasks run).
absl::Status RunParallel(const std::vector<std::function<absl::Status()>>& tasks,
                         int max_parallel) {
  std::mutex mu;
  absl::Status first = absl::OkStatus();
  std::atomic<size_t> next{0};
  auto drain = [&] {
    for (size_t i = next++; i < tasks.size(); i = next++) {
      absl::Status s = tasks[i]();
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        // A refusal (INVALID_ARGUMENT) is terminal: it wins over errors a retry may cure.
        if (first.ok() || (s.code() == absl::StatusCode::kInvalidArgument &&
                           first.code() != absl::StatusCode::kInvalidArgument)) {
          first = std::move(s);
        }
      }
    }
  };
  const size_t threads = std::min<size_t>(tasks.size(), std::max(1, max_parallel));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(drain);
  drain();
  for (std::thread& t : pool) t.join();
  return first;
}

// Whether `pod`, index `index`'s, is the failed pod whose replacement `rs` already counts (its
// restarts folded into replaced_restarts: IndexStatus::replaced_pod_uid).
bool BeingReplaced(const ReplicaStatus& rs, int index, const Json& pod) {
  auto is = rs.indexes.find(index);
  return is != rs.indexes.end() && !is->second.replaced_pod_uid.empty() &&
         is->second.replaced_pod_uid == kube::Uid(pod);
}

// `value` without the empty objects, lists and nulls in it (at any depth), as the API server
// stores an object it was given: what it drops does not make a stored object differ.
Json WithoutEmpty(const Json& value) {
  if (value.is_object()) {
    Json out = Json::object();
    for (const auto& [key, field] : value.items()) {
      Json kept = WithoutEmpty(field);
      if (!kept.is_null() && !(kept.is_structured() && kept.empty())) out[key] = std::move(kept);
    }
    return out;
  }
  if (value.is_array()) {
    Json out = Json::array();
    for (const Json& item : value) out.push_back(WithoutEmpty(item));
    return out;
  }
  return value;
}

// How soon a job whose Service name another object holds is looked at again.
constexpr absl::Duration kNameTakenRecheck = absl::Seconds(10);

// "a, b, c" for up to 10 names, then "a, b, ... (1000 in all)": an Event stays small.
std::string Abbreviated(const std::vector<std::string>& names) {
  constexpr size_t kShown = 10;
  if (names.size() <= kShown) return absl::StrJoin(names, ", ");
  return absl::StrCat(absl::StrJoin(names.begin(), names.begin() + kShown, ", "), ", ... (",
                      names.size(), " in all)");
}

}  // namespace

// An event that is only true once the status saying the same is stored.
struct PendingEvent {
  EventType type;
  std::string reason;
  std::string message;
};

struct Reconciler::Pass {
  std::string ns;
  std::string name;
  std::string key;
  ObjectPtr object;
  std::string cached_version;  // resourceVersion of the job as the cache gave it
  api::TrainingJob job;
  JobStatus status;
  absl::Time now;
  // Owned pods by replica; pods of replicas the spec no longer has go to `extra_pods`.
  std::map<std::pair<ReplicaType, int>, ObjectPtr> pods;
  std::vector<ObjectPtr> extra_pods;
  std::vector<ObjectPtr> services;  // every Service the job owns
  bool has_job_service = false;     // among them the job's own (replica_objects.h)
  // Per-replica Services an older operator made, of replicas beyond the count: deleted.
  std::vector<ObjectPtr> extra_services;
  // Recorded by WriteStatus once it succeeds: a pass whose write fails (409) leaves the status
  // as it was, and the next pass finds the same news again.
  std::vector<PendingEvent> events_after_write;
  ReconcileResult result;
};

Reconciler::Reconciler(kube::KubeClient& client, const ClusterView& view,
                       Expectations& expectations, EventRecorder& events,
                       std::function<absl::Time()> now, ReconcilerOptions options)
    : client_(client),
      view_(view),
      expectations_(expectations),
      events_(events),
      now_(std::move(now)),
      options_(options) {}

ReconcileResult Reconciler::Reconcile(const std::string& ns, const std::string& name) {
  ReconcileResult result;
  try {
    result = ReconcileOnce(ns, name);
  } catch (const std::exception& e) {
    PSFLOW_LOG(ERROR) << "TrainingJob " << kube::Key(ns, name) << ": reconcile threw: " << e.what();
    ReportThrown(ns, name, e.what());
    result = {};
    result.status = absl::InternalError(absl::StrCat("reconcile threw: ", e.what()));
    return result;
  }
  if (result.status.ok()) {
    std::lock_guard<std::mutex> lock(written_mu_);
    thrown_.erase(kube::Key(ns, name));
  }
  return result;
}

void Reconciler::ReportThrown(const std::string& ns, const std::string& name,
                              const std::string& what) {
  const ObjectPtr job = view_.Job(ns, name);
  if (job == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(written_mu_);
    std::string& last = thrown_[kube::Key(ns, name)];
    if (last == what) return;
    last = what;
  }
  try {
    events_.Record(*job, EventType::kWarning, "ReconcileError",
                   absl::StrCat("the operator failed to reconcile this job (", what,
                                "); retrying with backoff"));
  } catch (const std::exception& e) {
    PSFLOW_LOG(ERROR) << "TrainingJob " << kube::Key(ns, name)
                      << ": the ReconcileError event could not be recorded: " << e.what();
  }
}

ReconcileResult Reconciler::ReconcileOnce(const std::string& ns, const std::string& name) {
  Pass pass;
  pass.ns = ns;
  pass.name = name;
  pass.key = kube::Key(ns, name);
  pass.object = view_.Job(ns, name);
  if (pass.object == nullptr) {
    ForgetJob(pass.key);
    return {};
  }
  const Json& object = *pass.object;
  if (!object.is_object() || kube::BeingDeleted(object)) return {};
  // Until the caches show what this operator did last, acting on them could undo it.
  if (!expectations_.Satisfied(pass.key) || CacheBehindOwnWrite(pass.key, object)) {
    pass.result.requeue_after = options_.expectations_recheck;
    return pass.result;
  }
  const std::string uid = kube::Uid(object);
  if (uid.empty()) {
    PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key << " has no metadata.uid: ignored";
    return {};
  }
  pass.now = now_();
  pass.cached_version = kube::ResourceVersion(object);
  pass.status = JobStatus::FromJson(object.contains("status") ? object["status"] : Json());
  pass.status.observed_generation = kube::Generation(object);
  if (options_.throughput) {
    if (std::optional<Throughput> rates = options_.throughput(pass.key)) {
      pass.status.words_per_second = rates->words_per_second;
      pass.status.examples_per_second = rates->examples_per_second;
    }
  }

  // The parser reads the manifest form: make sure apiVersion/kind/namespace are there.
  Json manifest = object;
  manifest["apiVersion"] = kube::TrainingJobs().ApiVersion();
  manifest["kind"] = kube::TrainingJobs().kind;
  if (manifest["metadata"].is_object()) manifest["metadata"]["namespace"] = ns;
  absl::StatusOr<api::TrainingJob> job =
      api::ParseTrainingJob(manifest.dump(), absl::StrCat("TrainingJob ", pass.key));
  if (!job.ok()) {
    if (!pass.status.Is(ConditionType::kFailed)) {
      const std::string message(job.status().message());
      PSFLOW_LOG(WARNING) << message;
      Fail(pass, "InvalidSpec", message);
      if (!WriteStatus(pass)) return pass.result;
    }
    // A running job edited into one psflow cannot run: stop what it had started.
    std::vector<ObjectPtr> active;
    for (const ObjectPtr& pod : view_.Pods(ns, name)) {
      const PodState state = ReadPodState(*pod);
      if (kube::ControllerUid(*pod) == uid && state.Active() && !state.being_deleted) {
        active.push_back(pod);
      }
    }
    if (!active.empty()) DeletePods(pass, active, "the spec cannot be run");
    return pass.result;
  }
  pass.job = *std::move(job);
  pass.status.worker_selector = WorkerSelector(name);

  for (const ObjectPtr& pod : view_.Pods(ns, name)) {
    if (kube::ControllerUid(*pod) != uid) continue;  // not this incarnation's
    auto slot = Slot(*pod);
    if (slot && slot->second < pass.job.Replicas(slot->first)) {
      pass.pods[*slot] = pod;
    } else {
      pass.extra_pods.push_back(pod);
    }
  }
  for (const ObjectPtr& service : view_.Services(ns, name)) {
    if (kube::ControllerUid(*service) != uid) continue;
    pass.services.push_back(service);
    if (kube::Name(*service) == JobServiceName(pass.job)) {
      pass.has_job_service = true;
    } else if (auto slot = Slot(*service); slot && slot->second >= pass.job.Replicas(slot->first)) {
      pass.extra_services.push_back(service);
    }
  }
  if (pass.status.Finished()) {
    Finish(pass);
  } else if (pass.job.run_policy.suspend) {
    Suspend(pass);
  } else {
    ReconcileActive(pass);
  }
  return pass.result;
}

void Reconciler::CountPods(Pass& pass) {
  int ready_workers = 0;
  pass.status.restart_count = 0;
  for (ReplicaType type : kTypes) {
    const int replicas = pass.job.Replicas(type);
    if (replicas == 0 && !pass.status.replica_statuses.count(type)) continue;
    ReplicaStatus& rs = pass.status.replica_statuses[type];
    rs.active = rs.ready = 0;
    // index -> the kubelet restarts of its live pod, and that pod
    std::map<int, std::pair<int, ObjectPtr>> live_restarts;
    const auto count_live = [&](int i, const ObjectPtr& pod, const PodState& state) {
      // A failed pod whose replacement is counted: its restarts are folded in already.
      if (state.restarts > 0 && !BeingReplaced(rs, i, *pod)) {
        live_restarts[i] = {state.restarts, pod};
      }
    };
    for (int i = 0; i < replicas; ++i) {
      auto it = pass.pods.find({type, i});
      if (it == pass.pods.end()) continue;
      const PodState state = ReadPodState(*it->second);
      if (state.being_deleted) continue;  // its restarts are folded in below
      count_live(i, it->second, state);
      if (!state.Active()) continue;
      ++rs.active;
      if (state.phase == PodPhase::kRunning && state.ready) ++rs.ready;
    }
    // A pod beyond the replica count still there (its delete not done, or failed): its restarts
    // stay live until it goes, so a scale back up before then does not count them twice.
    for (const ObjectPtr& pod : pass.extra_pods) {
      const auto slot = Slot(*pod);
      if (!slot || slot->first != type || slot->second < replicas) continue;
      const PodState state = ReadPodState(*pod);
      if (!state.being_deleted) count_live(slot->second, pod, state);
    }
    for (const auto& [i, live_pod] : live_restarts) {
      const auto& [live, pod] = live_pod;
      IndexStatus& is = rs.indexes[i];
      // Another pod than the one the last pass counted: that one is gone (replaced by someone
      // else between two passes), its restarts stay counted.
      const std::string uid = kube::Uid(*pod);
      if (!is.counted_pod_uid.empty() && is.counted_pod_uid != uid &&
          is.restarts > is.replaced_restarts) {
        is.replaced_restarts = is.restarts;
      }
      is.counted_pod_uid = uid;
      // The kubelet restarted the container in place since the last pass: say why, once.
      if (live > is.restarts - is.replaced_restarts) {
        const PodState state = ReadPodState(*pod);
        is.last_failure = FailureOf(state, kube::Name(*pod), pass.now);
        events_.Record(*pass.object, EventType::kWarning, "ReplicaRestartedInPlace",
                       absl::StrCat(ReplicaPodLabel(type, i, kube::Name(*pod)),
                                    " was restarted by the kubelet after ", state.DescribeEnd(),
                                    "; its restarts: ", is.replaced_restarts + live));
      }
    }
    rs.restarts = 0;
    for (auto& [i, is] : rs.indexes) {
      auto live = live_restarts.find(i);
      // The pod whose kubelet restarts the last pass counted is gone or going (deleted by
      // someone else, a drain, a scale-down's delete done): its restarts stay counted, as
      // those of a pod this operator deletes do (DeletePods).
      if (live == live_restarts.end()) {
        is.replaced_restarts = std::max(is.replaced_restarts, is.restarts);
        is.counted_pod_uid.clear();
      }
      is.restarts = is.replaced_restarts + (live == live_restarts.end() ? 0 : live->second.first);
      rs.restarts += is.restarts;
    }
    rs.succeeded = static_cast<int>(rs.completed_indexes.size());
    pass.status.restart_count += rs.restarts;
    if (type == ReplicaType::kWorker) ready_workers = rs.ready;
  }
  pass.status.workers = absl::StrCat(ready_workers, "/", pass.job.Replicas(ReplicaType::kWorker));
}

void Reconciler::Fail(Pass& pass, const std::string& reason, const std::string& message) {
  pass.status.SetCondition(ConditionType::kFailed, true, reason, message, pass.now);
  if (pass.status.completion_time.empty()) pass.status.completion_time = FormatTimestamp(pass.now);
  events_.Record(*pass.object, EventType::kWarning, reason, message);
}

JobObservation Reconciler::Observe(const Pass& pass) const {
  JobObservation observed;
  observed.now = pass.now;
  observed.start = ParseTimestamp(pass.status.start_time);
  // Queued until now: were its gates gone, this pass is the admission (while they are not, no
  // clock runs). Else the latest admission is when Queued turned False, reason Admitted (not
  // when a suspension or the end cleared it).
  if (const Condition* queued = pass.status.Find(ConditionType::kQueued); queued != nullptr) {
    if (queued->status) {
      observed.admitted = pass.now;
    } else if (queued->reason == "Admitted") {
      observed.admitted = ParseTimestamp(queued->last_transition_time);
    }
  }
  observed.has_service = pass.has_job_service;
  for (const auto& [type, spec] : pass.job.replica_specs) {
    for (int i = 0; i < spec.replicas; ++i) {
      SlotObservation& slot = observed.slots.emplace_back();
      slot.type = type;
      slot.index = i;
      if (auto it = pass.pods.find({type, i}); it != pass.pods.end()) {
        slot.pod = ReadPodState(*it->second);
        slot.pod_name = kube::Name(*it->second);
        slot.pod_uid = kube::Uid(*it->second);
      }
    }
  }
  return observed;
}

void Reconciler::ReconcileActive(Pass& pass) {
  JobStatus& status = pass.status;
  const api::TrainingJob& job = pass.job;
  if (status.Is(ConditionType::kSuspended)) {
    status.SetCondition(ConditionType::kSuspended, false, "Resumed", "TrainingJob resumed",
                        pass.now);
    events_.Record(*pass.object, EventType::kNormal, "Resumed", "TrainingJob resumed");
  }
  if (ParseTimestamp(status.start_time) == absl::InfinitePast()) {
    status.start_time = FormatTimestamp(pass.now);  // unset, or not a time: from now
  }
  TrackPs(pass);

  const Decision decision = Decide(job, pass.key, status, Observe(pass));
  pass.result.requeue_after = decision.requeue_after;
  for (const ReplicaSlot& slot : decision.completed) {
    status.replica_statuses[slot.first].completed_indexes.insert(slot.second);
  }
  // Suspended: what completed stays completed; pods that failed are judged on resume (they stay).
  if (decision.suspend) return SuspendOnTimeout(pass, *decision.suspend);
  for (const EndedPod& e : decision.ended_badly) {
    ReplicaStatus& rs = status.replica_statuses[e.slot.first];
    ++rs.failed;
    rs.indexes[e.slot.second].last_failure = FailureOf(e.state, e.pod_name, pass.now);
  }
  for (const EndedPod& e : decision.left_ended) {
    events_.Record(*pass.object, EventType::kWarning, "EvaluatorFailed",
                   absl::StrCat(e.Label(), " failed: ", e.state.DescribeEnd(),
                                "; not restarted, the job goes on without it"));
  }

  if (decision.failure || decision.success) {
    if (decision.failure) {
      Fail(pass, decision.failure->first, decision.failure->second);
    } else {
      status.SetCondition(ConditionType::kSucceeded, true, "TrainingJobSucceeded",
                          absl::StrCat("TrainingJob ", pass.key, " succeeded: ", *decision.success),
                          pass.now);
      if (status.completion_time.empty()) status.completion_time = FormatTimestamp(pass.now);
      events_.Record(*pass.object, EventType::kNormal, "TrainingJobSucceeded", *decision.success);
    }
    // The outcome is written before any pod is touched, so it survives whatever comes next.
    CountPods(pass);
    if (WriteStatus(pass)) Finish(pass);
    return;
  }

  // Replace failed pods (re-created on a later pass, once the deletion is seen). A restart goes
  // into the status before its pod is deleted, as the outcome does: its count, the kubelet's
  // restarts of that pod and the pod's uid (IndexStatus::replaced_pod_uid), in one write, and the
  // pods go only once it is stored. A pass whose write fails (a second 409) has deleted nothing and
  // the next one finds the same failures; a pod whose delete fails after the write is deleted again
  // by a later pass without being counted again (Decision::replacing).
  if (!decision.restarts.empty()) {
    for (const EndedPod& r : decision.restarts) {
      IndexStatus& is = status.replica_statuses[r.slot.first].indexes[r.slot.second];
      is.replaced_pod_uid = kube::Uid(*pass.pods.at(r.slot));
      // The kubelet's in-place restarts of the pod stay counted; its replacement only when the
      // failure counts (not a disruption, not a rule's Ignore).
      is.replaced_restarts += (r.counted ? 1 : 0) + r.state.restarts;
      const std::string message =
          absl::StrCat(r.Label(), " failed: ", r.state.DescribeEnd(), "; restarting it",
                       r.why.empty() ? "" : absl::StrCat(" (", r.why, ")"));
      pass.events_after_write.push_back({EventType::kWarning, "RestartingReplica", message});
      status.SetCondition(ConditionType::kRestarting, true, "ReplicaRestarting", message, pass.now);
    }
    CountPods(pass);
    if (!WriteStatus(pass)) return;
    pass.result.restarts += static_cast<int>(decision.restarts.size());
  }
  std::vector<ObjectPtr> delete_pods = pass.extra_pods;
  for (const std::vector<EndedPod>* replaced : {&decision.restarts, &decision.replacing}) {
    for (const EndedPod& r : *replaced) delete_pods.push_back(pass.pods.at(r.slot));
  }
  if (!delete_pods.empty()) {
    const std::set<std::string> deleted =
        DeletePods(pass, delete_pods, "replaced or beyond the replica count");
    // Told once, by the pass that deleted the pod (a failed delete is retried, not told again).
    for (const EndedPod& r : decision.replacing) {
      if (r.state.stale_status.empty() || !deleted.contains(r.pod_name)) continue;
      const std::string message =
          absl::StrCat(r.Label(), ": ", r.state.stale_status, "; deleted to be made again");
      PSFLOW_LOG(WARNING) << pass.key << ": " << message;
      events_.Record(*pass.object, EventType::kWarning, "StaleStatus", message);
    }
  }
  absl::Status service_delete_error;  // reported after the creates, which judge their own errors
  for (const ObjectPtr& service : pass.extra_services) {
    absl::Status s = client_.Delete(kube::Services(), pass.ns, kube::Name(*service),
                                    {kube::Propagation::kBackground, kube::Uid(*service), -1});
    if (s.ok()) {
      ++pass.result.services_deleted;
    } else if (s.code() != absl::StatusCode::kNotFound) {
      PSFLOW_LOG(WARNING) << "deleting service " << pass.ns << "/" << kube::Name(*service) << ": "
                          << s.message();
      if (service_delete_error.ok()) service_delete_error = s;
    }
  }
  if (!decision.create_pods.empty() || decision.create_service) {
    CreateAll(pass, decision.create_pods, decision.create_service);
    if (pass.result.status.code() == absl::StatusCode::kInvalidArgument) {
      // The API server refused what the job's template makes: retrying cannot help.
      Fail(pass, "InvalidPodTemplate",
           absl::StrCat("TrainingJob ", pass.key,
                        ": the API server refused a replica: ", pass.result.status.message()));
      pass.result.status = absl::OkStatus();
      CountPods(pass);
      if (WriteStatus(pass)) Finish(pass);
      return;
    }
    if (!pass.result.status.ok()) {
      CountPods(pass);
      WriteStatus(pass);
      return;
    }
  }
  // Reported, so the job is queued again (with backoff) and the delete retried.
  if (pass.result.status.ok()) pass.result.status = service_delete_error;

  // Conditions.
  const int total = [&] {
    int n = 0;
    for (const auto& [type, spec] : job.replica_specs) n += spec.replicas;
    return n;
  }();
  if (!status.Find(ConditionType::kCreated) && pass.result.pods_created > 0) {
    status.SetCondition(ConditionType::kCreated, true, "TrainingJobCreated",
                        absl::StrCat("TrainingJob ", pass.key, " created its ", total, " replicas"),
                        pass.now);
  }
  // Pods the scheduler cannot place: the Unschedulable condition, True with its word while any
  // is, and a Warning event each time that word changes; False once every pod is placed.
  if (!decision.unschedulable.empty()) {
    std::string message = decision.unschedulable.front().second;
    if (decision.unschedulable.size() > 1) {
      absl::StrAppend(&message, " (and ", decision.unschedulable.size() - 1, " more pods)");
    }
    const Condition* now_said = status.Find(ConditionType::kUnschedulable);
    if (now_said == nullptr || !now_said->status || now_said->message != message) {
      pass.events_after_write.push_back({EventType::kWarning, "Unschedulable", message});
    }
    status.SetCondition(ConditionType::kUnschedulable, true, "Unschedulable", message, pass.now);
  } else if (status.Is(ConditionType::kUnschedulable)) {
    status.SetCondition(ConditionType::kUnschedulable, false, "Scheduled", "every pod is scheduled",
                        pass.now);
  }
  // A job whose every pod a queue holds back: Queued, True (a Normal event) while it waits, False
  // once a pod is let go: the queue admitted the job (a Normal event; its clocks count from then).
  if (!decision.queued.empty()) {
    std::string message = decision.queued.front().second;
    if (decision.queued.size() > 1) {
      absl::StrAppend(&message, " (and ", decision.queued.size() - 1, " more pods)");
    }
    if (!status.Is(ConditionType::kQueued)) {
      pass.events_after_write.push_back({EventType::kNormal, "Queued", message});
    }
    status.SetCondition(ConditionType::kQueued, true, "SchedulingGated", message, pass.now);
  } else if (status.Is(ConditionType::kQueued) && decision.pod_ungated) {
    // A pod that may run has no gate: the queue let the job go (no pods at all, e.g. all deleted,
    // says nothing yet).
    const std::string message = "its pods' scheduling gates are gone: admitted by its queue";
    pass.events_after_write.push_back({EventType::kNormal, "Admitted", message});
    status.SetCondition(ConditionType::kQueued, false, "Admitted", message, pass.now);
  }
  if (decision.all_running && decision.restarts.empty() && pass.result.pods_created == 0) {
    const bool first_time = !status.Find(ConditionType::kRunning);
    status.SetCondition(ConditionType::kRunning, true, "TrainingJobRunning",
                        absl::StrCat("all ", total, " replicas are running"), pass.now);
    const absl::Time created =
        ParseTimestamp(kube::StringAt(*pass.object, "metadata", "creationTimestamp"));
    if (first_time && created != absl::InfinitePast()) {
      pass.result.time_to_running = pass.now - created;
    }
  }
  CountPods(pass);
  WriteStatus(pass);
}

void Reconciler::Suspend(Pass& pass,
                         const std::optional<std::pair<std::string, std::string>>& why) {
  std::vector<ObjectPtr> active = pass.extra_pods;
  for (const auto& [slot, pod] : pass.pods) {
    const PodState state = ReadPodState(*pod);
    if (state.Active() && !state.being_deleted) active.push_back(pod);
  }
  if (!active.empty()) DeletePods(pass, active, "suspended");
  if (!pass.status.Is(ConditionType::kSuspended)) {
    if (why) {  // the caller told it (SuspendOnTimeout)
      pass.status.SetCondition(ConditionType::kSuspended, true, why->first, why->second, pass.now);
    } else {
      pass.status.SetCondition(ConditionType::kSuspended, true, "Suspended",
                               absl::StrCat("TrainingJob ", pass.key, " is suspended"), pass.now);
      pass.events_after_write.push_back(
          {EventType::kNormal, "Suspended",
           absl::StrCat("suspended: ", active.size(), " pods deleted")});
    }
  }
  // activeDeadlineSeconds restarts from the resume.
  pass.status.start_time.clear();
  CountPods(pass);
  WriteStatus(pass);
}

void Reconciler::SuspendOnTimeout(Pass& pass, const std::pair<std::string, std::string>& why) {
  Json updated = *pass.object;
  updated["spec"]["runPolicy"]["suspend"] = true;  // the parser took runPolicy as an object
  absl::StatusOr<Json> written = client_.Update(kube::TrainingJobs(), pass.ns, updated);
  if (!written.ok() && written.status().code() == absl::StatusCode::kNotFound) return;  // gone
  if (!written.ok() && written.status().code() == absl::StatusCode::kPermissionDenied) {
    // An RBAC older than this operator (no update on trainingjobs): the job fails, as before.
    Fail(pass, "Unschedulable",
         absl::StrCat(why.second,
                      "; not suspended: the operator may not set "
                      "spec.runPolicy.suspend (its RBAC lacks update on trainingjobs)"));
    CountPods(pass);
    if (WriteStatus(pass)) Finish(pass);
    return;
  }
  if (!written.ok()) {
    // A conflict (someone edited the job) is retried with a fresh cache, as are other errors.
    if (!kube::IsConflict(written.status())) {
      PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key
                          << ": spec.runPolicy.suspend not set: " << written.status().message();
    }
    pass.result.status = written.status();
    return;
  }
  // Told now, as the spec that says it is stored (the status write below may fail; the next pass
  // then suspends it as any suspended job).
  const std::string told = absl::StrCat(why.second, "; suspending it (spec.runPolicy.suspend set)");
  PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key << ": " << told;
  events_.Record(*written, EventType::kWarning, why.first, told);
  pass.object = std::make_shared<const Json>(*std::move(written));
  pass.status.observed_generation = kube::Generation(*pass.object);
  // A cache still at the version the pass read is behind; the status written next goes onto the
  // one the update made (and once written, WriteStatus awaits that one too).
  if (kube::ResourceVersion(*pass.object) != pass.cached_version) {
    AwaitCachePast(pass.key, {pass.cached_version});
  }
  pass.cached_version = kube::ResourceVersion(*pass.object);
  Suspend(pass, std::make_pair(why.first, absl::StrCat(why.second, "; suspended until resumed")));
}

void Reconciler::Finish(Pass& pass) {
  const api::TrainingJob& job = pass.job;
  const bool succeeded = pass.status.Is(ConditionType::kSucceeded);
  const api::CleanPodPolicy policy = job.run_policy.clean_pod_policy;
  if (ParseTimestamp(pass.status.completion_time) == absl::InfinitePast()) {
    pass.status.completion_time = FormatTimestamp(pass.now);  // unset or not a time: from now
  }
  // Trainers that finished after the outcome completed too. Those still running when the job
  // succeeded get the finish grace to end their steps and write their logs: every pod and Service
  // (the ps they push to, the names they resolve) stays until they have ended or the grace has
  // passed (as `psflow run` does, api::FinishGrace).
  bool trainer_running = false;
  for (const auto& [slot, pod] : pass.pods) {
    if (!api::IsTrainer(slot.first)) continue;
    const PodState state = ReadPodState(*pod);
    if (state.phase == PodPhase::kSucceeded) {
      pass.status.replica_statuses[slot.first].completed_indexes.insert(slot.second);
    }
    trainer_running = trainer_running || (!state.being_deleted && state.Active());
  }
  const absl::Time grace_end = ParseTimestamp(pass.status.completion_time) + api::FinishGrace(job);
  if (succeeded && trainer_running && pass.now < grace_end) {
    CountPods(pass);
    if (!WriteStatus(pass)) return;
    pass.result.requeue_after = grace_end - pass.now;
    return;
  }
  std::vector<ObjectPtr> doomed = pass.extra_pods;
  for (const auto& [slot, pod] : pass.pods) {
    const PodState state = ReadPodState(*pod);
    if (state.being_deleted) continue;
    const bool stop_ps = succeeded && slot.first == ReplicaType::kPS && state.Active();
    if (policy == api::CleanPodPolicy::kAll ||
        (policy == api::CleanPodPolicy::kRunning && state.Active()) || stop_ps) {
      doomed.push_back(pod);
    }
  }
  if (!doomed.empty()) DeletePods(pass, doomed, "TrainingJob finished");
  if (policy != api::CleanPodPolicy::kNone) {
    for (const ObjectPtr& service : pass.services) {
      if (kube::BeingDeleted(*service)) continue;
      absl::Status s = client_.Delete(kube::Services(), pass.ns, kube::Name(*service),
                                      {kube::Propagation::kBackground, kube::Uid(*service), -1});
      if (s.ok() || s.code() == absl::StatusCode::kNotFound) {
        ++pass.result.services_deleted;
        continue;
      }
      PSFLOW_LOG(WARNING) << "deleting service " << pass.ns << "/" << kube::Name(*service) << ": "
                          << s.message();
      if (pass.result.status.ok()) pass.result.status = s;
    }
  }
  CountPods(pass);
  if (!WriteStatus(pass)) return;

  if (job.run_policy.ttl_seconds_after_finished) {
    const absl::Time expire = ParseTimestamp(pass.status.completion_time) +
                              absl::Seconds(*job.run_policy.ttl_seconds_after_finished);
    if (pass.now >= expire) {
      absl::Status s =
          client_.Delete(kube::TrainingJobs(), pass.ns, pass.name,
                         {kube::Propagation::kBackground, kube::Uid(*pass.object), -1});
      if (s.ok() || s.code() == absl::StatusCode::kNotFound) {
        PSFLOW_LOG(INFO) << "TrainingJob " << pass.key
                         << " deleted: ttlSecondsAfterFinished passed";
        pass.result.job_deleted = true;
        ForgetJob(pass.key);
      } else {
        PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key
                            << ": not deleted after ttlSecondsAfterFinished: " << s.message();
        if (pass.result.status.ok()) pass.result.status = s;
      }
    } else {
      pass.result.requeue_after = expire - pass.now;
    }
  }
}

std::set<std::string> Reconciler::DeletePods(Pass& pass, const std::vector<ObjectPtr>& all,
                                             const std::string& why) {
  // A pod already going (deletionTimestamp set) is left alone: its deletion was observed
  // (Expectations::PodTerminating), and deleting it again would wait for an observation that
  // never comes.
  std::vector<ObjectPtr> pods;
  for (const ObjectPtr& pod : all) {
    if (!kube::BeingDeleted(*pod)) pods.push_back(pod);
  }
  if (pods.empty()) return {};
  expectations_.Expect(pass.key, 0, static_cast<int>(pods.size()));
  std::vector<std::string> names;
  for (const ObjectPtr& pod : pods) {
    const std::string name = kube::Name(*pod);
    absl::Status s = client_.Delete(kube::Pods(), pass.ns, name,
                                    {kube::Propagation::kBackground, kube::Uid(*pod), -1});
    if (s.ok()) {
      ++pass.result.pods_deleted;
      names.push_back(name);
      // The kubelet's restarts of a pod that goes are kept in the status from now on.
      if (auto slot = Slot(*pod)) {
        auto it = pass.pods.find(*slot);
        if (it != pass.pods.end() && it->second == pod) {
          const int restarts = ReadPodState(*pod).restarts;
          const ReplicaStatus& rs = pass.status.replica_statuses[slot->first];
          if (restarts > 0 && !BeingReplaced(rs, slot->second, *pod)) {
            pass.status.replica_statuses[slot->first].indexes[slot->second].replaced_restarts +=
                restarts;
          }
          pass.pods.erase(it);
        }
      }
      continue;
    }
    // Not going to be observed: do not wait for it.
    expectations_.DeletionObserved(pass.key);
    if (s.code() == absl::StatusCode::kNotFound) continue;  // already gone
    PSFLOW_LOG(WARNING) << "deleting pod " << pass.ns << "/" << name << ": " << s.message();
    if (pass.result.status.ok()) pass.result.status = s;
  }
  if (!names.empty()) {
    events_.Record(*pass.object, EventType::kNormal, "SuccessfulDeletePod",
                   absl::StrCat("Deleted pods (", why, "): ", absl::StrJoin(names, ", ")));
  }
  return std::set<std::string>(names.begin(), names.end());
}

// What the one SuccessfulCreate event of a pass names.
struct Reconciler::Made {
  std::vector<std::string> objects;  // "Service j", "Secret j-tls", ...
  std::vector<std::string> updated;  // "Secret j-tls (the new replicas' certificates)"
  std::vector<std::string> pods;
};

void Reconciler::CreateAll(Pass& pass, const std::vector<ReplicaSlot>& pods, bool service) {
  const CreationPlan plan = PlanCreation(
      pass.job, service, pods, static_cast<size_t>(std::max(1, options_.max_creates_per_pass)));
  if (plan.more_pods) pass.result.requeue_after = absl::ZeroDuration();
  if (options_.stopping && options_.stopping()) return;
  Made made;
  bool ready = true;
  for (JobObject object : plan.before_pods) {
    ready = Make(pass, object, made);
    if (!ready) break;
  }
  if (ready && !plan.pods.empty()) MakePods(pass, plan, made);
  ReportMade(pass, made);
}

bool Reconciler::Make(Pass& pass, JobObject object, Made& made) {
  switch (object) {
    case JobObject::kService:
      return MakeService(pass, made);
    case JobObject::kNetworkPolicy:
      return MakeNetworkPolicy(pass, made);
    case JobObject::kPodGroup:
      return MakePodGroup(pass, made);
    case JobObject::kTlsSecrets:
      return MakeTlsSecrets(pass, made);
    case JobObject::kTlsDisabled:
      events_.Record(*pass.object, EventType::kWarning, "TLSDisabled",
                     "spec.tls.enabled is false: the replicas talk to the ps tasks in plaintext, "
                     "unauthenticated");
      return true;
    case JobObject::kModelConfigMap:
      if (absl::Status s = EnsureModelConfigMap(client_, *pass.object, pass.job); !s.ok()) {
        return CreationFailed(pass, "model ConfigMap", s);
      }
      return true;
  }
  return false;
}

bool Reconciler::CreationFailed(Pass& pass, const std::string& what, const absl::Status& s,
                                bool told) {
  const std::string message =
      what.empty() ? std::string(s.message()) : absl::StrCat(what, ": ", s.message());
  PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key << ": " << message;
  // As the Job controller tells it (a quota, a LimitRange or Pod Security refusing a pod, the
  // API server failing); the pass is retried with backoff, the repeats counted on one Event. Not
  // for a conflict (someone wrote first: the next pass, at once, reads it again) nor in a
  // namespace being deleted (the Job controller skips that too).
  if (!told && !kube::IsConflict(s) && !kube::IsNamespaceTerminating(s)) {
    events_.Record(
        *pass.object, EventType::kWarning, "FailedCreate",
        absl::StrCat("Error creating", what.empty() ? "" : " ", what, ": ", s.message()));
  }
  if (pass.result.status.ok()) pass.result.status = absl::Status(s.code(), message);
  return false;
}

void Reconciler::ReportMade(Pass& pass, Made& made) {
  std::sort(made.pods.begin(), made.pods.end());
  if (!made.pods.empty()) made.objects.push_back("pods " + Abbreviated(made.pods));
  if (made.objects.empty() && made.updated.empty()) return;
  std::string message =
      made.objects.empty() ? "" : absl::StrCat("Created ", absl::StrJoin(made.objects, ", "));
  if (!made.updated.empty()) {
    absl::StrAppend(&message, made.objects.empty() ? "Updated " : "; updated ",
                    absl::StrJoin(made.updated, ", "));
  }
  events_.Record(*pass.object, EventType::kNormal, "SuccessfulCreate", message);
}

bool Reconciler::MakeService(Pass& pass, Made& made) {
  const Json object = BuildService(*pass.object, pass.job);
  absl::StatusOr<Json> out = client_.Create(kube::Services(), pass.ns, object);
  if (out.ok()) {
    ++pass.result.services_created;
    made.objects.push_back("Service " + kube::Name(object));
    return true;
  }
  if (out.status().code() != absl::StatusCode::kAlreadyExists) {
    return CreationFailed(pass, "Service", out.status());
  }
  // A Service of that name the cache does not show as the job's is either behind (ours: fine) or
  // someone else's (no DNS for the pods: wait).
  absl::StatusOr<Json> stored = client_.Get(kube::Services(), pass.ns, kube::Name(object));
  if (stored.ok() && kube::ControllerUid(*stored) != kube::Uid(*pass.object)) {
    const std::string message =
        absl::StrCat("Service ", pass.ns, "/", kube::Name(object),
                     " exists but is not this TrainingJob's: its pods need that name for "
                     "their DNS names; waiting for it to go");
    events_.Record(*pass.object, EventType::kWarning, "ServiceNameTaken", message);
    // Not watched (it lacks the job's label): looked at again soon, not after a backoff.
    PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key << ": " << message;
    if (!pass.result.requeue_after || *pass.result.requeue_after > kNameTakenRecheck) {
      pass.result.requeue_after = kNameTakenRecheck;
    }
    return false;
  }
  if (!stored.ok() && stored.status().code() != absl::StatusCode::kNotFound) {
    return CreationFailed(pass, "Service", stored.status());
  }
  return true;
}

bool Reconciler::MakeNetworkPolicy(Pass& pass, Made& made) {
  const Json policy = BuildNetworkPolicy(*pass.object, pass.job);
  const std::string what = "NetworkPolicy " + kube::Name(policy);
  absl::StatusOr<Json> out = client_.Create(kube::NetworkPolicies(), pass.ns, policy);
  if (out.ok()) {
    made.objects.push_back(what);
    return true;
  }
  if (out.status().code() != absl::StatusCode::kAlreadyExists) {
    return CreationFailed(pass, what, out.status());
  }
  // The job's own (made by an earlier pass) is brought up to the spec, so an edit of
  // spec.networkPolicy takes effect with the next pods made; another's is not taken as it.
  absl::StatusOr<Json> stored = client_.Get(kube::NetworkPolicies(), pass.ns, kube::Name(policy));
  if (!stored.ok()) return CreationFailed(pass, what, stored.status());
  if (kube::ControllerUid(*stored) != kube::Uid(*pass.object)) {
    return CreationFailed(
        pass, what,
        absl::UnavailableError(absl::StrCat("exists but is not owned by TrainingJob ", pass.key,
                                            " (left by an earlier job of that name?); waiting for "
                                            "it to go")));
  }
  if (WithoutEmpty((*stored)["spec"]) == WithoutEmpty(policy["spec"])) return true;
  (*stored)["spec"] = policy["spec"];
  absl::StatusOr<Json> updated = client_.Update(kube::NetworkPolicies(), pass.ns, *stored);
  if (!updated.ok()) return CreationFailed(pass, what, updated.status());
  made.updated.push_back(what + " (to the spec's networkPolicy)");
  return true;
}

bool Reconciler::MakePodGroup(Pass& pass, Made& made) {
  absl::StatusOr<Json> group = BuildPodGroup(*pass.object, pass.job);
  if (!group.ok()) return CreationFailed(pass, "PodGroup", group.status());
  const std::string name = kube::Name(*group);
  const bool volcano = pass.job.run_policy.scheduling.gang == api::GangScheduler::kVolcano;
  // Each call names its resource: tests/install/check_rbac.py reads the operator's API calls
  // (and so the RBAC it needs) from its source.
  absl::StatusOr<Json> out = volcano
                                 ? client_.Create(kube::VolcanoPodGroups(), pass.ns, *group)
                                 : client_.Create(kube::CoschedulingPodGroups(), pass.ns, *group);
  if (out.ok()) {
    made.objects.push_back("PodGroup " + name);
    return true;
  }
  if (out.status().code() == absl::StatusCode::kNotFound) {
    const kube::Resource& r = volcano ? kube::VolcanoPodGroups() : kube::CoschedulingPodGroups();
    const std::string message = absl::StrCat(
        "spec.runPolicy.schedulingPolicy.gang ",
        api::GangSchedulerName(pass.job.run_policy.scheduling.gang),
        " needs the PodGroup resource ", r.QualifiedName(), "/", r.version,
        ", which this cluster does not serve (is ", volcano ? "Volcano" : "scheduler-plugins",
        " installed?); no pod is made until it is");
    events_.Record(*pass.object, EventType::kWarning, "GangSchedulerMissing", message);
    return CreationFailed(pass, "PodGroup", absl::UnavailableError(message), /*told=*/true);
  }
  if (out.status().code() != absl::StatusCode::kAlreadyExists) {
    return CreationFailed(pass, "PodGroup " + name, out.status());
  }
  // Made by an earlier pass, for the replica counts then. A scale changes them, and a gang that
  // waits for more members than the job has would never place the pods made now (a replacement
  // after a scale-down): the fields the operator sets follow the spec; others (a scheduler's
  // defaults) stay.
  absl::StatusOr<Json> stored = volcano ? client_.Get(kube::VolcanoPodGroups(), pass.ns, name)
                                        : client_.Get(kube::CoschedulingPodGroups(), pass.ns, name);
  // A PodGroup that cannot be read or updated (an RBAC older than this operator, a 409 from the
  // scheduler's own writes) holds no pod back: it is there, as before.
  const auto kept = [&](const absl::Status& s) {
    PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key << ": PodGroup " << name
                        << " not brought up to the spec: " << s.message();
    return true;
  };
  if (!stored.ok()) return kept(stored.status());
  if (kube::ControllerUid(*stored) != kube::Uid(*pass.object)) return true;  // not the job's
  Json updated = *stored;
  bool changed = !updated["spec"].is_object();
  if (changed) updated["spec"] = Json::object();
  for (const auto& [key, value] : (*group)["spec"].items()) {
    if (updated["spec"].contains(key) && updated["spec"][key] == value) continue;
    updated["spec"][key] = value;
    changed = true;
  }
  if (!changed) return true;
  absl::StatusOr<Json> written =
      volcano ? client_.Update(kube::VolcanoPodGroups(), pass.ns, updated)
              : client_.Update(kube::CoschedulingPodGroups(), pass.ns, updated);
  if (!written.ok()) return kept(written.status());
  made.updated.push_back("PodGroup " + name + " (the replica counts now)");
  return true;
}

bool Reconciler::MakeTlsSecrets(Pass& pass, Made& made) {
  // The job's Secrets hold the CA and every replica's certificate, so a restart or a later pass
  // finds its own there already.
  std::vector<ReplicaSlot> replicas;
  for (const auto& [type, spec] : pass.job.replica_specs) {
    for (int i = 0; i < spec.replicas; ++i) replicas.push_back({type, i});
  }
  const bool fresh = pass.pods.empty() && pass.extra_pods.empty();
  absl::StatusOr<SecretsWritten> written =
      EnsureJobCertificates(client_, *pass.object, pass.job, replicas, fresh, pass.now);
  if (!written.ok()) return CreationFailed(pass, "TLS Secrets", written.status());
  for (const std::string& name : written->created) made.objects.push_back("Secret " + name);
  for (const std::string& name : written->updated) {
    made.updated.push_back("Secret " + name + " (the new replicas' certificates)");
  }
  return true;
}

void Reconciler::MakePods(Pass& pass, const CreationPlan& plan, Made& made) {
  expectations_.Expect(pass.key, static_cast<int>(plan.pods.size()), 0);
  std::mutex mu;
  std::vector<std::string> taken;  // guarded by mu: names another object holds
  // Each pod is built when its turn comes: a large job never holds every pod at once.
  const auto make = [&](const ReplicaSlot& slot) -> absl::Status {
    const Json pod =
        BuildPod(*pass.object, pass.job, slot.first, slot.second, options_.shared_memory_dir);
    absl::StatusOr<Json> out = client_.Create(kube::Pods(), pass.ns, pod);
    if (out.ok()) {
      std::lock_guard<std::mutex> lock(mu);
      made.pods.push_back(kube::Name(pod));
      // Counted as they are now (Pending), so the status written after is already right.
      if (auto made_slot = Slot(*out)) {
        pass.pods[*made_slot] = std::make_shared<const Json>(*std::move(out));
      }
      return absl::OkStatus();
    }
    expectations_.CreationObserved(pass.key);  // nothing new will be observed
    if (out.status().code() != absl::StatusCode::kAlreadyExists) return out.status();
    // A pod of that name the cache does not show: ours (the cache is behind: fine), or another
    // object's, which the job's label does not make us watch; told and looked at again soon.
    absl::StatusOr<Json> stored = client_.Get(kube::Pods(), pass.ns, kube::Name(pod));
    if (stored.ok() && kube::ControllerUid(*stored) != kube::Uid(*pass.object)) {
      std::lock_guard<std::mutex> lock(mu);
      // One going (an earlier job of this name's, say) is only waited for: its deletion
      // queues the job again if it carries the job's label; a recheck soon if not.
      if (!kube::BeingDeleted(*stored)) taken.push_back(kube::Name(pod));
      if (!pass.result.requeue_after || *pass.result.requeue_after > kNameTakenRecheck) {
        pass.result.requeue_after = kNameTakenRecheck;
      }
      return absl::OkStatus();
    }
    return stored.ok() || absl::IsNotFound(stored.status()) ? absl::OkStatus() : stored.status();
  };
  // A batch with an error ends the pass, as does the controller stopping.
  absl::Status s = absl::OkStatus();
  size_t next = 0;
  for (size_t batch : plan.batches) {
    if (!s.ok() || (options_.stopping && options_.stopping())) break;
    std::vector<std::function<absl::Status()>> tasks;
    for (size_t n = next; n < next + batch; ++n) {
      tasks.push_back([&make, slot = plan.pods[n]] { return make(slot); });
    }
    s = RunParallel(tasks, options_.max_parallel_creates);
    next += batch;
  }
  for (size_t n = next; n < plan.pods.size(); ++n) {
    expectations_.CreationObserved(pass.key);  // a pod never attempted will not be observed
  }
  pass.result.pods_created = static_cast<int>(made.pods.size());
  if (!taken.empty()) {
    std::sort(taken.begin(), taken.end());
    const std::string message = absl::StrCat(
        "pods ", Abbreviated(taken), " exist in ", pass.ns,
        " but are not this TrainingJob's: its replicas need those names; waiting for them to go");
    events_.Record(*pass.object, EventType::kWarning, "PodNameTaken", message);
    PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key << ": " << message;
  }
  if (!s.ok()) CreationFailed(pass, "", s);
}

void Reconciler::TrackPs(Pass& pass) {
  const int replicas = pass.job.Replicas(ReplicaType::kPS);
  auto rs = pass.status.replica_statuses.find(ReplicaType::kPS);
  if (replicas == 0 && rs == pass.status.replica_statuses.end()) return;
  std::map<int, const Json*> pods;
  for (int i = 0; i < replicas; ++i) {
    if (auto it = pass.pods.find({ReplicaType::kPS, i}); it != pass.pods.end()) {
      pods[i] = it->second.get();
    }
  }
  ReplicaStatus& ps = pass.status.replica_statuses[ReplicaType::kPS];
  // The condition tells the first restart that lost progress in full (it stays small), the
  // events tell each.
  const char* first_reason = nullptr;
  std::string first_message;
  std::vector<std::string> lost;  // the others
  for (const PsRestart& r : TrackPsRestarts(pods, replicas, ps.indexes, ps.observed_pods)) {
    const std::string message = r.Describe();
    if (!r.ProgressLost()) {
      pass.events_after_write.push_back({EventType::kNormal, "RestoringCheckpoint", message});
      continue;
    }
    PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key << ": " << message;
    pass.events_after_write.push_back({EventType::kWarning, "ProgressLost", message});
    if (first_reason == nullptr) {
      first_reason = r.LossReason();
      first_message = message;
    } else {
      lost.push_back(ReplicaLabel(ReplicaType::kPS, r.index));
    }
  }
  if (first_reason == nullptr) return;
  if (!lost.empty()) {
    absl::StrAppend(&first_message, " (and ", Abbreviated(lost), ": see the ProgressLost events)");
  }
  pass.status.SetCondition(ConditionType::kProgressLost, true, first_reason, first_message,
                           pass.now);
}

void Reconciler::RecordEventsAfterWrite(Pass& pass) {
  for (const PendingEvent& e : pass.events_after_write) {
    events_.Record(*pass.object, e.type, e.reason, e.message);
  }
  pass.events_after_write.clear();
}

bool Reconciler::WriteStatus(Pass& pass) {
  const Json& object = *pass.object;
  Json status = pass.status.ToJson();
  if (object.contains("status") && object["status"] == status) {
    RecordEventsAfterWrite(pass);
    return true;
  }
  Json updated = object;
  const Json sent = status;
  updated["status"] = std::move(status);
  std::string based_on = kube::ResourceVersion(object);  // the version written over
  absl::StatusOr<Json> written = client_.UpdateStatus(kube::TrainingJobs(), pass.ns, updated);
  if (!written.ok() && kube::IsConflict(written.status())) {
    // The job changed since the cache read it (a spec or metadata edit). This pass may already
    // have acted on what it decided (a failed pod deleted for a restart): dropping the status
    // would lose that restart, its lastFailure and the backoff count. Where nobody else changed
    // the status meanwhile, the same status goes onto the current version, once.
    absl::StatusOr<Json> current = client_.Get(kube::TrainingJobs(), pass.ns, pass.name);
    const Json none = Json::object();
    const auto status_of = [&](const Json& j) -> const Json& {
      return j.is_object() && j.contains("status") ? j["status"] : none;
    };
    if (current.ok() && kube::Uid(*current) == kube::Uid(object) &&
        status_of(*current) == status_of(object)) {
      Json retry = *std::move(current);
      based_on = kube::ResourceVersion(retry);
      retry["status"] = sent;
      written = client_.UpdateStatus(kube::TrainingJobs(), pass.ns, retry);
    }
  }
  if (!written.ok()) {
    if (!kube::IsConflict(written.status())) {
      PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key
                          << ": status not written: " << written.status().message();
    }
    if (pass.result.status.ok()) pass.result.status = written.status();
    return false;
  }
  pass.result.status_written = true;
  const std::string written_version = kube::ResourceVersion(*written);
  // The cache must show the job past what the pass read and what this write went onto (a second
  // write of the pass, or the retry's, goes onto a version the first made or the Get found). A
  // write that changed nothing stored keeps the resourceVersion and emits no watch event:
  // waiting for the cache to move past that one would wait forever.
  for (const std::string& behind : {pass.cached_version, based_on}) {
    if (behind != written_version) AwaitCachePast(pass.key, {behind});
  }
  if (written->is_object() && written->contains("status") && (*written)["status"] != sent) {
    // The server pruned or defaulted what it was sent: the installed CRD's status schema does not
    // match this operator. Each pass would then send the same write again.
    PSFLOW_LOG(WARNING) << "TrainingJob " << pass.key
                        << ": the API server stored a different status than written (is the "
                           "installed CRD older than this operator?); stored "
                        << (*written)["status"].dump() << ", written " << sent.dump();
  }
  if (written->is_object()) pass.object = std::make_shared<const Json>(*std::move(written));
  RecordEventsAfterWrite(pass);
  return true;
}

size_t Reconciler::awaited_writes() const {
  std::lock_guard<std::mutex> lock(written_mu_);
  return written_from_.size();
}

void Reconciler::ForgetJob(const std::string& key) {
  expectations_.Forget(key);
  std::lock_guard<std::mutex> lock(written_mu_);
  written_from_.erase(key);
  thrown_.erase(key);
}

void Reconciler::AwaitCachePast(const std::string& key, const std::vector<std::string>& versions) {
  std::lock_guard<std::mutex> lock(written_mu_);
  std::vector<std::string>& behind = written_from_[key];
  for (const std::string& v : versions) {
    if (absl::c_find(behind, v) == behind.end()) behind.push_back(v);
  }
}

bool Reconciler::CacheBehindOwnWrite(const std::string& key, const Json& cached) {
  std::lock_guard<std::mutex> lock(written_mu_);
  auto it = written_from_.find(key);
  if (it == written_from_.end()) return false;
  if (absl::c_linear_search(it->second, kube::ResourceVersion(cached))) return true;
  written_from_.erase(it);  // the cache has moved past them
  return false;
}

}  // namespace psflow::controller
