#include "tests/kube/memory_kube_client.h"

#include <chrono>
#include <utility>

#include "core/status_macros.h"
#include "operator/kube/object_meta.h"
#include "tests/kube/verbs.h"

namespace psflow::kubetest {
namespace {

constexpr std::chrono::milliseconds kStopPoll{20};

}  // namespace

absl::Status MemoryKubeClient::Enter(absl::string_view verb, const kube::Resource& resource,
                                     absl::string_view name) {
  Fault fault;
  {
    std::lock_guard lock(mu_);
    auto it = calls_.find(verb);
    if (it == calls_.end()) it = calls_.emplace(std::string(verb), 0).first;
    ++it->second;
    fault = fault_;
  }
  // Outside the lock: the fault function may call back into this client.
  return fault ? fault(verb, resource, name) : absl::OkStatus();
}

absl::StatusOr<Json> MemoryKubeClient::Get(const kube::Resource& resource, absl::string_view ns,
                                           absl::string_view name) {
  RETURN_IF_ERROR(Enter(verb::kGet, resource, name));
  return store_->Get(resource, ns, name);
}

absl::StatusOr<kube::ObjectList> MemoryKubeClient::List(const kube::Resource& resource,
                                                        absl::string_view ns,
                                                        const kube::ListOptions& options) {
  RETURN_IF_ERROR(Enter(verb::kList, resource, ""));
  return store_->List(resource, ns, options);
}

absl::Status MemoryKubeClient::Watch(const kube::Resource& resource, absl::string_view ns,
                                     const kube::ListOptions& options, std::stop_token stop,
                                     const std::function<void(const kube::WatchEvent&)>& on_event) {
  RETURN_IF_ERROR(Enter(verb::kWatch, resource, ""));
  ASSIGN_OR_RETURN(std::unique_ptr<Watcher> watcher, store_->Watch(resource, ns, options));
  for (;;) {
    if (stop.stop_requested()) return absl::CancelledError("watch stopped");
    std::optional<kube::WatchEvent> event = watcher->Next(kStopPoll);
    if (event.has_value()) {
      on_event(*event);
    } else if (watcher->closed()) {
      return watcher->status();
    }
  }
}

absl::StatusOr<Json> MemoryKubeClient::Create(const kube::Resource& resource, absl::string_view ns,
                                              const Json& object) {
  RETURN_IF_ERROR(Enter(verb::kCreate, resource, kube::Name(object)));
  return store_->Create(resource, ns, object);
}

absl::StatusOr<Json> MemoryKubeClient::Update(const kube::Resource& resource, absl::string_view ns,
                                              const Json& object) {
  RETURN_IF_ERROR(Enter(verb::kUpdate, resource, kube::Name(object)));
  return store_->Update(resource, ns, object);
}

absl::StatusOr<Json> MemoryKubeClient::UpdateStatus(const kube::Resource& resource,
                                                    absl::string_view ns, const Json& object) {
  RETURN_IF_ERROR(Enter(verb::kUpdateStatus, resource, kube::Name(object)));
  return store_->UpdateStatus(resource, ns, object);
}

absl::Status MemoryKubeClient::Delete(const kube::Resource& resource, absl::string_view ns,
                                      absl::string_view name, const kube::DeleteOptions& options) {
  RETURN_IF_ERROR(Enter(verb::kDelete, resource, name));
  return store_->Delete(resource, ns, name, options).status();
}

void MemoryKubeClient::SetFault(Fault fault) {
  std::lock_guard lock(mu_);
  fault_ = std::move(fault);
}

int64_t MemoryKubeClient::CallCount(absl::string_view verb) const {
  std::lock_guard lock(mu_);
  auto it = calls_.find(verb);
  return it == calls_.end() ? 0 : it->second;
}

int64_t MemoryKubeClient::TotalCalls() const {
  std::lock_guard lock(mu_);
  int64_t total = 0;
  for (const auto& [verb, count] : calls_) total += count;
  return total;
}

}  // namespace psflow::kubetest
