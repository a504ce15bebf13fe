// The real Kubernetes control plane (etcd + kube-apiserver + kube-controller-manager v1.26) that
// tests/control_plane/control_plane.sh starts once per ctest run (the `kube_control_plane`
// fixture), as tests reach it: a kubeconfig with an admin client certificate, a client, and one
// namespace per test.
//
// ctest passes the control plane's folder in PSFLOW_CONTROL_PLANE_DIR. A test calls
// ControlPlane::Get() and skips with its status' message when it is not OK: no assets (the
// script's DIR/skip says how to provide them) or the binary run outside ctest.
#ifndef PSFLOW_TESTS_CONTROL_PLANE_CONTROL_PLANE_H_
#define PSFLOW_TESTS_CONTROL_PLANE_CONTROL_PLANE_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "operator/kube/rest_client.h"

namespace psflow::kubereal {

class ControlPlane {
 public:
  // The control plane of this run. UNAVAILABLE (with the reason, to skip on) when there is none.
  static absl::StatusOr<ControlPlane> Get();

  const std::string& dir() const { return dir_; }
  // An admin (system:masters) kubeconfig, for the operator and kubectl.
  std::string kubeconfig() const { return dir_ + "/kubeconfig"; }
  // A user certificate with no RBAC rights ("psflow-test-limited"), to grant Roles to.
  std::string limited_kubeconfig() const { return dir_ + "/limited.kubeconfig"; }
  static constexpr char kLimitedUser[] = "psflow-test-limited";
  static constexpr char kNodeName[] = "psflow-test-node";

  // A client of `kubeconfig` with no client-side rate limit.
  absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> Client(const std::string& kubeconfig) const;
  absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> AdminClient() const {
    return Client(kubeconfig());
  }

  // kubectl (scripts/setup.sh's, else PATH's) with the admin kubeconfig; returns its exit code
  // and puts its output into *output.
  int Kubectl(const std::vector<std::string>& args, std::string* output) const;

 private:
  explicit ControlPlane(std::string dir) : dir_(std::move(dir)) {}
  std::string dir_;
};

// A namespace of its own for one test, named "<prefix>-<pid>-<n>", created at construction
// (ready for pods: its default ServiceAccount exists) and deleted at destruction (the controller
// manager's namespace controller removes what is in it).
class TestNamespace {
 public:
  static absl::StatusOr<std::unique_ptr<TestNamespace>> Create(kube::KubeClient& client,
                                                               const std::string& prefix);
  ~TestNamespace();
  const std::string& name() const { return name_; }

 private:
  TestNamespace(kube::KubeClient& client, std::string name)
      : client_(client), name_(std::move(name)) {}
  kube::KubeClient& client_;
  std::string name_;
};

// A test against the real control plane: SetUp finds it (or skips the test, saying why), makes
// an admin client and a namespace of the test's own, named after `prefix`.
class RealApiserverTest : public ::testing::Test {
 protected:
  explicit RealApiserverTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override;
  const std::string& ns() const { return namespace_->name(); }

  std::unique_ptr<ControlPlane> plane_;
  std::unique_ptr<kube::RestKubeClient> client_;
  std::unique_ptr<TestNamespace> namespace_;

 private:
  std::string prefix_;
};

}  // namespace psflow::kubereal

#endif  // PSFLOW_TESTS_CONTROL_PLANE_CONTROL_PLANE_H_
