#include "operator/controller/cluster_view.h"

#include "operator/controller/replica_objects.h"

namespace psflow::controller {

ObjectPtr DirectView::Job(const std::string& ns, const std::string& name) const {
  absl::StatusOr<kube::Json> job = client_.Get(kube::TrainingJobs(), ns, name);
  if (!job.ok()) return nullptr;
  return std::make_shared<const kube::Json>(*std::move(job));
}

std::vector<ObjectPtr> DirectView::ListOwned(const kube::Resource& resource, const std::string& ns,
                                             const std::string& job) const {
  std::vector<ObjectPtr> out;
  kube::ListOptions options;
  options.label_selector = JobSelector(job);
  absl::StatusOr<kube::ObjectList> list = client_.List(resource, ns, options);
  if (!list.ok()) return out;
  for (kube::Json& item : list->items) {
    out.push_back(std::make_shared<const kube::Json>(std::move(item)));
  }
  return out;
}

std::vector<ObjectPtr> DirectView::Pods(const std::string& ns, const std::string& job) const {
  return ListOwned(kube::Pods(), ns, job);
}

std::vector<ObjectPtr> DirectView::Services(const std::string& ns, const std::string& job) const {
  return ListOwned(kube::Services(), ns, job);
}

}  // namespace psflow::controller
