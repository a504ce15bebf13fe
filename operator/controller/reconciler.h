// One level-triggered, idempotent pass over one TrainingJob: compare what the job asks for with
// the pods and services that exist, act on the difference, and write the status.
//
// A pass, in order:
//  1. The job is parsed; a spec the operator cannot run (e.g. no Worker and no Chief) makes the
//     job Failed (reason InvalidSpec) with the parser's one-line message. Nothing else happens.
//  2. A finished job (Succeeded/Failed) is cleaned up: cleanPodPolicy All deletes every pod,
//     Running the active ones, None none — except that after success the ps pods are always
//     stopped (they never end by themselves); services go unless the policy is None. With
//     ttlSecondsAfterFinished the job itself is deleted that long after completionTime (its
//     pods and services go with it through their ownerReferences).
//  3. runPolicy.suspend deletes the active pods and sets Suspended; resuming clears it and
//     restarts activeDeadlineSeconds from the resume time (as Kubernetes Jobs do). When every pod
//     of the job is held by scheduling gates (a queue's: Kueue's kueue.x-k8s.io/admission) the job
//     is Queued (True, a Normal event Queued; Running and Restarting False); once a Pending or
//     Running pod of it has no gate left (the queue let it go), Queued turns False with a Normal
//     event Admitted. The job's clocks stop while it is queued and run from its admission
//     (job_decision.h). Suspending or finishing a queued job turns Queued False without an event.
//  4. activeDeadlineSeconds past the later of startTime and the admission -> Failed
//     (DeadlineExceeded); schedulingTimeoutSeconds past it with a replica never running -> Failed
//     (Unschedulable), or, for a job suspended before, spec.runPolicy.suspend set (an update of
//     the job; without the RBAC for it the job fails as before) and Suspended (reason
//     SchedulingTimeout, a Warning event). Before that,
//     each ps task that restarted in place or in a new pod since the last pass is told
//     (ps_restarts.h): when its checkpoints did not outlive the restart, by a Warning event
//     ProgressLost and the condition ProgressLost; else by a Normal event RestoringCheckpoint. The
//     events are recorded once the status that holds the restart (PS observedPods) is written: each
//     restart is told once.
//  5. The job's headless Service `<job>` is created when missing (replica_objects.h); for each
//     replica `<job>-<type>-<index>`, a missing pod is created unless the replica already
//     completed (completedIndexes in status: a deleted completed pod is never run again); a
//     Failed pod is replaced when its restartPolicy allows (pod_state.h) and backoffLimit is not
//     reached — every restart kind counts: the operator's replacements and the kubelet's in-place
//     restarts — else the job fails with the replica, its exit code and reason in the Failed
//     condition's message. Pods beyond the replica count (scaled down) are deleted. Before pods
//     are made, as creation_plan.h orders them: the NetworkPolicy (opted in), the gang's
//     PodGroup (its replica counts updated after a scale), the TLS Secrets holding every
//     replica's certificate (job_certificates.h), the model ConfigMap (spec.modelFile). One
//     SuccessfulCreate event per pass names what it made.
//  6. Success per successPolicy: the chief (or worker 0) completed, or every worker did.
//  7. status.throughput takes the throughput probe's latest rates for the job when it has some
//     (ReconcilerOptions::throughput); otherwise the status keeps what it had, so a finished job
//     shows what it last did.
//  8. The status is written through the status subresource when it changed, with the
//     resourceVersion of the cached object (or of the pass's own spec update, step 4): ABORTED on
//     conflict, the caller retries with a fresh cache. Until the cache shows the job past the
//     versions the pass wrote over, no pass acts on it.
//
// Creations run in parallel. Every create/delete is first registered in Expectations and a job
// with outstanding expectations is not acted on, so a cache that lags never causes duplicates.
#ifndef PSFLOW_OPERATOR_CONTROLLER_RECONCILER_H_
#define PSFLOW_OPERATOR_CONTROLLER_RECONCILER_H_

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "operator/controller/cluster_view.h"
#include "operator/controller/creation_plan.h"
#include "operator/controller/event_recorder.h"
#include "operator/controller/expectations.h"
#include "operator/controller/job_decision.h"
#include "operator/controller/shared_memory_channel.h"
#include "operator/controller/throughput_rate.h"
#include "operator/kube/kube_client.h"

namespace psflow::controller {

struct ReconcilerOptions {
  int max_parallel_creates = 16;
  // Objects one pass creates at most (slow start within it); the job comes back at once for the
  // rest, so other jobs get their turn and shutdown is never far.
  int max_creates_per_pass = 500;
  // True once the operator is stopping: a pass creates nothing more. May be empty.
  std::function<bool()> stopping;
  // How soon a job waiting on expectations is looked at again (events usually come first).
  absl::Duration expectations_recheck = absl::Seconds(5);
  // The latest measured throughput of a job ("namespace/name"), nullopt when none; called from
  // the reconcile workers, so thread-safe. Empty: nothing measured (status.throughput is kept).
  std::function<std::optional<Throughput>(const std::string& key)> throughput;
  // The node directory under which a job with spec.sharedMemory gets its own (BuildPod).
  std::string shared_memory_dir = kDefaultSharedMemoryDir;
};

struct ReconcileResult {
  absl::Status status;                          // non-OK: retry with backoff
  std::optional<absl::Duration> requeue_after;  // come back for a deadline, TTL or expectation
  int pods_created = 0;
  int pods_deleted = 0;
  int services_created = 0;
  int services_deleted = 0;
  int restarts = 0;
  bool status_written = false;
  bool job_deleted = false;  // by ttlSecondsAfterFinished
  // Set on the pass that first saw every replica running: since the job's creationTimestamp.
  std::optional<absl::Duration> time_to_running;
};

class Reconciler {
 public:
  Reconciler(kube::KubeClient& client, const ClusterView& view, Expectations& expectations,
             EventRecorder& events, std::function<absl::Time()> now = absl::Now,
             ReconcilerOptions options = {});

