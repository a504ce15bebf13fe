// psflow-operator, the real binary, against a real Kubernetes API server (kube-apiserver v1.26 +
// etcd + kube-controller-manager, tests/control_plane), the CRD applied with `kubectl apply`.
// Each test has a namespace of its own and an operator watching only it. There is no kubelet and
// no scheduler: TestKubelet binds the pods, finishes graceful deletions and writes the pod
// statuses a kubelet would (phases, exit codes, OOMKilled, restarts) through pods/status.
// Faults a real server does not produce on demand (dropped watches, 410 Gone, an unreachable
// server, a missing CRD) are in operator_faults_test.cc, against tests/kube.
//
// With PSFLOW_E2E_CREDENTIALS=serviceaccount (the ctest entries AsChartServiceAccount.*) the
// operators authenticate with the token of a ServiceAccount bound to nothing but the rules of
// deploy/base/rbac.yaml (the chart's default rendering, tests/install/kustomize_test.sh), not as an
// admin: a call the RBAC does not grant fails the test.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/certificates.h"
#include "core/http_get.h"
#include "core/metrics.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/control_plane/control_plane.h"
#include "tests/control_plane/test_kubelet.h"
#include "tests/operator_process.h"
#include "tests/test_util.h"

namespace psflow {
namespace {

using kube::Json;
using std::chrono::milliseconds;
using testing::Eventually;
using testing::OperatorProcess;

Json Job(const std::string& name, int ps, int workers, const std::string& policy) {
  return testing::MinimalJob(name, ps, workers, policy);
}

const kube::Resource& Namespaces() {
  static const kube::Resource* r = new kube::Resource{"", "v1", "namespaces", "Namespace", false};
  return *r;
}
const kube::Resource& ServiceAccounts() {
  static const kube::Resource* r =
      new kube::Resource{"", "v1", "serviceaccounts", "ServiceAccount", true};
  return *r;
}
const kube::Resource& Roles() {
  static const kube::Resource* r =
      new kube::Resource{"rbac.authorization.k8s.io", "v1", "roles", "Role", true};
  return *r;
}
const kube::Resource& LimitRanges() {
  static const kube::Resource* r = new kube::Resource{"", "v1", "limitranges", "LimitRange", true};
  return *r;
}
const kube::Resource& ClusterRoles() {
  static const kube::Resource* r =
      new kube::Resource{"rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", false};
  return *r;
}
const kube::Resource& RoleBindings() {
  static const kube::Resource* r =
      new kube::Resource{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", true};
  return *r;
}

bool AsServiceAccount() {
  const char* mode = std::getenv("PSFLOW_E2E_CREDENTIALS");
  return mode != nullptr && std::string(mode) == "serviceaccount";
}

class OperatorApiserverTest : public kubereal::RealApiserverTest {
 protected:
  OperatorApiserverTest() : RealApiserverTest("e2e") {}
  void SetUp() override {
    RealApiserverTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    ns_ = ns();
    kubelet_ = std::make_unique<kubereal::TestKubelet>(*client_, ns_);
  }

  // Every status the operators wrote was stored as written: a status field the CRD lacks is
  // pruned by the real server, the operator logs it, and the test fails here.
  // As the chart's ServiceAccount, nothing was refused: every call the operator made is granted.
  void TearDown() override {
    for (const auto& op : operators_) {
      EXPECT_FALSE(absl::StrContains(op->output(), "stored a different status")) << op->output();
      if (!service_account_kubeconfig_.empty()) {
        // RBAC's refusal ("... is forbidden: User ... cannot ..."), not an admission plugin's.
        EXPECT_FALSE(absl::StrContains(op->output(), "forbidden: User")) << op->output();
      }
    }
    if (!cluster_role_.empty()) {
      client_->Delete(ClusterRoles(), "", cluster_role_, {}).IgnoreError();
    }
  }

  // An operator watching only this test's namespace; it lives until the test ends. Without a
  // kubeconfig: the admin's, or under PSFLOW_E2E_CREDENTIALS=serviceaccount the chart's
  // ServiceAccount's.
  OperatorProcess* StartOperator(const std::string& identity, std::vector<std::string> flags = {},
                                 std::string kubeconfig = "") {
    flags.push_back("--namespace=" + ns_);
    if (kubeconfig.empty()) {
      kubeconfig = AsServiceAccount() ? ServiceAccountKubeconfig() : plane_->kubeconfig();
    }
    operators_.push_back(
        std::make_unique<OperatorProcess>(kubeconfig, identity, ns_, std::move(flags)));
    return operators_.back().get();
  }

  // deploy/base/`file` as kubectl parses it (one object, or a List of several; parsed once per
  // process): the object of `kind` named `name`.
  Json DeployBaseObject(const std::string& file, const std::string& kind, const std::string& name) {
    static std::map<std::string, Json>* parsed_files = new std::map<std::string, Json>();
    Json& items = (*parsed_files)[file];
    if (items.empty()) {
      std::string out;
      const int code = plane_->Kubectl({"apply", "--dry-run=client", "-o", "json", "-f",
                                        testing::SourceDir() + "/deploy/base/" + file},
                                       &out);
      EXPECT_EQ(code, 0) << out;
      const size_t start = out.find('{');  // after any warning kubectl prints
      const Json parsed = Json::parse(start == std::string::npos ? "{}" : out.substr(start),
                                      nullptr, /*allow_exceptions=*/false);
      if (!parsed.is_object()) {
        ADD_FAILURE() << "kubectl did not print JSON for deploy/base/" << file << ": " << out;
        return Json::object();
      }
      items = parsed.value("kind", "") == "List" ? parsed.value("items", Json::array())
                                                 : Json::array({parsed});
    }
    for (const Json& item : items) {
      if (item.value("kind", "") == kind && kube::Name(item) == name) return item;
    }
    ADD_FAILURE() << "deploy/base/" << file << " has no " << kind << " " << name << ": " << items;
    return Json::object();
  }

  // A ServiceAccount psflow-operator in this namespace with the rules of deploy/base/rbac.yaml,
  // bound here as the chart binds them with operator.watchNamespace (the ClusterRole's rules
  // through a RoleBinding, the leader-election Role's in the Lease's namespace), and a kubeconfig
  // with a token of it (TokenRequest: the control plane signs with its service-account key).
  std::string ServiceAccountKubeconfig() {
    if (!service_account_kubeconfig_.empty()) return service_account_kubeconfig_;
    const Json cluster_role = DeployBaseObject("rbac.yaml", "ClusterRole", "psflow-operator");
    const Json lease_role =
        DeployBaseObject("rbac.yaml", "Role", "psflow-operator-leader-election");
    const Json subjects = Json::array(
        {{{"kind", "ServiceAccount"}, {"name", "psflow-operator"}, {"namespace", ns_}}});
    cluster_role_ = "psflow-operator-" + ns_;
    auto rbac = [](const std::string& kind, const std::string& name) {
      return Json{{"kind", kind}, {"name", name}, {"apiGroup", "rbac.authorization.k8s.io"}};
    };
    const std::vector<std::pair<const kube::Resource*, Json>> objects = {
        {&ServiceAccounts(), {{"metadata", {{"name", "psflow-operator"}}}}},
        {&ClusterRoles(),
         {{"metadata", {{"name", cluster_role_}}}, {"rules", cluster_role["rules"]}}},
        {&RoleBindings(),
         {{"metadata", {{"name", "psflow-operator"}}},
          {"roleRef", rbac("ClusterRole", cluster_role_)},
          {"subjects", subjects}}},
        {&Roles(),
         {{"metadata", {{"name", "psflow-operator-leader-election"}}},
          {"rules", lease_role["rules"]}}},
        {&RoleBindings(),
         {{"metadata", {{"name", "psflow-operator-leader-election"}}},
          {"roleRef", rbac("Role", "psflow-operator-leader-election")},
          {"subjects", subjects}}}};
    for (const auto& [resource, object] : objects) {
      absl::StatusOr<Json> made =
          client_->Create(*resource, resource->namespaced ? ns_ : "", object);
      EXPECT_TRUE(made.ok()) << made.status();
    }
    std::string out;
    const int code =
        plane_->Kubectl({"create", "token", "psflow-operator", "-n", ns_, "--duration=1h"}, &out);
    EXPECT_EQ(code, 0) << out;
    const std::vector<std::string> lines =
        absl::StrSplit(absl::StripAsciiWhitespace(out), '\n', absl::SkipEmpty());
    const std::string token = lines.empty() ? "" : lines.back();
    const std::string path = plane_->dir() + "/" + ns_ + ".serviceaccount.kubeconfig";
    std::ifstream server_file(plane_->dir() + "/server");
    std::string server;
    std::getline(server_file, server);
    std::ofstream(path) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n"
                        << "    server: " << server
                        << "\n    certificate-authority: " << plane_->dir()
                        << "/pki/ca.crt\nusers:\n- name: psflow-operator\n  user:\n    token: "
                        << token << "\ncontexts:\n- name: c\n  context: {cluster: c, user: "
                        << "psflow-operator}\ncurrent-context: c\n";
    service_account_kubeconfig_ = path;
    return path;
  }

  void CreateJob(const Json& job) {
    absl::StatusOr<Json> made = client_->Create(kube::TrainingJobs(), ns_, job);
    ASSERT_TRUE(made.ok()) << made.status();
  }
  Json GetJob(const std::string& job) {
    return client_->Get(kube::TrainingJobs(), ns_, job).value_or(Json());
  }
  std::vector<Json> Selected(const kube::Resource& resource, const std::string& job) {
    kube::ListOptions options;
    options.label_selector = "psflow.io/job-name=" + job;
    absl::StatusOr<kube::ObjectList> list = client_->List(resource, ns_, options);
    return list.ok() ? list->items : std::vector<Json>();
  }
  std::vector<Json> Pods(const std::string& job) { return Selected(kube::Pods(), job); }
  std::vector<Json> Services(const std::string& job) { return Selected(kube::Services(), job); }
  std::string State(const std::string& job) {
    const Json got = GetJob(job);
    return got.is_object() ? kube::StringAt(got, "status", "state") : "<gone>";
  }
  // Sets the job's spec.runPolicy.suspend (a read-modify-write, retried on conflict); false when
  // it keeps failing.
  bool SetSuspend(const std::string& job, bool suspend) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      Json got = GetJob(job);
      got["spec"]["runPolicy"]["suspend"] = suspend;
      if (client_->Update(kube::TrainingJobs(), ns_, got).ok()) return true;
    }
    return false;
  }
  Json Condition(const std::string& job, const std::string& type) {
    const Json got = GetJob(job);
    if (!got.is_object() || !got.contains("status") || !got["status"].contains("conditions")) {
      return Json();
    }
    for (const Json& c : got["status"]["conditions"]) {
      if (c["type"] == type) return c;
    }
    return Json();
  }
  void RunAll(const std::string& job) {
    for (const Json& pod : Pods(job)) {
      if (kube::StringAt(pod, "status", "phase") != "Running") {
        ASSERT_TRUE(kubelet_->SetPhase(kube::Name(pod), "Running").ok());
      }
    }
  }
  std::string LeaseHolder() {
    auto lease = client_->Get(kube::Leases(), ns_, "psflow-operator");
    return lease.ok() ? kube::StringAt(*lease, "spec", "holderIdentity") : "";
  }
  // How many events of `reason` and `type` (and with `said` in their message) the namespace has,
  // each counted `count` times (a repeat raises the stored Event's count).
  int Events(const std::string& reason, const std::string& type, const std::string& said = "") {
    absl::StatusOr<kube::ObjectList> list = client_->List(kube::Events(), ns_, {});
    int n = 0;
    if (!list.ok()) return -1;
    for (const Json& event : list->items) {
      if (event.value("reason", "") == reason && event.value("type", "") == type &&
          absl::StrContains(event.value("message", ""), said)) {
        n += event.value("count", 1);
      }
    }
    return n;
  }
  std::string Metrics(OperatorProcess& op) {
    const int port = op.MetricsPort();
    if (port == 0) return "";
    return HttpGet("127.0.0.1", port, "/metrics", milliseconds(2000)).value_or("");
  }

