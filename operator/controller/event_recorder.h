// Kubernetes Events about TrainingJobs (`kubectl describe tj` shows them): creates, deletes,
// restarts, failures. Best-effort, as in client-go: a failed write is logged, never returned.
// As client-go's event logger does, an event identical to one recorded before (same job uid,
// type, reason and message; the last kRemembered kept) is not created again: the stored Event's
// count goes up by one and its lastTimestamp moves (one PUT), so an error retried every pass
// shows as one Event ("x12 over 3m"), not a dozen. Where that Event is gone (the API server
// expires events after an hour) or was changed by someone else, a new one starts at count 1;
// where the operator may not update events (403), every event is created, as before; where the
// update fails otherwise (the API server unreachable), the event is dropped and logged.
#ifndef PSFLOW_OPERATOR_CONTROLLER_EVENT_RECORDER_H_
#define PSFLOW_OPERATOR_CONTROLLER_EVENT_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "operator/kube/kube_client.h"

namespace psflow::controller {

enum class EventType { kNormal, kWarning };

class EventRecorder {
 public:
  EventRecorder(kube::KubeClient& client, std::string component,
                std::function<absl::Time()> now = absl::Now);

  // A core/v1 Event whose involvedObject is `object` (kind, name, namespace, uid from it).
  void Record(const kube::Json& object, EventType type, const std::string& reason,
              const std::string& message);
  // Events recorded, first times and repeats alike.
  int64_t recorded() const { return recorded_.load(); }

  static constexpr size_t kRemembered = 4096;  // client-go's cache size

 private:
  // What a repeat needs of the Event an earlier record stored.
  struct Stored {
    std::string name;
    std::string resource_version;
    std::string first_timestamp;
    int64_t count = 1;
  };
  std::optional<Stored> Earlier(const std::string& key);
  void Remember(const std::string& key, const kube::Json& stored);

  kube::KubeClient& client_;
  std::string component_;
  std::function<absl::Time()> now_;
  std::atomic<int64_t> recorded_{0};
  std::atomic<bool> counting_{true};  // false once an update was refused (RBAC)
  std::mutex mu_;
  // Keyed by uid, type, reason and message; order_ lists the keys, most recently recorded first.
  std::unordered_map<std::string, std::pair<Stored, std::list<std::string>::iterator>> remembered_
      ABSL_GUARDED_BY(mu_);
  std::list<std::string> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_EVENT_RECORDER_H_
