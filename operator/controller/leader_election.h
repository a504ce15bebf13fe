// Leader election over a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
// replicas of the operator race to hold the Lease `ns/name`; the holder renews it every
// retry_period and does the work; the others retry every retry_period and take over once the
// holder releases the lease or stops renewing it (renewTime + leaseDurationSeconds has passed).
//
// Every write carries the resourceVersion just read (optimistic concurrency), so of two replicas
// racing for a free lease exactly one wins; the other's write is refused (409) and it waits.
// Lease fields: see lease_record.h. A lease held by another expires lease_duration after this
// replica saw its record last change, by this replica's clock (LeaseRecord::FreeAt): replicas'
// clocks need not agree.
#ifndef PSFLOW_OPERATOR_CONTROLLER_LEADER_ELECTION_H_
#define PSFLOW_OPERATOR_CONTROLLER_LEADER_ELECTION_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <stop_token>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "operator/controller/lease_record.h"
#include "operator/kube/kube_client.h"

namespace psflow::controller {

struct LeaderElectionOptions {
  std::string ns;  // the Lease's namespace (the operator's own)
  std::string name = "psflow-operator";
  std::string identity;  // unique per replica: the pod name
  // How long a lease stays ours without renewal (written as leaseDurationSeconds, rounded up).
  std::chrono::milliseconds lease_duration{15000};
  // The leader gives up when it has not renewed for this long (< lease_duration, so it stops
  // working before another replica may take over).
  std::chrono::milliseconds renew_deadline{10000};
  // Between attempts to acquire, and between renewals (< renew_deadline).
  std::chrono::milliseconds retry_period{2000};
};

class LeaderElector {
 public:
  // `client` must outlive the elector. `now` is the clock lease times are written and compared
  // with (and renew_deadline measured with); retry_period is always slept in real time.
  LeaderElector(kube::KubeClient& client, LeaderElectionOptions options,
                std::function<absl::Time()> now = absl::Now);
  LeaderElector(const LeaderElector&) = delete;
  LeaderElector& operator=(const LeaderElector&) = delete;

  // Blocks: tries to acquire every retry_period until it leads or `stop` is requested; while
  // leading runs lead(leading_token) on another thread and renews every retry_period.
  //  - Returns ABORTED ("lost leadership") when it could not renew within renew_deadline, or
  //    found the lease held by another replica: leading_token's stop is requested and lead has
  //    returned by then. The caller should exit (the usual reaction) or call Run again.
  //  - Returns OK when `stop` is requested, or when lead returns on its own: lead is stopped and
  //    has returned, and the lease is released (holderIdentity cleared, leaseDurationSeconds 1)
  //    so that another replica takes over at once. A failed release is logged, not returned.
  //  - Returns INVALID_ARGUMENT for options that cannot work (empty ns/name/identity; not
  //    lease_duration > renew_deadline > retry_period > 0; lease_duration < 1 s).
  // API errors while trying (forbidden, unavailable, ...) are logged once per streak and retried.
  // Logs "became leader" and "lost leadership" once each time they happen. One Run at a time.
  absl::Status Run(std::stop_token stop, const std::function<void(std::stop_token)>& lead);

  // True from the moment the lease is acquired until leadership is lost or given up. Any thread.
  bool IsLeader() const;

  // One attempt, as Run makes every retry_period: reads the lease and writes it with this
  // replica as holder (renewTime now) when it is free, expired or already ours; creates it when
  // it does not exist. OK: this replica holds the lease now. ABORTED: another replica wrote or
  // created the lease first (retry later). FAILED_PRECONDITION: another replica holds it and it
  // has not expired. Other errors: from the API. Does not change IsLeader(). Not to be called
  // while Run is running.
  absl::Status TryAcquireOrRenew();
  // Gives the lease up (as Run does on stop) if this replica holds it; OK when it does not.
  absl::Status Release();

  static absl::Status ValidateOptions(const LeaderElectionOptions& options);

 private:
  std::string LeaseKey() const;
  int64_t LeaseDurationSeconds() const;

  kube::KubeClient& client_;
  const LeaderElectionOptions options_;
  const std::function<absl::Time()> now_;
  std::atomic<bool> is_leader_{false};
  LeaseSighting seen_;  // the lease as TryAcquireOrRenew last saw it held by another
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_LEADER_ELECTION_H_