  std::string ns_;
  std::unique_ptr<kubereal::TestKubelet> kubelet_;
  std::vector<std::unique_ptr<OperatorProcess>> operators_;
  std::string service_account_kubeconfig_;  // made once, by the first operator that needs it
  std::string cluster_role_;                // cluster-scoped: deleted by TearDown
};

TEST_F(OperatorApiserverTest, JobGetsItsServicePodsAndStatus) {
  auto op = StartOperator("op-a");
  CreateJob(Job("mnist", 1, 2, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("mnist").size() == 3 && State("mnist") == "Created"; }))
      << op->output();
  ASSERT_EQ(Services("mnist").size(), 1u);
  EXPECT_EQ(kube::Name(Services("mnist")[0]), "mnist");
  RunAll("mnist");
  ASSERT_TRUE(Eventually([&] { return State("mnist") == "Running"; })) << op->output();
  EXPECT_EQ(GetJob("mnist")["status"]["workers"], "2/2");
  // Bound to the node before they are stopped: the API server deletes a pod no node holds at
  // once, with no graceful deletion for the kubelet to finish (counted below). Once failed here
  // on a loaded machine with no deletion finished; this wait rules out that cause.
  ASSERT_TRUE(Eventually([&] { return kubelet_->pods_bound() >= 3; })) << kubelet_->pods_bound();
  ASSERT_TRUE(kubelet_->SetPhase("mnist-worker-0", "Succeeded").ok());
  ASSERT_TRUE(Eventually([&] { return State("mnist") == "Succeeded"; })) << op->output();
  // Worker 1 still runs: it gets the finish grace (30 s) to end its steps, the ps with it. It
  // ends within it; then the ps is stopped (cleanPodPolicy Running: a graceful deletion the
  // kubelet finishes) and both completed workers stay, with their logs.
  EXPECT_EQ(Pods("mnist").size(), 3u);
  ASSERT_TRUE(kubelet_->SetPhase("mnist-worker-1", "Succeeded").ok());
  ASSERT_TRUE(Eventually([&] { return Pods("mnist").size() == 2; })) << op->output();
  EXPECT_EQ(kube::Name(Pods("mnist")[0]), "mnist-worker-0");
  EXPECT_EQ(kube::Name(Pods("mnist")[1]), "mnist-worker-1");
  // The kubelet counts a deletion once its DELETE returned, which may be after the pod is gone.
  EXPECT_TRUE(Eventually([&] { return kubelet_->deletions_finished() >= 1; }))
      << kubelet_->deletions_finished();
  EXPECT_EQ(LeaseHolder(), "op-a");
  // Finished and cleaned up (the status counts no active pod), the job asks for nothing more: its
  // resourceVersion stays put.
  ASSERT_TRUE(Eventually([&] {
    const Json replicas = GetJob("mnist")["status"]["replicaStatuses"];
    return replicas["PS"].value("active", -1) == 0 && replicas["Worker"].value("active", -1) == 0;
  })) << GetJob("mnist").dump();
  const std::string version = kube::ResourceVersion(GetJob("mnist"));
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(kube::ResourceVersion(GetJob("mnist")), version);
}

