// A TrainingJob behind Kueue on the real node (issue 31, item 2). Kueue cannot run here, so the
// test plays its two parts, each through the real API server:
//  - its pod webhook: a MutatingWebhookConfiguration that the API server calls for every pod
//    made with the kueue.x-k8s.io/queue-name label in this test's namespace; the webhook (an
//    HTTPS server in this process) adds the kueue.x-k8s.io/admission scheduling gate and the
//    kueue.x-k8s.io/managed label, as Kueue's does for plain pods;
//  - its admission: once the group may run, Kueue removes the gates (here: a pod update).
// The real kube-scheduler (PodSchedulingReadiness on, as on the API server) leaves gated pods
// alone; the operator says Queued, its scheduling timeout does not run while the job waits, and
// once admitted the job trains; a preemption (Kueue deletes the pods) queues it again.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/certificates.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/kube/scripted_http_server.h"
#include "tests/node/node_test.h"
#include "tests/operator_process.h"
#include "tests/test_util.h"

namespace psflow::node {
namespace {

using kube::Json;
using testing::Eventually;
using testing::OperatorProcess;

constexpr char kQueueLabel[] = "kueue.x-k8s.io/queue-name";
constexpr char kAdmissionGate[] = "kueue.x-k8s.io/admission";

// The AdmissionReview answer of Kueue's pod webhook for `review`'s pod: the admission gate and
// the managed label added.
Json KueueWebhookAnswer(const Json& review) {
  const Json& pod = review["request"]["object"];
  Json patch = Json::array();
  const Json gate = {{"name", kAdmissionGate}};
  if (pod["spec"].contains("schedulingGates")) {
    patch.push_back({{"op", "add"}, {"path", "/spec/schedulingGates/-"}, {"value", gate}});
  } else {
    patch.push_back(
        {{"op", "add"}, {"path", "/spec/schedulingGates"}, {"value", Json::array({gate})}});
  }
  patch.push_back(
      {{"op", "add"}, {"path", "/metadata/labels/kueue.x-k8s.io~1managed"}, {"value", "true"}});
  return {{"apiVersion", "admission.k8s.io/v1"},
          {"kind", "AdmissionReview"},
          {"response",
           {{"uid", review["request"]["uid"]},
            {"allowed", true},
            {"patchType", "JSONPatch"},
            {"patch", absl::Base64Escape(patch.dump())}}}};
}

class QueueOnNodeTest : public NodeTest {
 protected:
  QueueOnNodeTest() : NodeTest("node-queue") {}

  void TearDown() override {
    if (!webhook_name_.empty()) {
      std::string out;
      plane_->Kubectl({"delete", "mutatingwebhookconfiguration", webhook_name_, "--wait=false"},
                      &out);
    }
    webhook_.reset();
    NodeTest::TearDown();
  }

