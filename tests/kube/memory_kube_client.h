// MemoryKubeClient: kube::KubeClient over an ObjectStore, with no network, for unit tests of the
// operator's parts. Same semantics and errors as RestKubeClient against the test API server,
// plus fault injection and call counts.
#ifndef PSFLOW_TESTS_KUBE_MEMORY_KUBE_CLIENT_H_
#define PSFLOW_TESTS_KUBE_MEMORY_KUBE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "operator/kube/kube_client.h"
#include "tests/kube/object_store.h"

namespace psflow::kubetest {

// Thread-safe. `store` must outlive the client.
class MemoryKubeClient : public kube::KubeClient {
 public:
  // Decides whether a call fails: `verb` (verbs.h), the resource, and the object's name ("" for
  // list and watch; the body's metadata.name, maybe empty, for create). A non-OK status is
  // returned instead of making the call, e.g. absl::UnavailableError for a dropped connection.
  using Fault = std::function<absl::Status(absl::string_view verb, const kube::Resource& resource,
                                           absl::string_view name)>;

  explicit MemoryKubeClient(ObjectStore* store) : store_(store) {}

  absl::StatusOr<Json> Get(const kube::Resource& resource, absl::string_view ns,
                           absl::string_view name) override;
  absl::StatusOr<kube::ObjectList> List(const kube::Resource& resource, absl::string_view ns,
                                        const kube::ListOptions& options) override;
  // Polls the store's watcher every 20 ms, so a `stop` request ends it (CANCELLED) within about
  // that. OK when the watch ends (timeout, CloseWatches()), OUT_OF_RANGE when its version is too
  // old or Compact() ends it. Runs `on_event` on the calling thread.
  absl::Status Watch(const kube::Resource& resource, absl::string_view ns,
                     const kube::ListOptions& options, std::stop_token stop,
                     const std::function<void(const kube::WatchEvent&)>& on_event) override;
  absl::StatusOr<Json> Create(const kube::Resource& resource, absl::string_view ns,
                              const Json& object) override;
  absl::StatusOr<Json> Update(const kube::Resource& resource, absl::string_view ns,
                              const Json& object) override;
  absl::StatusOr<Json> UpdateStatus(const kube::Resource& resource, absl::string_view ns,
                                    const Json& object) override;
  absl::Status Delete(const kube::Resource& resource, absl::string_view ns, absl::string_view name,
                      const kube::DeleteOptions& options) override;

  // Replaces the fault function (empty: no faults).
  void SetFault(Fault fault);
  // Calls of `verb` made through this client, faulted ones included.
  int64_t CallCount(absl::string_view verb) const;
  int64_t TotalCalls() const;

 private:
  // Counts the call and asks the fault function.
  absl::Status Enter(absl::string_view verb, const kube::Resource& resource,
                     absl::string_view name);

  ObjectStore* const store_;
  mutable std::mutex mu_;
  Fault fault_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t, std::less<>> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_MEMORY_KUBE_CLIENT_H_