TEST_F(OperatorApiserverTest, FailedPodsRestartUntilBackoffLimitThenFailWithTheCause) {
  auto op = StartOperator("op-a");
  Json job = Job("oom", 1, 1, "ExitCode");
  job["spec"]["runPolicy"]["backoffLimit"] = 1;
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return Pods("oom").size() == 2; })) << op->output();
  RunAll("oom");
  auto uid_of_worker = [&] {
    auto pod = client_->Get(kube::Pods(), ns_, "oom-worker-0");
    return pod.ok() ? kube::Uid(*pod) : std::string();
  };
  const std::string uid = uid_of_worker();
  ASSERT_TRUE(kubelet_->SetPhase("oom-worker-0", "Failed", 137, "OOMKilled").ok());
  ASSERT_TRUE(Eventually([&] {
    const std::string now = uid_of_worker();
    return !now.empty() && now != uid;
  })) << op->output();
  ASSERT_TRUE(Eventually([&] { return State("oom") == "Restarting"; })) << op->output();
  ASSERT_TRUE(kubelet_->SetPhase("oom-worker-0", "Failed", 137, "OOMKilled").ok());
  ASSERT_TRUE(Eventually([&] { return State("oom") == "Failed"; })) << op->output();
  const Json failed = Condition("oom", "Failed");
  EXPECT_EQ(failed["reason"], "BackoffLimitExceeded");
  EXPECT_TRUE(absl::StrContains(failed["message"].get<std::string>(),
                                "Worker 0 (pod oom-worker-0) failed: exit code 137 (OOMKilled)"))
      << failed;
  EXPECT_EQ(GetJob("oom")["status"]["replicaStatuses"]["Worker"]["restarts"], 1);
  ASSERT_TRUE(Eventually([&] { return Pods("oom").size() == 1; })) << op->output();
}

// Issue 31: an eviction (DisruptionTarget True) is no failure of the program: the pod is replaced
// without using the backoff budget, even with none; the CRD takes a podFailurePolicy, whose
// FailJob rule then ends the job on the program's own verdict, naming the rule.
TEST_F(OperatorApiserverTest, AnEvictedPodIsReplacedUncountedAndAFailJobRuleEndsTheJob) {
  auto op = StartOperator("op-a");
  Json job = Job("evict", 1, 1, "ExitCode");
  job["spec"]["runPolicy"]["backoffLimit"] = 0;
  job["spec"]["replicaSpecs"]["Worker"]["podFailurePolicy"] = {
      {"rules", Json::array({{{"action", "FailJob"},
                              {"onExitCodes", {{"operator", "In"}, {"values", {3}}}}}})}};
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return Pods("evict").size() == 2; })) << op->output();
  EXPECT_EQ(
      GetJob("evict")["spec"]["replicaSpecs"]["Worker"]["podFailurePolicy"]["rules"][0]["action"],
      "FailJob");  // kept by the schema
  RunAll("evict");
  ASSERT_TRUE(Eventually([&] { return State("evict") == "Running"; })) << op->output();
  auto uid_of_worker = [&] {
    auto pod = client_->Get(kube::Pods(), ns_, "evict-worker-0");
    return pod.ok() ? kube::Uid(*pod) : std::string();
  };
  const std::string uid = uid_of_worker();
  ASSERT_TRUE(kubelet_->Evict("evict-worker-0").ok());
  ASSERT_TRUE(Eventually([&] {
    const std::string now = uid_of_worker();
    return !now.empty() && now != uid;
  })) << op->output();
  const Json restarting = Condition("evict", "Restarting");
  EXPECT_TRUE(absl::StrContains(restarting.is_object() ? restarting.value("message", "") : "",
                                "(a disruption (DisruptionTarget): not counted against "
                                "backoffLimit)"))
      << restarting;
  EXPECT_EQ(GetJob("evict")["status"]["replicaStatuses"]["Worker"]["restarts"], 0);
  EXPECT_NE(State("evict"), "Failed");
  // The program's own verdict, by the rule.
  RunAll("evict");
  ASSERT_TRUE(kubelet_->SetPhase("evict-worker-0", "Failed", 3, "Error").ok());
  ASSERT_TRUE(Eventually([&] { return State("evict") == "Failed"; })) << op->output();
  const Json failed = Condition("evict", "Failed");
  EXPECT_EQ(failed["reason"], "ReplicaFailed");
  EXPECT_EQ(failed["message"],
            "Worker 0 (pod evict-worker-0) failed: exit code 3 (Error); podFailurePolicy rule 1 "
            "(FailJob on exit codes In [3]) fails the job");
}

// The schema refuses a rule the operator could not follow, in the API server's own words.
TEST_F(OperatorApiserverTest, TheSchemaRefusesABadPodFailurePolicy) {
  Json job = Job("badrule", 1, 1, "Never");
  job["spec"]["replicaSpecs"]["Worker"]["podFailurePolicy"] = {
      {"rules", Json::array({{{"action", "Retry"},
                              {"onExitCodes", {{"operator", "In"}, {"values", {300}}}}}})}};
  absl::StatusOr<Json> created = client_->Create(kube::TrainingJobs(), ns_, job);
  ASSERT_FALSE(created.ok());
  EXPECT_TRUE(absl::StrContains(created.status().message(), "Unsupported value: \"Retry\""))
      << created.status();
  EXPECT_TRUE(absl::StrContains(created.status().message(), "should be less than or equal to 255"))
      << created.status();
}