  // Starts the webhook server and registers it with the API server for this namespace's pods
  // that carry the queue label. Fails the test (fatally) when it cannot.
  void PlayKueueWebhook() {
    absl::StatusOr<CertificateAuthority> ca =
        CertificateAuthority::Create("kueue-webhook-ca", absl::Hours(1));
    ASSERT_TRUE(ca.ok()) << ca.status();
    absl::StatusOr<PemCertificate> leaf =
        ca->Issue({"kueue-webhook", {}, {"127.0.0.1"}}, absl::Hours(1));
    ASSERT_TRUE(leaf.ok()) << leaf.status();
    dir_ = std::filesystem::path(::testing::TempDir()) / ns();
    std::filesystem::create_directories(dir_);
    const auto write = [&](const std::string& name, const std::string& text) {
      std::ofstream(dir_ / name) << text;
      return (dir_ / name).string();
    };
    kube::ScriptedHttpServer::Tls tls;
    tls.cert_file = write("tls.crt", leaf->certificate);
    tls.key_file = write("tls.key", leaf->private_key);
    absl::StatusOr<std::unique_ptr<kube::ScriptedHttpServer>> server =
        kube::ScriptedHttpServer::Start(
            [](const kube::HttpExchange& request, kube::ScriptedHttpServer::Responder& out) {
              const Json review = Json::parse(request.body, nullptr, /*allow_exceptions=*/false);
              if (!review.is_object() || !review.contains("request")) {
                return out.Send(400, "not an AdmissionReview");
              }
              out.Send(200, KueueWebhookAnswer(review).dump());
            },
            &tls);
    ASSERT_TRUE(server.ok()) << server.status();
    webhook_ = *std::move(server);
    webhook_name_ = "kueue-play-" + ns();
    const Json config = {
        {"apiVersion", "admissionregistration.k8s.io/v1"},
        {"kind", "MutatingWebhookConfiguration"},
        {"metadata", {{"name", webhook_name_}}},
        {"webhooks",
         Json::array(
             {{{"name", "mpod.kueue.x-k8s.io"},
               {"clientConfig",
                {{"url", webhook_->url() + "/mutate--v1-pod"},
                 {"caBundle", absl::Base64Escape(ca->pem().certificate)}}},
               {"rules", Json::array({{{"apiGroups", {""}},
                                       {"apiVersions", {"v1"}},
                                       {"operations", {"CREATE"}},
                                       {"resources", {"pods"}}}})},
               {"namespaceSelector", {{"matchLabels", {{"kubernetes.io/metadata.name", ns()}}}}},
               {"objectSelector",
                {{"matchExpressions",
                  Json::array({{{"key", kQueueLabel}, {"operator", "Exists"}}})}}},
               {"admissionReviewVersions", {"v1"}},
               {"sideEffects", "None"},
               {"failurePolicy", "Fail"},
               {"timeoutSeconds", 10}}})}};
    std::string out;
    ASSERT_EQ(plane_->Kubectl({"apply", "-f", write("webhook.json", config.dump())}, &out), 0)
        << out;
  }

  // The scheduling gates of the job's pods, by pod; a pod without gates maps to none.
  std::map<std::string, std::vector<std::string>> Gates(const std::string& job) {
    std::map<std::string, std::vector<std::string>> gates;
    kube::ListOptions options;
    options.label_selector = "psflow.io/job-name=" + job;
    const absl::StatusOr<kube::ObjectList> list = client_->List(kube::Pods(), ns(), options);
    if (!list.ok()) return gates;
    for (const Json& pod : list->items) {
      std::vector<std::string>& names = gates[kube::Name(pod)];
      for (const Json& g : pod["spec"].value("schedulingGates", Json::array())) {
        names.push_back(g.value("name", ""));
      }
    }
    return gates;
  }

  // Kueue admits the group: every gated pod's gates removed. False when an update keeps failing.
  // Kueue keeps an admitted workload's pods ungated, so the test calls this again while the job
  // stays admitted: a pod of the group made again then (the operator re-makes a pod whose status
  // is not its own, and the webhook gates it) is let go too.
  bool Admit(const std::string& job) {
    for (const auto& [name, gates] : Gates(job)) {
      if (gates.empty()) continue;
      bool done = false;
      for (int attempt = 0; attempt < 10 && !done; ++attempt) {
        absl::StatusOr<Json> pod = client_->Get(kube::Pods(), ns(), name);
        if (!pod.ok()) break;
        (*pod)["spec"]["schedulingGates"] = Json::array();
        done = client_->Update(kube::Pods(), ns(), *pod).ok();
      }
      if (!done) return false;
    }
    return true;
  }

  // The job's condition `type` ("" when it has none), as "<status>/<reason>".
  std::string Condition(const std::string& job, const std::string& type) {
    const Json got = client_->Get(kube::TrainingJobs(), ns(), job).value_or(Json());
    if (!got.is_object() || !got.contains("status")) return "";
    for (const Json& c : got["status"].value("conditions", Json::array())) {
      if (c.value("type", "") == type) {
        return absl::StrCat(c.value("status", ""), "/", c.value("reason", ""));
      }
    }
    return "";
  }