  // One pass. An exception from inside it (a bug, or an object shaped in a way nobody foresaw)
  // never escapes: the pass returns INTERNAL (retried with backoff) and the job gets a Warning
  // ReconcileError event with the exception's message, once per distinct message until a pass
  // succeeds.
  ReconcileResult Reconcile(const std::string& ns, const std::string& name);

  // Jobs whose last status write by this reconciler the cache has not shown yet (each is
  // forgotten once the cache moves past it, or the job is gone or deleted by its TTL): bounded
  // by the jobs that exist.
  size_t awaited_writes() const;

 private:
  struct Pass;
  ReconcileResult ReconcileOnce(const std::string& ns, const std::string& name);
  // The Warning ReconcileError event for a pass that threw `what` (not repeated while the same
  // message repeats).
  void ReportThrown(const std::string& ns, const std::string& name, const std::string& what);
  // Observe -> Decide (job_decision.h, pure) -> act: creates, replacements, the outcome.
  void ReconcileActive(Pass& pass);
  JobObservation Observe(const Pass& pass) const;
  void Finish(Pass& pass);
  // Deletes the active pods and sets Suspended: reason "Suspended", with a Normal event once the
  // status is stored; or `why`'s reason and message (its caller records the event).
  void Suspend(Pass& pass, const std::optional<std::pair<std::string, std::string>>& why = {});
  // schedulingTimeoutSeconds passed for a job whose suspend is in use (Decision::suspend): sets
  // spec.runPolicy.suspend (whoever resumed it may resume it again), then suspends it.
  void SuspendOnTimeout(Pass& pass, const std::pair<std::string, std::string>& why);
  void CountPods(Pass& pass);
  // The ps tasks that restarted since the last pass (ps_restarts.h): a Warning ProgressLost event
  // and the ProgressLost condition for each that lost its training progress, a Normal
  // RestoringCheckpoint event for each that restores its checkpoint.
  void TrackPs(Pass& pass);
  void RecordEventsAfterWrite(Pass& pass);
  void Fail(Pass& pass, const std::string& reason, const std::string& message);
  // Deletes `pods` (uid preconditions), folds their kubelet restarts into the status and drops
  // them from the pass. Returns the names deleted.
  std::set<std::string> DeletePods(Pass& pass, const std::vector<ObjectPtr>& pods,
                                   const std::string& why);
  // Creates what the job lacks, as PlanCreation (creation_plan.h) orders it: its Service when
  // `service`, then, when there are pods to make, what they need, then `pods`; one
  // SuccessfulCreate event names what it made. An object that cannot be made ends the pass
  // before the pods (its error in the result, or a requeue).
  void CreateAll(Pass& pass, const std::vector<ReplicaSlot>& pods, bool service);
  struct Made;
  // Makes one object of the plan (the methods below); false when the pods must wait.
  bool Make(Pass& pass, JobObject object, Made& made);
  bool MakeService(Pass& pass, Made& made);
  bool MakeNetworkPolicy(Pass& pass, Made& made);
  bool MakePodGroup(Pass& pass, Made& made);
  bool MakeTlsSecrets(Pass& pass, Made& made);
  // The plan's pods in its slow-start batches, each batch on up to max_parallel_creates threads.
  void MakePods(Pass& pass, const CreationPlan& plan, Made& made);
  // Logs why `what` could not be made, records a FailedCreate warning event ("Error creating
  // <what>: <why>"; for pods the API's message names the pod) unless `told` (an event of its own
  // said it), a conflict or a namespace being deleted, and keeps the first error as the pass's;
  // returns false.
  bool CreationFailed(Pass& pass, const std::string& what, const absl::Status& s,
                      bool told = false);
  void ReportMade(Pass& pass, Made& made);
  bool WriteStatus(Pass& pass);
  // True while the cached job is still at a version this reconciler's last pass wrote over (its
  // status or spec): what it wrote (an outcome, completed indexes) is not in the cache yet.
  bool CacheBehindOwnWrite(const std::string& key, const kube::Json& cached);
  // Until the cache shows the job at a version not in `versions`, its passes wait (versions
  // this reconciler wrote over).
  void AwaitCachePast(const std::string& key, const std::vector<std::string>& versions);
  // The job is gone: nothing of it is awaited any more.
  void ForgetJob(const std::string& key);

  kube::KubeClient& client_;
  const ClusterView& view_;
  Expectations& expectations_;
  EventRecorder& events_;
  std::function<absl::Time()> now_;
  ReconcilerOptions options_;
  mutable std::mutex written_mu_;
  // job key -> the resourceVersions the cache must move past: those this reconciler's writes of
  // the job's last pass were made over
  std::map<std::string, std::vector<std::string>> written_from_ ABSL_GUARDED_BY(written_mu_);
  // job key -> the message of the ReconcileError event last recorded, until a pass succeeds or
  // the job is gone
  std::map<std::string, std::string> thrown_ ABSL_GUARDED_BY(written_mu_);
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_RECONCILER_H_