// Gang scheduling on the real API server, with the PodGroup resources installed
// (tests/control_plane/podgroup-crds.yaml; neither scheduler runs here): each job gets its PodGroup
// before its pods, owned by it, and its pods join it; deleting the job deletes the PodGroup.
TEST_F(OperatorApiserverTest, GangJobsGetTheirPodGroupAndTheirPodsJoinIt) {
  auto op = StartOperator("op-a");
  Json volcano = Job("vgang", 1, 2, "OnFailure");
  volcano["spec"]["runPolicy"]["schedulingPolicy"] = {{"gang", "volcano"}, {"queue", "research"}};
  volcano["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
      {"requests", {{"cpu", "250m"}, {"memory", "512Mi"}}}};
  CreateJob(volcano);
  Json cosched = Job("cgang", 1, 1, "OnFailure");
  cosched["spec"]["runPolicy"]["schedulingPolicy"] = {{"gang", "coscheduling"}};
  cosched["spec"]["runPolicy"]["schedulingTimeoutSeconds"] = 300;
  CreateJob(cosched);
  ASSERT_TRUE(Eventually([&] { return Pods("vgang").size() == 3 && Pods("cgang").size() == 2; }))
      << op->output();

  const Json group = client_->Get(kube::VolcanoPodGroups(), ns_, "vgang").value();
  EXPECT_EQ(kube::ControllerUid(group), kube::Uid(GetJob("vgang")));
  EXPECT_EQ(group["spec"], Json::parse(R"({"minMember": 3, "minTaskMember": {"ps": 1, "worker": 2},
      "minResources": {"cpu": "500m", "memory": "1073741824"}, "queue": "research"})"));
  for (const Json& pod : Pods("vgang")) {
    EXPECT_EQ(pod["spec"]["schedulerName"], "volcano") << kube::Name(pod);
    EXPECT_EQ(pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"], "vgang");
    EXPECT_EQ(pod["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"], "research");
  }
  const Json cgroup = client_->Get(kube::CoschedulingPodGroups(), ns_, "cgang").value();
  EXPECT_EQ(cgroup["spec"], Json::parse(R"({"minMember": 2, "scheduleTimeoutSeconds": 300})"));
  for (const Json& pod : Pods("cgang")) {
    EXPECT_EQ(pod["spec"]["schedulerName"], "scheduler-plugins-scheduler") << kube::Name(pod);
    EXPECT_EQ(kube::Label(pod, "scheduling.x-k8s.io/pod-group"), "cgang");
  }
  EXPECT_TRUE(
      Eventually([&] { return Events("SuccessfulCreate", "Normal", "PodGroup vgang") == 1; }));

  ASSERT_TRUE(client_->Delete(kube::TrainingJobs(), ns_, "vgang", {}).ok());
  EXPECT_TRUE(Eventually([&] {
    return client_->Get(kube::VolcanoPodGroups(), ns_, "vgang").status().code() ==
           absl::StatusCode::kNotFound;
  })) << "the garbage collector left the PodGroup";
}

// Kueue (plain-pod groups; Kueue itself does not run here): a job labelled with a queue makes its
// pods one Kueue pod group, and a pod Kueue preempts (it deletes it) comes back without using the
// backoff budget, even with none.
TEST_F(OperatorApiserverTest, AKueueQueuedJobsPodsFormOneGroupAndAPreemptedPodComesBackUncounted) {
  auto op = StartOperator("op-a");
  Json job = Job("kq", 1, 2, "OnFailure");
  job["metadata"]["labels"] = {{"kueue.x-k8s.io/queue-name", "team-a"}};
  job["spec"]["runPolicy"]["backoffLimit"] = 0;
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return Pods("kq").size() == 3; })) << op->output();
  for (const Json& pod : Pods("kq")) {
    EXPECT_EQ(kube::Label(pod, "kueue.x-k8s.io/queue-name"), "team-a") << kube::Name(pod);
    EXPECT_EQ(kube::Label(pod, "kueue.x-k8s.io/pod-group-name"), "kq");
    EXPECT_EQ(pod["metadata"]["annotations"]["kueue.x-k8s.io/pod-group-total-count"], "3");
  }
  RunAll("kq");
  ASSERT_TRUE(Eventually([&] { return State("kq") == "Running"; })) << op->output();
  auto uid_of = [&](const char* name) {
    auto pod = client_->Get(kube::Pods(), ns_, name);
    return pod.ok() ? kube::Uid(*pod) : std::string();
  };
  const std::string uid = uid_of("kq-worker-1");
  ASSERT_TRUE(client_->Delete(kube::Pods(), ns_, "kq-worker-1", {}).ok());  // Kueue preempts
  ASSERT_TRUE(Eventually([&] {
    const std::string now = uid_of("kq-worker-1");
    return !now.empty() && now != uid;
  })) << op->output();
  EXPECT_NE(State("kq"), "Failed");
  EXPECT_EQ(GetJob("kq")["status"]["replicaStatuses"]["Worker"]["restarts"], 0);
}

TEST_F(OperatorApiserverTest, DeadlineAndSuspendResume) {
  auto op = StartOperator("op-a");
  Json late = Job("late", 1, 1, "OnFailure");
  late["spec"]["runPolicy"]["activeDeadlineSeconds"] = 2;
  CreateJob(late);
  CreateJob(Job("pause", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("pause").size() == 2; })) << op->output();
  ASSERT_TRUE(SetSuspend("pause", true));
  ASSERT_TRUE(Eventually([&] { return State("pause") == "Suspended" && Pods("pause").empty(); }))
      << op->output();
  ASSERT_TRUE(SetSuspend("pause", false));
  ASSERT_TRUE(Eventually([&] { return Pods("pause").size() == 2; })) << op->output();
  // The pods come back before the status says why: the reconcile writes the status after them.
  EXPECT_TRUE(Eventually([&] { return Condition("pause", "Suspended")["reason"] == "Resumed"; }))
      << Condition("pause", "Suspended").dump();

  ASSERT_TRUE(Eventually([&] { return State("late") == "Failed"; })) << op->output();
  EXPECT_EQ(Condition("late", "Failed")["reason"], "DeadlineExceeded");
  EXPECT_TRUE(Eventually([&] { return Pods("late").empty(); }));
}

// Issue 31, item 3: for a job whose suspend is in use (it was suspended, then resumed: a queue
// admitting it), the scheduling timeout suspends it again through its spec, under the operator's
// own RBAC (deploy/base/rbac.yaml grants update on trainingjobs for this).
TEST_F(OperatorApiserverTest, ASchedulingTimeoutSuspendsAJobWhoseSuspendIsInUse) {
  auto op = StartOperator("op-a");
  Json job = Job("queued", 1, 1, "OnFailure");
  job["spec"]["runPolicy"]["suspend"] = true;
  job["spec"]["runPolicy"]["schedulingTimeoutSeconds"] = 2;
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return State("queued") == "Suspended"; })) << op->output();
  ASSERT_TRUE(
      SetSuspend("queued", false));  // admitted; the pods never run (nobody plays the kubelet)
  ASSERT_TRUE(Eventually([&] {
    return Condition("queued", "Suspended")["reason"] == "SchedulingTimeout" &&
           Pods("queued").empty();
  })) << op->output();
  EXPECT_EQ(GetJob("queued")["spec"]["runPolicy"]["suspend"], true);
  EXPECT_EQ(State("queued"), "Suspended");
  EXPECT_NE(Condition("queued", "Suspended")["message"].get<std::string>().find(
                "not every replica was running within schedulingTimeoutSeconds=2"),
            std::string::npos)
      << Condition("queued", "Suspended").dump();
  EXPECT_EQ(Condition("queued", "Failed"), Json()) << Condition("queued", "Failed").dump();
}