  std::filesystem::path dir_;
  std::unique_ptr<kube::ScriptedHttpServer> webhook_;
  std::string webhook_name_;
};

// Kueue's plain-pod flow end to end: gated at creation, queued past the scheduling timeout
// without failing, trained once admitted; then the workload preempted (Kueue deletes its pods):
// the pods come back gated, the job queued again, and trains again once re-admitted, the
// preemption counted as no restart. (In a loaded CI run a pod re-made here once carried the deleted
// pod's status, exit 0 included, and was counted as a ps restart: the operator now makes such a
// pod again, counted nowhere; docs/operator.md, Lifecycle.)
TEST_F(QueueOnNodeTest, PodsKueueHoldsBackWaitPastTheTimeoutAndTrainEachTimeTheyAreAdmitted) {
  PlayKueueWebhook();
  Json job = JobOnNode("deploy/examples/mnist-mlp.yaml");
  ASSERT_TRUE(job.is_object()) << job;
  FitToNode(job, /*steps=*/10000000, {"--log_every_steps=200"});
  job["metadata"]["labels"][kQueueLabel] = "team-a";
  job["spec"]["runPolicy"]["schedulingTimeoutSeconds"] = 30;
  ASSERT_TRUE(client_->Create(kube::TrainingJobs(), ns(), job).ok());
  OperatorProcess op(plane_->kubeconfig(), "op-node-queue", ns(), {"--namespace=" + ns()});

  // Every pod gated by the webhook, and the job Queued.
  const auto all_gated = [&] {
    const auto gates = Gates("mnist-mlp");
    if (gates.size() != 2) return false;
    for (const auto& [name, g] : gates) {
      if (g != std::vector<std::string>{kAdmissionGate}) return false;
    }
    return Condition("mnist-mlp", "Queued") == "True/SchedulingGated";
  };
  ASSERT_TRUE(Eventually(all_gated, std::chrono::seconds(60))) << Diagnosis(op.output());
  // Past the scheduling timeout, queued: not failed, and the scheduler has placed nothing.
  std::this_thread::sleep_for(std::chrono::seconds(40));
  EXPECT_EQ(State("mnist-mlp"), "Queued") << Diagnosis(op.output());
  EXPECT_EQ(Condition("mnist-mlp", "Queued"), "True/SchedulingGated");
  for (const auto& [name, g] : Gates("mnist-mlp")) {
    const Json pod = client_->Get(kube::Pods(), ns(), name).value_or(Json());
    EXPECT_EQ(pod["spec"].value("nodeName", ""), "") << name;
    EXPECT_EQ(kube::Label(pod, "kueue.x-k8s.io/managed"), "true") << name;
  }

  // Admitted (and kept so) until the job trains.
  const auto trains = [&] {
    return Admit("mnist-mlp") && State("mnist-mlp") == "Running" &&
           LastGlobalStep(Logs("mnist-mlp-worker-0")) >= 200;
  };
  ASSERT_TRUE(Eventually(trains, std::chrono::minutes(3)))
      << Logs("mnist-mlp-worker-0") << Diagnosis(op.output());
  EXPECT_EQ(Condition("mnist-mlp", "Queued"), "False/Admitted");

  // Preempted: Kueue deletes the group's pods. They come back gated and the job waits again.
  std::string out;
  ASSERT_EQ(plane_->Kubectl({"delete", "pods", "-n", ns(), "-l", "psflow.io/job-name=mnist-mlp",
                             "--wait=false"},
                            &out),
            0)
      << out;
  ASSERT_TRUE(Eventually(all_gated, std::chrono::minutes(2))) << Diagnosis(op.output());
  EXPECT_EQ(State("mnist-mlp"), "Queued");  // not Running: its pods wait
  ASSERT_TRUE(Eventually(trains, std::chrono::minutes(3)))
      << Logs("mnist-mlp-worker-0") << Diagnosis(op.output());
  const Json stored = client_->Get(kube::TrainingJobs(), ns(), "mnist-mlp").value_or(Json());
  ASSERT_TRUE(stored.is_object()) << Diagnosis(op.output());
  EXPECT_EQ(stored["status"].value("restartCount", -1), 0) << stored["status"].dump(2);
  // Queued and admitted twice; a pod the operator re-made for a status not its own (the test
  // node's kubelet, docs/operator.md) may queue the job once more each.
  const std::string events = EventReasons();
  const size_t stale = testing::LinesWith(events, "StaleStatus").size();
  for (const char* reason : {"Queued", "Admitted"}) {
    EXPECT_GE(testing::LinesWith(events, reason).size(), 2u) << events;
    EXPECT_LE(testing::LinesWith(events, reason).size(), 2u + stale) << events;
  }
  EXPECT_GE(webhook_->requests().size(), 4u);
}

}  // namespace
}  // namespace psflow::node
