// What a reconcile reads: the job and the pods and services labelled with its name. The
// operator reads its informers' caches (InformerView in controller.h); tests can read the API
// directly (DirectView).
#ifndef PSFLOW_OPERATOR_CONTROLLER_CLUSTER_VIEW_H_
#define PSFLOW_OPERATOR_CONTROLLER_CLUSTER_VIEW_H_

#include <memory>
#include <string>
#include <vector>

#include "operator/kube/kube_client.h"

namespace psflow::controller {

using ObjectPtr = std::shared_ptr<const kube::Json>;

class ClusterView {
 public:
  virtual ~ClusterView() = default;
  // nullptr when the job does not exist.
  virtual ObjectPtr Job(const std::string& ns, const std::string& name) const = 0;
  // Objects labelled psflow.io/job-name=<job> in `ns` (ownership is checked by the caller).
  virtual std::vector<ObjectPtr> Pods(const std::string& ns, const std::string& job) const = 0;
  virtual std::vector<ObjectPtr> Services(const std::string& ns, const std::string& job) const = 0;
};

// Every call is a request to the API server: always fresh, never cached.
class DirectView : public ClusterView {
 public:
  explicit DirectView(kube::KubeClient& client) : client_(client) {}
  ObjectPtr Job(const std::string& ns, const std::string& name) const override;
  std::vector<ObjectPtr> Pods(const std::string& ns, const std::string& job) const override;
  std::vector<ObjectPtr> Services(const std::string& ns, const std::string& job) const override;

 private:
  std::vector<ObjectPtr> ListOwned(const kube::Resource& resource, const std::string& ns,
                                   const std::string& job) const;
  kube::KubeClient& client_;
};

}  // namespace psflow::controller

#endif  // PSFLOW_OPERATOR_CONTROLLER_CLUSTER_VIEW_H_