TEST_F(OperatorApiserverTest, RestartedOperatorCreatesNoDuplicates) {
  auto op = StartOperator("op-a");
  CreateJob(Job("steady", 1, 3, "OnFailure"));
  ASSERT_TRUE(Eventually([&] {
    return Pods("steady").size() == 4 && Services("steady").size() == 1;
  })) << op->output();
  auto uids = [&] {
    std::vector<std::string> out;
    for (const Json& pod : Pods("steady")) out.push_back(kube::Uid(pod));
    for (const Json& service : Services("steady")) out.push_back(kube::Uid(service));
    return out;
  };
  const std::vector<std::string> before = uids();
  op->Signal(SIGKILL);  // no graceful release: the next one waits out the Lease
  ASSERT_TRUE(op->Wait(milliseconds(5000)).has_value());
  op = StartOperator("op-b");
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "op-b"; })) << op->output();
  RunAll("steady");
  ASSERT_TRUE(Eventually([&] { return State("steady") == "Running"; })) << op->output();
  EXPECT_EQ(uids(), before);
  std::string metrics;
  ASSERT_TRUE(Eventually([&] {
    metrics = Metrics(*op);
    return absl::StrContains(metrics, "psflow_operator_pods_created_total");
  })) << op->output();
  EXPECT_TRUE(absl::StrContains(metrics, "psflow_operator_pods_created_total 0\n")) << metrics;
}

TEST_F(OperatorApiserverTest, TwoOperatorsOneLeaderAndFailover) {
  auto a = StartOperator("op-a");
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "op-a"; })) << a->output();
  auto b = StartOperator("op-b");
  CreateJob(Job("first", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("first").size() == 2; })) << a->output();
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_EQ(LeaseHolder(), "op-a");
  EXPECT_FALSE(absl::StrContains(b->output(), "caches synced")) << b->output();
  a->Signal(SIGTERM);
  auto exit = a->Wait(milliseconds(10000));
  ASSERT_TRUE(exit.has_value()) << a->output();
  EXPECT_TRUE(exit->ok()) << exit->Describe() << "\n" << a->output();
  ASSERT_TRUE(Eventually([&] { return LeaseHolder() == "op-b"; })) << b->output();
  CreateJob(Job("second", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("second").size() == 2; })) << b->output();
}

TEST_F(OperatorApiserverTest, ASpecPsflowCannotRunFailsAndTheOperatorGoesOn) {
  auto op = StartOperator("op-a");
  Json bad = Job("nowork", 1, 1, "Never");
  bad["spec"]["replicaSpecs"].erase("Worker");
  CreateJob(bad);
  // The schema admits a template without containers; the operator cannot run it.
  Json empty = Job("empty", 1, 1, "Never");
  empty["spec"]["replicaSpecs"]["Worker"]["template"] = Json::object();
  CreateJob(empty);
  // What the schema refuses never reaches the operator: the API server answers 422.
  Json odd = Job("odd", 1, 1, "Never");
  odd["spec"]["replicaSpecs"]["Worker"] = "three";
  absl::StatusOr<Json> refused = client_->Create(kube::TrainingJobs(), ns_, odd);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  ASSERT_TRUE(Eventually([&] { return State("nowork") == "Failed" && State("empty") == "Failed"; }))
      << op->output();
  EXPECT_EQ(Condition("nowork", "Failed")["message"],
            absl::StrCat("TrainingJob ", ns_,
                         "/nowork: spec.replicaSpecs: needs at least one Worker (or a Chief) "
                         "replica"));
  EXPECT_EQ(Condition("empty", "Failed")["reason"], "InvalidSpec");
  CreateJob(Job("fine", 1, 1, "Never"));
  ASSERT_TRUE(Eventually([&] { return Pods("fine").size() == 2; })) << op->output();
  EXPECT_TRUE(Pods("nowork").empty());
  EXPECT_TRUE(Pods("empty").empty());
}

TEST_F(OperatorApiserverTest, ServesMetricsHealthAndReadiness) {
  auto op = StartOperator("op-a");
  CreateJob(Job("m", 1, 1, "Never"));
  ASSERT_TRUE(Eventually([&] { return Pods("m").size() == 2; })) << op->output();
  const int port = op->MetricsPort();
  ASSERT_GT(port, 0) << op->output();
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/healthz", milliseconds(2000)).value_or(""), "ok\n");
  EXPECT_EQ(HttpGet("127.0.0.1", port, "/readyz", milliseconds(2000)).value_or(""), "ok\n");
  std::string text;
  ASSERT_TRUE(Eventually([&] {
    text = Metrics(*op);
    return absl::StrContains(text, "psflow_operator_pods_created_total 2");
  })) << text;
  for (const char* metric :
       {"psflow_operator_reconcile_total", "psflow_operator_reconcile_errors_total",
        "psflow_operator_reconcile_duration_seconds_bucket", "psflow_operator_workqueue_depth",
        "psflow_operator_jobs{state=\"Created\"}", "psflow_operator_leader 1",
        "psflow_operator_api_requests_total{code=\"201\",verb=\"create\"}",
        "psflow_operator_job_time_to_running_seconds_count"}) {
    EXPECT_TRUE(absl::StrContains(text, metric)) << metric << "\n" << text;
  }
}

// The test plays the workers too: one /metrics endpoint whose counters grow at a known rate,
// named by the pods' container port "metrics", with the pods' podIP 127.0.0.1.
TEST_F(OperatorApiserverTest, ThroughputIsMeasuredFromTheWorkersIntoStatus) {
  auto endpoint = MetricsEndpoint::Start("127.0.0.1", 0);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const Labels labels = {{"job", "lm"}, {"replica_type", "worker"}, {"replica_index", "0"}};
  prometheus::Counter& examples =
      AddCounter((*endpoint)->registry(), "psflow_worker_examples_total", "Examples.", labels);
  prometheus::Counter& words =
      AddCounter((*endpoint)->registry(), "psflow_worker_words_total", "Words.", labels);
  std::atomic<bool> stop{false};
  std::thread feeder([&] {  // 10000 examples/s, 200000 words/s
    while (!stop) {
      examples.Increment(1000);
      words.Increment(20000);
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  struct Join {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~Join() {
      stop = true;
      thread.join();
    }
  } join{stop, feeder};

  auto op = StartOperator("op-a", {"--throughput_interval_s=1"});
  Json job = Job("lm", 1, 1, "OnFailure");
  for (const char* type : {"PS", "Worker"}) {  // the PS points there too: it must not count
    job["spec"]["replicaSpecs"][type]["template"]["spec"]["containers"][0]["ports"] =
        Json::array({{{"name", "metrics"}, {"containerPort", (*endpoint)->port()}}});
  }
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return Pods("lm").size() == 2; })) << op->output();
  RunAll("lm");
  ASSERT_TRUE(Eventually([&] { return State("lm") == "Running"; })) << op->output();
  Json throughput;
  const bool near = Eventually(
      [&] {
        const Json status = GetJob("lm")["status"];
        if (!status.is_object() || !status.contains("throughput")) return false;
        throughput = status["throughput"];
        const double e = throughput.value("examplesPerSecond", 0.0);
        const double w = throughput.value("wordsPerSecond", 0.0);
        return e > 7000 && e < 13000 && w > 140000 && w < 260000;
      },
      milliseconds(30000));
  EXPECT_TRUE(near) << throughput << "\n" << op->output();
  RecordProperty("throughput", throughput.dump());
}

