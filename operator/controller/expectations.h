// Creations and deletions the operator has asked for but its caches have not shown yet, per job
// (client-go's ControllerExpectations). While a job has outstanding expectations its reconcile
// takes no pod or service action, so a cache that lags behind the API server never makes the
// operator create twice or restart a replica twice. Expectations expire after `ttl` in case an
// event is lost (the informer's relist then tells the truth).
#ifndef PSFLOW_OPERATOR_CONTROLLER_EXPECTATIONS_H_
#define PSFLOW_OPERATOR_CONTROLLER_EXPECTATIONS_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace psflow::controller {

class Expectations {
 public:
  explicit Expectations(absl::Duration ttl = absl::Minutes(5),
                        std::function<absl::Time()> now = absl::Now);

  // Adds to the outstanding counts of `key` (and restarts its expiry).
  void Expect(const std::string& key, int creations, int deletions);
  // One creation/deletion of `key` observed (or given up on: the call failed). Never below 0.
  void CreationObserved(const std::string& key);
  void DeletionObserved(const std::string& key);
  // The cache shows pod `uid` of `key` being deleted (deletionTimestamp set): its deletion is
  // observed now, as client-go's Job controller counts it, not when a long grace period (or a
  // node that is gone) lets it go; so the job is reconciled meanwhile. Counted once per pod:
  // PodGone of a pod counted here counts nothing more.
  void PodTerminating(const std::string& key, const std::string& uid);
  // Pod `uid` of `key` left the cache: a deletion observed, unless PodTerminating counted it.
  void PodGone(const std::string& key, const std::string& uid);
  // True when nothing is outstanding or the expectations expired.
  bool Satisfied(const std::string& key) const;
  // Drops `key`'s counts and the pods PodTerminating counted for it.
  void Forget(const std::string& key);

 private:
  void DeletionObservedLocked(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Entry {
    int creations = 0;
    int deletions = 0;
    absl::Time set_at;
  };
  absl::Duration ttl_;
  std::function<absl::Time()> now_;
  mutable std::mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Pods counted by PodTerminating and not gone yet: uid -> job key.
  std::map<std::string, std::string> terminating_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_EXPECTATIONS_H_
