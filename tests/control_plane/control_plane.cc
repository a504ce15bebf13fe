#include "tests/control_plane/control_plane.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/kubeconfig.h"
#include "operator/kube/object_meta.h"
#include "tests/test_util.h"

namespace psflow::kubereal {
namespace {

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

const kube::Resource& Namespaces() {
  static const kube::Resource* resource =
      new kube::Resource{"", "v1", "namespaces", "Namespace", /*namespaced=*/false};
  return *resource;
}

const kube::Resource& ServiceAccounts() {
  static const kube::Resource* resource =
      new kube::Resource{"", "v1", "serviceaccounts", "ServiceAccount"};
  return *resource;
}

}  // namespace

absl::StatusOr<ControlPlane> ControlPlane::Get() {
  const char* dir = std::getenv("PSFLOW_CONTROL_PLANE_DIR");
  if (dir == nullptr || *dir == '\0') {
    return absl::UnavailableError(
        "no Kubernetes control plane: PSFLOW_CONTROL_PLANE_DIR is not set (run this test through "
        "ctest, whose kube_control_plane fixture starts one)");
  }
  const std::filesystem::path path(dir);
  if (std::filesystem::exists(path / "skip")) {
    return absl::UnavailableError(
        absl::StrCat("no Kubernetes control plane: ", ReadAll(path / "skip")));
  }
  if (!std::filesystem::exists(path / "server")) {
    return absl::UnavailableError(absl::StrCat("no Kubernetes control plane in ", dir,
                                               ": tests/control_plane/control_plane.sh start "
                                               "did not finish (its ctest fixture failed?)"));
  }
  return ControlPlane(dir);
}

absl::StatusOr<std::unique_ptr<kube::RestKubeClient>> ControlPlane::Client(
    const std::string& kubeconfig) const {
  absl::StatusOr<kube::ClusterConfig> config = kube::LoadKubeconfig(kubeconfig);
  if (!config.ok()) return config.status();
  kube::RestKubeClient::Options options;
  options.qps = 0;
  options.user_agent = "psflow-test";
  return kube::RestKubeClient::Create(*config, options);
}

int ControlPlane::Kubectl(const std::vector<std::string>& args, std::string* output) const {
  std::string kubectl = "kubectl";
  if (const char* set = std::getenv("PSFLOW_KUBECTL"); set != nullptr && *set != '\0') {
    kubectl = set;
  } else if (std::filesystem::exists(testing::SourceDir() + "/build/tools/bin/kubectl")) {
    kubectl = testing::SourceDir() + "/build/tools/bin/kubectl";
  }
  std::vector<std::string> argv = {kubectl, "--kubeconfig=" + kubeconfig(),
                                   "--cache-dir=" + dir_ + "/kubectl-cache"};
  argv.insert(argv.end(), args.begin(), args.end());
  testing::CommandResult result =
      testing::RunCommand(argv, testing::Environment({}, {"KUBECONFIG"}), std::chrono::seconds(60));
  if (output != nullptr) *output = result.output;
  return result.timed_out ? -1 : result.status.code;
}

absl::StatusOr<std::unique_ptr<TestNamespace>> TestNamespace::Create(kube::KubeClient& client,
                                                                     const std::string& prefix) {
  static std::atomic<int> counter{0};
  const std::string name =
      absl::AsciiStrToLower(absl::StrCat(prefix, "-", getpid(), "-", counter++));
  kube::Json object = {{"metadata", {{"name", name}}}};
  if (absl::StatusOr<kube::Json> made = client.Create(Namespaces(), "", object); !made.ok()) {
    return made.status();
  }
  std::unique_ptr<TestNamespace> ns(new TestNamespace(client, name));
  // The ServiceAccount admission plugin refuses pods until the default ServiceAccount exists.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!client.Get(ServiceAccounts(), name, "default").ok()) {
    if (std::chrono::steady_clock::now() > end) {
      return absl::DeadlineExceededError(
          absl::StrCat("namespace ", name, ": no default ServiceAccount after 30 s"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return ns;
}

TestNamespace::~TestNamespace() { client_.Delete(Namespaces(), "", name_, {}).IgnoreError(); }

void RealApiserverTest::SetUp() {
  absl::StatusOr<ControlPlane> plane = ControlPlane::Get();
  if (!plane.ok()) GTEST_SKIP() << plane.status().message();
  plane_ = std::make_unique<ControlPlane>(*plane);
  auto client = plane_->AdminClient();
  ASSERT_TRUE(client.ok()) << client.status();
  client_ = *std::move(client);
  auto made = TestNamespace::Create(*client_, prefix_);
  ASSERT_TRUE(made.ok()) << made.status();
  namespace_ = *std::move(made);
}

}  // namespace psflow::kubereal