// A template the Pod API refuses fails the job at once, says why, and stops what did start.
TEST_F(OperatorApiserverTest, APodTemplateTheApiRefusesFailsTheJobAndCleansUp) {
  auto op = StartOperator("op-a");
  Json job = Job("badname", 1, 1, "OnFailure");
  // The parser checks the names psflow reads; a mount of a volume the pod lacks is the API's.
  job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["volumeMounts"] =
      Json::array({{{"name", "no-such-volume"}, {"mountPath", "/data"}}});
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return State("badname") == "Failed"; })) << op->output();
  const Json failed = Condition("badname", "Failed");
  EXPECT_EQ(failed["reason"], "InvalidPodTemplate");
  EXPECT_TRUE(absl::StrContains(failed["message"].get<std::string>(), "no-such-volume")) << failed;
  EXPECT_TRUE(absl::StrContains(failed["message"].get<std::string>(), "badname-worker-0"))
      << failed;
  ASSERT_TRUE(Eventually([&] { return Pods("badname").empty(); })) << op->output();
  EXPECT_TRUE(Eventually([&] { return Services("badname").empty(); })) << op->output();
  EXPECT_EQ(Events("InvalidPodTemplate", "Warning"), 1);
  // Nothing is retried: the refused create happened once.
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_TRUE(absl::StrContains(
      Metrics(*op), "psflow_operator_api_requests_total{code=\"422\",verb=\"create\"} 1\n"))
      << Metrics(*op);
}

// A pod the API server refuses for a while (a LimitRange's maximum: Forbidden, as a quota or Pod
// Security would) is retried with backoff; each refusal is told by a FailedCreate warning, the
// repeats counted on one Event; once the LimitRange goes, the pod is made.
TEST_F(OperatorApiserverTest, APodRefusedByALimitRangeIsRetriedUnderOneFailedCreateEvent) {
  const Json limits = {
      {"apiVersion", "v1"},
      {"kind", "LimitRange"},
      {"metadata", {{"name", "small"}}},
      {"spec", {{"limits", {{{"type", "Container"}, {"max", {{"cpu", "500m"}}}}}}}}};
  ASSERT_TRUE(client_->Create(LimitRanges(), ns_, limits).ok());
  auto op = StartOperator("op-a");
  Json job = Job("limited", 1, 1, "OnFailure");
  job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
      {"limits", {{"cpu", "1"}}}};
  CreateJob(job);
  const std::string said = "maximum cpu usage per Container is 500m";
  ASSERT_TRUE(Eventually([&] { return Events("FailedCreate", "Warning", said) >= 3; }))
      << op->output();
  int objects = 0;
  absl::StatusOr<kube::ObjectList> events = client_->List(kube::Events(), ns_, {});
  ASSERT_TRUE(events.ok()) << events.status();
  for (const Json& event : events->items) {
    if (event.value("reason", "") != "FailedCreate") continue;
    ++objects;
    // The request, the API server's answer and its message, as the operator's log has them.
    EXPECT_TRUE(absl::StartsWith(event.value("message", ""), "Error creating: POST /api/v1/"))
        << event;
    EXPECT_TRUE(absl::StrContains(event.value("message", ""),
                                  "403 Forbidden: pods \"limited-worker-0\" is forbidden"))
        << event;
    EXPECT_NE(event.value("firstTimestamp", ""), "");
  }
  EXPECT_EQ(objects, 1);
  EXPECT_EQ(Pods("limited").size(), 1u);  // the ps: within the maximum (none given: 500m)
  EXPECT_NE(State("limited"), "Failed");  // refused for now is not refused for good

  ASSERT_TRUE(client_->Delete(LimitRanges(), ns_, "small", {}).ok());
  EXPECT_TRUE(Eventually([&] { return Pods("limited").size() == 2; }, milliseconds(60000)))
      << op->output();
}

// The kubelet restarts a container in place (restartPolicy OnFailure): status says which index,
// how often and why; an event says so once per restart.
TEST_F(OperatorApiserverTest, InPlaceRestartsShowInStatusAndEvents) {
  auto op = StartOperator("op-a");
  CreateJob(Job("flaky", 1, 2, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("flaky").size() == 3; })) << op->output();
  RunAll("flaky");
  ASSERT_TRUE(kubelet_->RestartInPlace("flaky-worker-1", 137, "OOMKilled").ok());
  Json index;
  ASSERT_TRUE(Eventually([&] {
    const Json status = GetJob("flaky")["status"];
    if (!status.is_object() || !status.contains("replicaStatuses")) return false;
    const Json& worker = status["replicaStatuses"]["Worker"];
    if (!worker.contains("indexes")) return false;
    index = worker["indexes"][0];
    return status.value("restartCount", 0) == 1;
  })) << op->output();
  EXPECT_EQ(index["index"], 1);
  EXPECT_EQ(index["restarts"], 1);
  EXPECT_EQ(index["lastFailure"]["reason"], "OOMKilled");
  EXPECT_EQ(index["lastFailure"]["exitCode"], 137);
  EXPECT_EQ(index["lastFailure"]["pod"], "flaky-worker-1");
  ASSERT_TRUE(Eventually([&] { return Events("ReplicaRestartedInPlace", "Warning") == 1; }))
      << op->output();
  EXPECT_EQ(State("flaky"), "Running");
}

// A ps keeps its variables only in memory and in its checkpoints: restarted without a checkpoint
// it starts from nothing, and the job says so in a condition that stays and a Warning event, once.
// With a persistentVolumeClaim checkpoint, even a ps in a new pod restores it: a Normal event only.
TEST_F(OperatorApiserverTest, APsRestartedWithoutCheckpointShowsItLostTheProgressOnce) {
  auto op = StartOperator("op-a");
  CreateJob(Job("amnesia", 1, 1, "OnFailure"));
  Json kept = Job("kept", 1, 1, "OnFailure");
  kept["spec"]["replicaSpecs"]["PS"]["checkpoint"] = {{"volume", "persistentVolumeClaim"},
                                                      {"claimName", "kept-checkpoints"}};
  CreateJob(kept);
  ASSERT_TRUE(Eventually([&] { return Pods("amnesia").size() == 2 && Pods("kept").size() == 2; }))
      << op->output();
  RunAll("amnesia");
  RunAll("kept");
  ASSERT_TRUE(Eventually([&] {
    return State("amnesia") == "Running" && State("kept") == "Running";
  })) << op->output();

  ASSERT_TRUE(kubelet_->RestartInPlace("amnesia-ps-0", 137, "OOMKilled").ok());
  ASSERT_TRUE(Eventually([&] { return Condition("amnesia", "ProgressLost")["status"] == "True"; }))
      << op->output();
  const Json lost = Condition("amnesia", "ProgressLost");
  EXPECT_EQ(lost["reason"], "NoCheckpoint");
  EXPECT_TRUE(
      absl::StartsWith(lost["message"].get<std::string>(),
                       "PS 0 (pod amnesia-ps-0) was restarted in place after exit code 137 "
                       "(OOMKilled) and lost its training progress: it keeps no checkpoint"))
      << lost;
  EXPECT_EQ(State("amnesia"), "Running");
  ASSERT_TRUE(Eventually([&] { return Events("ProgressLost", "Warning") == 1; })) << op->output();

  // The claim's ps, deleted (a drain, by hand): the operator makes a new pod, whose ps restores.
  const std::string uid = kube::Uid(client_->Get(kube::Pods(), ns_, "kept-ps-0").value());
  ASSERT_TRUE(client_->Delete(kube::Pods(), ns_, "kept-ps-0", {}).ok());
  ASSERT_TRUE(Eventually([&] {
    absl::StatusOr<Json> pod = client_->Get(kube::Pods(), ns_, "kept-ps-0");
    return pod.ok() && kube::Uid(*pod) != uid;
  })) << op->output();
  ASSERT_TRUE(kubelet_->SetPhase("kept-ps-0", "Running").ok());
  ASSERT_TRUE(Eventually([&] { return Events("RestoringCheckpoint", "Normal") == 1; }))
      << op->output();
  EXPECT_TRUE(Condition("kept", "ProgressLost").is_null()) << Condition("kept", "ProgressLost");

  // Nothing is told twice, however often the jobs are looked at again.
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(Events("ProgressLost", "Warning"), 1);
  EXPECT_EQ(Events("RestoringCheckpoint", "Normal"), 1);
  EXPECT_EQ(GetJob("amnesia")["status"]["replicaStatuses"]["PS"]["observedPods"][0]["restarts"], 1)
      << GetJob("amnesia")["status"];
}

// Mutual TLS, on by default: one Secret holds the job's CA and each replica's certificate for
// its DNS names; each pod mounts only the CA certificate and its own certificate and key
// (read-only, 0440) and is given the flags; all owned by the job, so deleting it deletes them.
// spec.tls.enabled: false skips all of it and warns.
TEST_F(OperatorApiserverTest, TlsSecretsAreOwnedMountedAndPassedAndTheOptOutWarns) {
  auto op = StartOperator("op-a");
  CreateJob(Job("secure", 1, 1, "OnFailure"));
  Json plain = Job("plain", 1, 1, "OnFailure");
  plain["spec"]["tls"] = {{"enabled", false}};
  CreateJob(plain);
  ASSERT_TRUE(Eventually([&] { return Pods("secure").size() == 2 && Pods("plain").size() == 2; }))
      << op->output();
  const std::string uid = kube::Uid(GetJob("secure"));
  auto data = [](const Json& secret, const std::string& key) {
    std::string decoded;
    EXPECT_TRUE(absl::Base64Unescape(kube::StringAt(secret, "data", key.c_str()), &decoded)) << key;
    return decoded;
  };
  auto keys = [](const Json& secret) {
    std::vector<std::string> out;
    for (const auto& [key, value] : secret["data"].items()) out.push_back(key);
    return out;
  };
  const Json secret = client_->Get(kube::Secrets(), ns_, "secure-tls").value();
  EXPECT_EQ(secret["type"], "Opaque");
  EXPECT_EQ(keys(secret), (std::vector<std::string>{"ca.crt", "ca.key", "ps-0.crt", "ps-0.key",
                                                    "worker-0.crt", "worker-0.key"}));
  EXPECT_EQ(kube::ControllerUid(secret), uid);
  EXPECT_EQ(kube::Label(secret, "psflow.io/job-name"), "secure");
  const std::string ca_pem = data(secret, "ca.crt");
  EXPECT_TRUE(CertificateAuthority::FromPem({ca_pem, data(secret, "ca.key")}).ok());

  for (const std::string type : {"ps", "worker"}) {
    const std::string replica = "secure-" + type + "-0", stem = type + "-0";
    SCOPED_TRACE(replica);
    const std::string cert = data(secret, stem + ".crt");
    EXPECT_TRUE(VerifyCertificate(ca_pem, cert).ok());
    EXPECT_TRUE(CheckKeyMatchesCertificate(cert, data(secret, stem + ".key")).ok());
    const std::string host = replica + ".secure", in_ns = host + "." + ns_;
    EXPECT_EQ(SubjectAltNames(cert).value(),
              (std::vector<std::string>{"DNS:" + host, "DNS:" + in_ns, "DNS:" + in_ns + ".svc",
                                        "DNS:" + in_ns + ".svc.cluster.local"}));

    const Json pod = client_->Get(kube::Pods(), ns_, replica).value();
    const Json& volumes = pod["spec"]["volumes"];
    int tls_volumes = 0;
    for (const Json& v : volumes) {
      if (v["name"] != "psflow-tls") continue;
      ++tls_volumes;
      EXPECT_EQ(v["secret"]["secretName"], "secure-tls");
      EXPECT_EQ(v["secret"]["defaultMode"], 0440);
      // Only its own: never the CA key, never another replica's key.
      EXPECT_EQ(v["secret"]["items"], Json::array({{{"key", "ca.crt"}, {"path", "ca.crt"}},
                                                   {{"key", stem + ".crt"}, {"path", "tls.crt"}},
                                                   {{"key", stem + ".key"}, {"path", "tls.key"}}}));
    }
    EXPECT_EQ(tls_volumes, 1) << volumes;
    const Json& container = pod["spec"]["containers"][0];
    EXPECT_TRUE(
        absl::StrContains(container["volumeMounts"].dump(),
                          R"({"mountPath":"/etc/psflow/tls","name":"psflow-tls","readOnly":true})"))
        << container["volumeMounts"];
    EXPECT_EQ(container["args"],
              Json({"--tls_ca=/etc/psflow/tls/ca.crt", "--tls_cert=/etc/psflow/tls/tls.crt",
                    "--tls_key=/etc/psflow/tls/tls.key"}));
  }

  // The opt-out: no Secret, no mount, no flags, and a Warning.
  EXPECT_TRUE(Selected(kube::Secrets(), "plain").empty());
  for (const Json& pod : Pods("plain")) {
    EXPECT_FALSE(absl::StrContains(pod["spec"].dump(), "psflow-tls")) << pod["spec"];
    EXPECT_FALSE(absl::StrContains(pod["spec"].dump(), "--tls_")) << pod["spec"];
  }
  ASSERT_TRUE(Eventually([&] { return Events("TLSDisabled", "Warning") == 1; })) << op->output();
  EXPECT_EQ(Selected(kube::Secrets(), "secure").size(), 1u);

  // Deleting the job deletes its Secrets (kube-controller-manager's garbage collector).
  ASSERT_TRUE(client_->Delete(kube::TrainingJobs(), ns_, "secure", {}).ok());
  EXPECT_TRUE(Eventually([&] { return Selected(kube::Secrets(), "secure").empty(); }))
      << Selected(kube::Secrets(), "secure").size();
}

// Least privilege for real: a user whose Role lacks `list pods` is told so, in one line.
TEST_F(OperatorApiserverTest, RbacForbiddenExitsNamingWhatIsMissing) {
  const Json role = {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "Role"},
      {"metadata", {{"name", "almost-operator"}}},
      {"rules",
       Json::array({{{"apiGroups", {"psflow.io"}},
                     {"resources", {"trainingjobs", "trainingjobs/status"}},
                     {"verbs", {"get", "list", "watch", "update"}}},
                    {{"apiGroups", {""}},
                     {"resources", {"services", "events"}},
                     {"verbs", {"get", "list", "watch", "create", "delete"}}},
                    {{"apiGroups", {""}}, {"resources", {"pods"}}, {"verbs", {"get", "create"}}},
                    {{"apiGroups", {"coordination.k8s.io"}},
                     {"resources", {"leases"}},
                     {"verbs", {"get", "create", "update"}}}})}};
  const Json binding = {
      {"apiVersion", "rbac.authorization.k8s.io/v1"},
      {"kind", "RoleBinding"},
      {"metadata", {{"name", "almost-operator"}}},
      {"roleRef",
       {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "almost-operator"}}},
      {"subjects", Json::array({{{"apiGroup", "rbac.authorization.k8s.io"},
                                 {"kind", "User"},
                                 {"name", kubereal::ControlPlane::kLimitedUser}}})}};
  const kube::Resource roles{"rbac.authorization.k8s.io", "v1", "roles", "Role"};
  const kube::Resource bindings{"rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"};
  ASSERT_TRUE(client_->Create(roles, ns_, role).ok());
  ASSERT_TRUE(client_->Create(bindings, ns_, binding).ok());
  auto op = StartOperator("op-a", {}, plane_->limited_kubeconfig());
  auto exit = op->Wait(milliseconds(30000));
  ASSERT_TRUE(exit.has_value()) << op->output();
  EXPECT_EQ(exit->code, 1);
  const auto lines = testing::LinesWith(op->output(), "psflow-operator: RBAC forbids");
  ASSERT_EQ(lines.size(), 1u) << op->output();
  EXPECT_TRUE(absl::StrContains(lines[0], "cannot list resource \"pods\"")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[0], kubereal::ControlPlane::kLimitedUser)) << lines[0];
}

// spec.networkPolicy.enabled: the job gets its NetworkPolicy before its pods, with the job's
// selectors and named ports, owned by the job and gone with it (ttlSecondsAfterFinished, then the
// garbage collector); a job without it gets none.
TEST_F(OperatorApiserverTest, NetworkPolicyOnlyWhenOptedInAndDeletedWithTheJob) {
  auto op = StartOperator("op-a");
  Json fenced = Job("fenced", 1, 1, "OnFailure");
  const Json monitoring =
      Json::array({{{"namespaceSelector",
                     {{"matchLabels", {{"kubernetes.io/metadata.name", "monitoring"}}}}}}});
  fenced["spec"]["networkPolicy"] = {{"enabled", true}, {"metricsFrom", monitoring}};
  fenced["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 1;
  CreateJob(fenced);
  CreateJob(Job("open", 1, 1, "OnFailure"));
  ASSERT_TRUE(Eventually([&] { return Pods("fenced").size() == 2 && Pods("open").size() == 2; }))
      << op->output();
  absl::StatusOr<kube::ObjectList> policies = client_->List(kube::NetworkPolicies(), ns_, {});
  ASSERT_TRUE(policies.ok()) << policies.status();
  ASSERT_EQ(policies->items.size(), 1u);
  const Json& policy = policies->items[0];
  EXPECT_EQ(kube::Name(policy), "fenced-network");
  EXPECT_EQ(kube::ControllerUid(policy), kube::Uid(GetJob("fenced")));
  const Json job_pods = {{"matchLabels", {{"psflow.io/job-name", "fenced"}}}};
  EXPECT_EQ(policy["spec"]["podSelector"], job_pods);
  EXPECT_EQ(policy["spec"]["policyTypes"], Json::array({"Ingress"}));
  EXPECT_EQ(policy["spec"]["ingress"],
            Json::array({{{"from", Json::array({{{"podSelector", job_pods}}})},
                          {"ports", Json::array({{{"protocol", "TCP"}, {"port", "psflow-port"}},
                                                 {{"protocol", "TCP"}, {"port", "psflow-bulk"}}})}},
                         {{"from", monitoring},
                          {"ports", Json::array({{{"protocol", "TCP"}, {"port", "metrics"}}})}}}));
  EXPECT_TRUE(Eventually(
      [&] { return Events("SuccessfulCreate", "Normal", "NetworkPolicy fenced-network") == 1; }));
  RunAll("fenced");
  ASSERT_TRUE(kubelet_->SetPhase("fenced-worker-0", "Succeeded").ok());
  ASSERT_TRUE(Eventually([&] { return State("fenced") == "<gone>"; })) << op->output();
  EXPECT_TRUE(Eventually([&] {
    absl::StatusOr<Json> left = client_->Get(kube::NetworkPolicies(), ns_, "fenced-network");
    return left.status().code() == absl::StatusCode::kNotFound;
  })) << "the garbage collector left fenced-network";
}

// In a namespace that enforces the restricted Pod Security Standard, the API server refuses a pod
// without the settings (the PodSecurity admission plugin is on), and admits the operator's own
// pod (deploy/base/deployment.yaml's template) and a job's pods, a ps checkpoint volume included.
TEST_F(OperatorApiserverTest, RestrictedNamespaceAdmitsTheOperatorsAndTheJobsPods) {
  absl::StatusOr<Json> ns = client_->Get(Namespaces(), "", ns_);
  ASSERT_TRUE(ns.ok()) << ns.status();
  (*ns)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] = "restricted";
  ASSERT_TRUE(client_->Update(Namespaces(), "", *ns).ok());
  const Json plain = {
      {"metadata", {{"name", "plain"}}},
      {"spec", {{"containers", Json::array({{{"name", "c"}, {"image", "busybox"}}})}}}};
  absl::StatusOr<Json> refused = client_->Create(kube::Pods(), ns_, plain);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "violates PodSecurity \"restricted"))
      << refused.status();

  const Json deployment = DeployBaseObject("deployment.yaml", "Deployment", "psflow-operator");
  Json operator_pod = {{"metadata", {{"name", "psflow-operator"}}},
                       {"spec", deployment["spec"]["template"]["spec"]}};
  operator_pod["spec"]["serviceAccountName"] = "default";
  absl::StatusOr<Json> admitted = client_->Create(kube::Pods(), ns_, operator_pod);
  EXPECT_TRUE(admitted.ok()) << admitted.status();

  auto op = StartOperator("op-a");
  Json job = Job("safe", 1, 1, "OnFailure");
  job["spec"]["replicaSpecs"]["PS"]["checkpoint"] = {{"sizeLimit", "1Gi"}};
  CreateJob(job);
  ASSERT_TRUE(Eventually([&] { return Pods("safe").size() == 2 && State("safe") == "Created"; }))
      << op->output();
  absl::StatusOr<Json> ps = client_->Get(kube::Pods(), ns_, "safe-ps-0");
  ASSERT_TRUE(ps.ok()) << ps.status();
  const Json& container = (*ps)["spec"]["containers"][0];
  EXPECT_EQ(container["args"].back(), "--checkpoint_dir=/var/lib/psflow/checkpoints");
  EXPECT_EQ(container["securityContext"]["readOnlyRootFilesystem"], true);
  EXPECT_EQ((*ps)["spec"]["securityContext"]["runAsUser"], 65532);
}

}  // namespace
}  // namespace psflow
