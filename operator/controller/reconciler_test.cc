// The reconciler against the in-memory API (tests/kube: the same store the test API server
// serves), read through DirectView (always fresh). The kubelet is played by the store's
// SetPodPhase/RestartContainer; time is a test clock.
#include "operator/controller/reconciler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/certificates.h"
#include "core/cluster_spec.h"
#include "operator/controller/cluster_view.h"
#include "operator/controller/job_certificates.h"
#include "operator/controller/job_status.h"
#include "operator/controller/replica_objects.h"
#include "operator/kube/object_meta.h"
#include "tests/kube/memory_kube_client.h"
#include "tests/kube/object_store.h"

namespace psflow::controller {
namespace {

using kube::Json;

// A job of `ps` PS and `workers` Worker replicas (and a Chief when `chief`).
Json MakeJob(const std::string& name, int ps, int workers, const std::string& restart_policy,
             bool chief = false) {
  auto replica = [&](int replicas, const std::string& image) {
    return Json{
        {"replicas", replicas},
        {"restartPolicy", restart_policy},
        {"template",
         {{"metadata", {{"annotations", {{"team", "ml"}}}}},
          {"spec",
           {{"containers", Json::array({{{"name", "psflow"},
                                         {"image", image},
                                         {"env", Json::array({{{"name", "KEEP"}, {"value", "1"}}})},
                                         {"resources", {{"limits", {{"cpu", "1"}}}}}}})}}}}}};
  };
  Json job = {
      {"apiVersion", "psflow.io/v1alpha1"},
      {"kind", "TrainingJob"},
      {"metadata", {{"name", name}, {"namespace", "default"}}},
      {"spec",
       {{"replicaSpecs",
         {{"PS", replica(ps, "psflow/ps:1")}, {"Worker", replica(workers, "psflow/worker:1")}}}}}};
  if (chief) job["spec"]["replicaSpecs"]["Chief"] = replica(1, "psflow/worker:1");
  return job;
}

class ReconcilerTest : public ::testing::Test {
 protected:
  ReconcilerTest()
      : store_(StoreOptions(&now_)),
        client_(&store_),
        view_(client_),
        expectations_(absl::Minutes(5), [this] { return now_; }),
        events_(client_, "psflow-operator", [this] { return now_; }),
        reconciler_(client_, view_, expectations_, events_, [this] { return now_; }) {
    store_.RegisterBuiltins();
    store_.RegisterResource(kube::TrainingJobs(), /*has_status_subresource=*/true);
  }

  static kubetest::ObjectStore::Options StoreOptions(absl::Time* now) {
    kubetest::ObjectStore::Options options;
    options.clock = [now] { return *now; };
    options.seed = 7;
    return options;
  }

  void Create(const Json& job) {
    ASSERT_TRUE(client_.Create(kube::TrainingJobs(), "default", job).ok());
  }

  // One pass with a fresh view: what the informers would have observed is observed.
  ReconcileResult Pass(const std::string& name) {
    ReconcileResult r = reconciler_.Reconcile("default", name);
    expectations_.Forget(kube::Key("default", name));
    return r;
  }

  Json Job(const std::string& name) {
    return client_.Get(kube::TrainingJobs(), "default", name).value();
  }
  JobStatus Status(const std::string& name) { return JobStatus::FromJson(Job(name)["status"]); }

  std::vector<std::string> Names(const kube::Resource& resource) {
    std::vector<std::string> names;
    const kube::ObjectList list = client_.List(resource, "default", {}).value();
    for (const Json& o : list.items) {
      names.push_back(kube::Name(o));
    }
    return names;
  }

  void SetPhase(const std::string& pod, const std::string& phase, int exit_code = 0,
                const std::string& reason = "") {
    ASSERT_TRUE(store_.SetPodPhase("default", pod, phase, exit_code, reason).ok()) << pod;
  }

  // Edits the job's spec as `kubectl edit` would.
  void EditSpec(const std::string& name, const std::function<void(Json&)>& edit) {
    Json job = Job(name);
    edit(job["spec"]);
    ASSERT_TRUE(client_.Update(kube::TrainingJobs(), "default", job).ok());
  }

  // The messages of the job's events with `reason`, each as "<type>: <message>", oldest first.
  std::vector<std::string> Events(const std::string& reason) {
    std::vector<std::string> out;
    const kube::ObjectList events = client_.List(kube::Events(), "default", {}).value();
    for (const Json& e : events.items) {
      if (e["reason"] != reason) continue;
      // Once per time recorded: a repeat raises the stored Event's count.
      for (int64_t n = 0; n < e.value("count", int64_t{1}); ++n) {
        out.push_back(
            absl::StrCat(e["type"].get<std::string>(), ": ", e["message"].get<std::string>()));
      }
    }
    return out;
  }

  // The next `n` status writes of TrainingJobs are refused with a 409, as when another writer
  // bumped the job between a pass's read and its write.
  void RefuseStatusWrites(int n) {
    auto left = std::make_shared<int>(n);
    client_.SetFault([left](absl::string_view verb, const kube::Resource& r, absl::string_view) {
      if (verb == "update_status" && r.plural == "trainingjobs" && *left > 0) {
        --*left;
        return absl::AbortedError("Operation cannot be fulfilled: the object has been modified");
      }
      return absl::OkStatus();
    });
  }

  // Every `verb` ("create", "delete", ...) on `plural` (of object `name`, when given) fails with
  // `error` until client_.SetFault(nullptr).
  void Refuse(std::string verb, std::string plural, absl::Status error, std::string name = "") {
    client_.SetFault([=](absl::string_view v, const kube::Resource& r, absl::string_view n) {
      if (v == verb && r.plural == plural && (name.empty() || n == name)) return error;
      return absl::OkStatus();
    });
  }

  // Runs every pod of the job.
  void RunAll(const std::string& job) {
    for (const std::string& pod : Names(kube::Pods())) {
      if (absl::StartsWith(pod, job + "-")) SetPhase(pod, "Running");
    }
  }

  // Creates `job`, reconciles it, marks its pods Running and reconciles again: a job whose
  // replicas all run.
  void CreateRunning(const Json& job) {
    Create(job);
    const std::string name = job["metadata"]["name"].get<std::string>();
    ASSERT_TRUE(Pass(name).status.ok());
    RunAll(name);
    ASSERT_TRUE(Pass(name).status.ok());
  }

  std::string Env(const Json& pod, const std::string& name) {
    for (const Json& e : pod["spec"]["containers"][0]["env"]) {
      if (e["name"] == name) return e["value"];
    }
    return "<unset>";
  }

  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
  kubetest::ObjectStore store_;
  kubetest::MemoryKubeClient client_;
  DirectView view_;
  Expectations expectations_;
  EventRecorder events_;
  Reconciler reconciler_;
};

TEST_F(ReconcilerTest, CreatesOnePodPerReplicaAndOneHeadlessServiceNamingThemInTfConfig) {
  Create(MakeJob("mnist", 1, 2, "OnFailure"));
  ReconcileResult r = Pass("mnist");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 3);
  EXPECT_EQ(r.services_created, 1);
  const std::vector<std::string> expected = {"mnist-ps-0", "mnist-worker-0", "mnist-worker-1"};
  EXPECT_EQ(Names(kube::Pods()), expected);
  EXPECT_EQ(Names(kube::Services()), std::vector<std::string>{"mnist"});

  const Json job = Job("mnist");
  const Json pod = client_.Get(kube::Pods(), "default", "mnist-worker-1").value();
  EXPECT_EQ(kube::Label(pod, kJobNameLabel), "mnist");
  EXPECT_EQ(kube::Label(pod, kReplicaTypeLabel), "worker");
  EXPECT_EQ(kube::Label(pod, kReplicaIndexLabel), "1");
  EXPECT_EQ(kube::Label(pod, kJobRoleLabel), "");
  EXPECT_EQ(
      kube::Label(client_.Get(kube::Pods(), "default", "mnist-worker-0").value(), kJobRoleLabel),
      "chief");
  EXPECT_EQ(pod["metadata"]["annotations"]["team"], "ml");  // the template passes through
  EXPECT_EQ(pod["spec"]["containers"][0]["resources"]["limits"]["cpu"], "1");
  EXPECT_EQ(pod["spec"]["restartPolicy"], "OnFailure");
  EXPECT_EQ(kube::ControllerUid(pod), kube::Uid(job));
  EXPECT_EQ(pod["metadata"]["ownerReferences"][0]["kind"], "TrainingJob");
  EXPECT_EQ(Env(pod, "KEEP"), "1");
  EXPECT_EQ(Env(pod, "PSFLOW_JOB_NAME"), "mnist");
  EXPECT_EQ(Env(pod, "PSFLOW_REPLICA_TYPE"), "worker");
  EXPECT_EQ(Env(pod, "PSFLOW_REPLICA_INDEX"), "1");
  EXPECT_EQ(Env(pod, "PSFLOW_METRICS_PORT"), "9100");
  absl::StatusOr<ClusterSpec> tf = ParseTfConfig(Env(pod, "TF_CONFIG"));
  ASSERT_TRUE(tf.ok()) << tf.status();
  EXPECT_EQ(tf->Tasks("ps"), std::vector<std::string>{"mnist-ps-0.mnist.default.svc:2222"});
  EXPECT_EQ(tf->Tasks("worker"),
            (std::vector<std::string>{"mnist-worker-0.mnist.default.svc:2222",
                                      "mnist-worker-1.mnist.default.svc:2222"}));
  EXPECT_EQ(tf->task, (TaskId{"worker", 1}));
  // Those names are the pod's hostname in the job Service's subdomain.
  EXPECT_EQ(pod["spec"]["hostname"], "mnist-worker-1");
  EXPECT_EQ(pod["spec"]["subdomain"], "mnist");

  // A worker has no bulk port; a ps has it next to its psflow-port, and is told which it is.
  EXPECT_EQ(Env(pod, "PSFLOW_BULK_PORT"), "<unset>");
  const Json ps = client_.Get(kube::Pods(), "default", "mnist-ps-0").value();
  EXPECT_EQ(Env(ps, "PSFLOW_BULK_PORT"), "2223");
  EXPECT_EQ(ps["spec"]["containers"][0]["ports"][1],
            Json({{"name", "psflow-bulk"}, {"containerPort", 2223}, {"protocol", "TCP"}}));

  const Json service = client_.Get(kube::Services(), "default", "mnist").value();
  EXPECT_EQ(service["spec"]["clusterIP"], "None");
  EXPECT_EQ(service["spec"]["publishNotReadyAddresses"], true);
  EXPECT_EQ(service["spec"]["selector"], Json({{kJobNameLabel, "mnist"}}));
  EXPECT_FALSE(service["spec"].contains("ports")) << service["spec"];
  EXPECT_EQ(kube::ControllerUid(service), kube::Uid(job));

  const JobStatus status = Status("mnist");
  EXPECT_EQ(status.State(), "Created");
  EXPECT_EQ(status.workers, "0/2");
  EXPECT_EQ(status.worker_selector, "psflow.io/job-name=mnist,psflow.io/replica-type=worker");
  EXPECT_EQ(status.observed_generation, 1);
  EXPECT_EQ(status.start_time, "2027-01-15T08:00:00Z");
  // One event names what the pass made.
  EXPECT_EQ(events_.recorded(), 1);
  EXPECT_EQ(Events("SuccessfulCreate"),
            std::vector<std::string>{"Normal: Created Service mnist, Secret mnist-tls, pods "
                                     "mnist-ps-0, mnist-worker-0, mnist-worker-1"});
}

// Mutual TLS (the default): one Secret holds the job's CA and every replica's certificate; each
// pod mounts the CA certificate and its own certificate and key, never the CA key or another's.
// A replaced pod finds its certificate there: no write. Scaling up adds the new replicas' to it.
TEST_F(ReconcilerTest, OneTlsSecretHoldsEveryReplicasCertificateAndEachPodMountsOnlyItsOwn) {
  Create(MakeJob("mnist", 1, 1, "OnFailure"));
  ASSERT_TRUE(Pass("mnist").status.ok());
  EXPECT_EQ(Names(kube::Secrets()), std::vector<std::string>{"mnist-tls"});
  const Json secret = client_.Get(kube::Secrets(), "default", "mnist-tls").value();
  EXPECT_EQ(kube::ControllerUid(secret), kube::Uid(Job("mnist")));
  EXPECT_EQ(secret["type"], "Opaque");
  std::vector<std::string> keys;
  for (const auto& [key, value] : secret["data"].items()) keys.push_back(key);
  EXPECT_EQ(keys, (std::vector<std::string>{"ca.crt", "ca.key", "ps-0.crt", "ps-0.key",
                                            "worker-0.crt", "worker-0.key"}));
  // The worker's certificate is signed by the job's CA, for its DNS names.
  std::string ca, leaf;
  ASSERT_TRUE(absl::Base64Unescape(secret["data"]["ca.crt"].get<std::string>(), &ca));
  ASSERT_TRUE(absl::Base64Unescape(secret["data"]["worker-0.crt"].get<std::string>(), &leaf));
  EXPECT_TRUE(VerifyCertificate(ca, leaf, now_).ok());
  EXPECT_EQ(
      SubjectAltNames(leaf).value(),
      (std::vector<std::string>{"DNS:mnist-worker-0.mnist", "DNS:mnist-worker-0.mnist.default",
                                "DNS:mnist-worker-0.mnist.default.svc",
                                "DNS:mnist-worker-0.mnist.default.svc.cluster.local"}));

  const Json pod = client_.Get(kube::Pods(), "default", "mnist-worker-0").value();
  // Beside the restricted profile's writable /tmp (pod_security.h).
  EXPECT_EQ(pod["spec"]["volumes"],
            Json::parse(R"([{"name":"psflow-tls","secret":{"defaultMode":288,
                             "items":[{"key":"ca.crt","path":"ca.crt"},
                                      {"key":"worker-0.crt","path":"tls.crt"},
                                      {"key":"worker-0.key","path":"tls.key"}],
                             "secretName":"mnist-tls"}},
                            {"emptyDir":{},"name":"psflow-tmp"}])"));
  const Json& container = pod["spec"]["containers"][0];
  EXPECT_EQ(container["volumeMounts"],
            Json::parse(R"([{"mountPath":"/etc/psflow/tls","name":"psflow-tls","readOnly":true},
                            {"mountPath":"/tmp","name":"psflow-tmp"}])"));
  EXPECT_EQ(container["args"],
            Json({"--tls_ca=/etc/psflow/tls/ca.crt", "--tls_cert=/etc/psflow/tls/tls.crt",
                  "--tls_key=/etc/psflow/tls/tls.key"}));

  // The worker fails and is replaced: same Secret, untouched.
  SetPhase("mnist-worker-0", "Failed", 1);
  ASSERT_TRUE(Pass("mnist").status.ok());  // deletes the failed pod
  ASSERT_TRUE(Pass("mnist").status.ok());  // creates its replacement
  EXPECT_EQ(Names(kube::Pods()), (std::vector<std::string>{"mnist-ps-0", "mnist-worker-0"}));
  EXPECT_EQ(client_.Get(kube::Secrets(), "default", "mnist-tls").value(), secret);

  // Two more workers: their certificates join the Secret, the CA and the others stay.
  Json job = Job("mnist");
  job["spec"]["replicaSpecs"]["Worker"]["replicas"] = 3;
  ASSERT_TRUE(client_.Update(kube::TrainingJobs(), "default", job).ok());
  ASSERT_TRUE(Pass("mnist").status.ok());
  EXPECT_EQ(Names(kube::Pods()).size(), 4u);
  const Json grown = client_.Get(kube::Secrets(), "default", "mnist-tls").value();
  EXPECT_EQ(grown["data"].size(), 10u);
  for (const char* kept : {"ca.crt", "ca.key", "ps-0.key", "worker-0.crt"}) {
    EXPECT_EQ(grown["data"][kept], secret["data"][kept]) << kept;
  }
  EXPECT_THAT(Events("SuccessfulCreate"),
              ::testing::Contains("Normal: Created pods mnist-worker-1, mnist-worker-2; updated "
                                  "Secret mnist-tls (the new replicas' certificates)"));
}

// Replicas of index 200 and above are in a second Secret (a Secret holds 1 MiB at most), which
// holds the CA's certificate but not its key, and follows the CA when it is made again.
TEST_F(ReconcilerTest, ReplicasBeyondTwoHundredPerTypeGetASecondSecretWithoutTheCaKey) {
  Create(MakeJob("wide", 1, kReplicasPerSecret + 1, "OnFailure"));
  for (int i = 0; i < 12 && Names(kube::Pods()).size() < kReplicasPerSecret + 2u; ++i) {
    ReconcileResult r = Pass("wide");
    ASSERT_TRUE(r.status.ok()) << r.status;
  }
  EXPECT_EQ(Names(kube::Secrets()), (std::vector<std::string>{"wide-tls", "wide-tls-1"}));
  const Json second = client_.Get(kube::Secrets(), "default", "wide-tls-1").value();
  EXPECT_EQ(second["data"].size(), 3u) << second["data"];
  EXPECT_TRUE(second["data"].contains("worker-200.key"));
  EXPECT_FALSE(second["data"].contains("ca.key"));
  EXPECT_EQ(second["data"]["ca.crt"],
            client_.Get(kube::Secrets(), "default", "wide-tls").value()["data"]["ca.crt"]);
  const Json pod = client_.Get(kube::Pods(), "default", "wide-worker-200").value();
  EXPECT_EQ(pod["spec"]["volumes"][0]["secret"]["secretName"], "wide-tls-1");

  // "wide-tls" deleted by hand: the next pass that makes a pod makes a new CA, and the second
  // Secret's certificates, of the old CA, are issued again by the new one (labels others put on
  // it stay).
  Json labelled = second;
  labelled["metadata"]["labels"]["team"] = "ml";
  ASSERT_TRUE(client_.Update(kube::Secrets(), "default", labelled).ok());
  ASSERT_TRUE(client_.Delete(kube::Secrets(), "default", "wide-tls", {}).ok());
  ASSERT_TRUE(client_.Delete(kube::Pods(), "default", "wide-worker-200", {}).ok());
  ReconcileResult r = Pass("wide");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 1);
  const Json first = client_.Get(kube::Secrets(), "default", "wide-tls").value();
  const Json again = client_.Get(kube::Secrets(), "default", "wide-tls-1").value();
  EXPECT_NE(first["data"]["ca.crt"], second["data"]["ca.crt"]);
  EXPECT_EQ(again["data"]["ca.crt"], first["data"]["ca.crt"]);
  std::string ca, leaf;
  ASSERT_TRUE(absl::Base64Unescape(first["data"]["ca.crt"].get<std::string>(), &ca));
  ASSERT_TRUE(absl::Base64Unescape(again["data"]["worker-200.crt"].get<std::string>(), &leaf));
  EXPECT_TRUE(VerifyCertificate(ca, leaf, now_).ok());
  EXPECT_EQ(kube::Label(again, "team"), "ml");
}

// A Secret of the job's name left by another owner is never used: no pod until it goes.
TEST_F(ReconcilerTest, ASecretOfAnotherOwnerHoldsThePodsBack) {
  Json stale = {{"apiVersion", "v1"},
                {"kind", "Secret"},
                {"metadata", {{"name", "again-tls"}, {"namespace", "default"}}},
                {"data", {{"ca.crt", ""}, {"ca.key", ""}}}};
  ASSERT_TRUE(client_.Create(kube::Secrets(), "default", stale).ok());
  Create(MakeJob("again", 1, 1, "OnFailure"));
  ReconcileResult r = Pass("again");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_TRUE(absl::StrContains(r.status.message(),
                                "Secret default/again-tls exists but is not owned by "
                                "TrainingJob default/again"))
      << r.status;
  EXPECT_EQ(Names(kube::Pods()), std::vector<std::string>{});
  ASSERT_TRUE(client_.Delete(kube::Secrets(), "default", "again-tls", {}).ok());
  r = Pass("again");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 2);
}

// A Service of the job's name that is not the job's would leave its pods without DNS names:
// nothing more is made, a Warning says why, until it goes.
TEST_F(ReconcilerTest, AServiceOfTheJobsNameOwnedByAnotherHoldsThePodsBack) {
  Json other = {{"apiVersion", "v1"},
                {"kind", "Service"},
                {"metadata", {{"name", "taken"}, {"namespace", "default"}}},
                {"spec", {{"clusterIP", "None"}}}};
  ASSERT_TRUE(client_.Create(kube::Services(), "default", other).ok());
  Create(MakeJob("taken", 1, 1, "OnFailure"));
  ReconcileResult r = Pass("taken");
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.requeue_after, absl::Seconds(10));  // it is not watched: looked at again soon
  EXPECT_EQ(Names(kube::Pods()), std::vector<std::string>{});
  EXPECT_EQ(Events("ServiceNameTaken"),
            std::vector<std::string>{
                "Warning: Service default/taken exists but is not this TrainingJob's: its pods "
                "need that name for their DNS names; waiting for it to go"});
  ASSERT_TRUE(client_.Delete(kube::Services(), "default", "taken", {}).ok());
  r = Pass("taken");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 2);
  EXPECT_EQ(r.services_created, 1);
}

// A pod of a replica's name that is not the job's (made by hand, say) is not taken for the
// replica: a Warning names it, the job is looked at again soon (that pod is not watched), and
// the replica is made once it goes.
TEST_F(ReconcilerTest, APodOfAReplicasNameOwnedByAnotherIsToldAndTheReplicaMadeOnceItGoes) {
  const Json other = {{"apiVersion", "v1"},
                      {"kind", "Pod"},
                      {"metadata", {{"name", "hand-worker-0"}, {"namespace", "default"}}},
                      {"spec", {{"containers", {{{"name", "c"}, {"image", "busybox"}}}}}}};
  ASSERT_TRUE(client_.Create(kube::Pods(), "default", other).ok());
  Create(MakeJob("hand", 1, 2, "OnFailure"));
  ReconcileResult r = Pass("hand");
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.requeue_after, absl::Seconds(10));
  EXPECT_EQ(Names(kube::Pods()),
            (std::vector<std::string>{"hand-ps-0", "hand-worker-0", "hand-worker-1"}));
  EXPECT_EQ(Events("PodNameTaken"),
            std::vector<std::string>{
                "Warning: pods hand-worker-0 exist in default but are not this TrainingJob's: its "
                "replicas need those names; waiting for them to go"});
  ASSERT_TRUE(client_.Delete(kube::Pods(), "default", "hand-worker-0", {}).ok());
  r = Pass("hand");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 1);
  EXPECT_EQ(kube::ControllerUid(client_.Get(kube::Pods(), "default", "hand-worker-0").value()),
            kube::Uid(client_.Get(kube::TrainingJobs(), "default", "hand").value()));
}

TEST_F(ReconcilerTest, TlsOptOutMakesNoSecretMountsNothingAndWarns) {
  Json job = MakeJob("plain", 1, 1, "OnFailure");
  job["spec"]["tls"] = {{"enabled", false}};
  Create(job);
  ASSERT_TRUE(Pass("plain").status.ok());
  EXPECT_EQ(Names(kube::Secrets()), std::vector<std::string>{});
  const Json pod = client_.Get(kube::Pods(), "default", "plain-ps-0").value();
  EXPECT_FALSE(absl::StrContains(pod["spec"]["volumes"].dump(), "psflow-tls")) << pod["spec"];
  EXPECT_FALSE(pod["spec"]["containers"][0].contains("args")) << pod["spec"];
  std::vector<std::string> warnings;
  const kube::ObjectList events = client_.List(kube::Events(), "default", {}).value();
  for (const Json& e : events.items) {
    if (e["type"] == "Warning") warnings.push_back(e["reason"].get<std::string>());
  }
  EXPECT_EQ(warnings, std::vector<std::string>{"TLSDisabled"});
}

// spec.modelFile: the ConfigMap <job>-model, owned by the job, mounted by the training replicas
// (not the ps) with --model_file; an edit of the spec's model updates it.
TEST_F(ReconcilerTest, AnInlineModelFileBecomesAConfigMapTheTrainingPodsMount) {
  const std::string model =
      "name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
      "data: {format: csv}\n";
  Json job = MakeJob("own", 1, 2, "OnFailure", /*chief=*/true);
  job["spec"]["modelFile"] = model;
  Create(job);
  ASSERT_TRUE(Pass("own").status.ok());
  const Json map = client_.Get(kube::ConfigMaps(), "default", "own-model").value();
  EXPECT_EQ(map["data"]["model.yaml"], model);
  EXPECT_EQ(kube::ControllerUid(map), kube::Uid(Job("own")));
  for (const char* name : {"own-chief-0", "own-worker-0", "own-worker-1", "own-ps-0"}) {
    SCOPED_TRACE(name);
    const Json pod = client_.Get(kube::Pods(), "default", name).value();
    const Json& c = pod["spec"]["containers"][0];
    const bool ps = std::string(name) == "own-ps-0";
    const Json volume = {{"name", "psflow-model"}, {"configMap", {{"name", "own-model"}}}};
    const Json mount = {
        {"name", "psflow-model"}, {"mountPath", "/etc/psflow/model"}, {"readOnly", true}};
    auto has = [](const Json& list, const Json& item) {
      return list.is_array() && std::find(list.begin(), list.end(), item) != list.end();
    };
    EXPECT_EQ(has(pod["spec"]["volumes"], volume), !ps) << pod["spec"];
    EXPECT_EQ(has(c["volumeMounts"], mount), !ps) << c;
    EXPECT_EQ(has(c["args"], "--model_file=/etc/psflow/model/model.yaml"), !ps) << c;
  }
  // The spec's model edited: the ConfigMap follows (pods created from now on get it).
  Json edited = Job("own");
  const std::string other = absl::StrCat(model, "training: {epochs: 3}\n");
  edited["spec"]["modelFile"] = other;
  ASSERT_TRUE(client_.Update(kube::TrainingJobs(), "default", edited).ok());
  ASSERT_TRUE(client_.Delete(kube::Pods(), "default", "own-worker-1", {}).ok());
  ASSERT_TRUE(Pass("own").status.ok());
  EXPECT_EQ(client_.Get(kube::ConfigMaps(), "default", "own-model").value()["data"]["model.yaml"],
            other);
}

// A model the worker would refuse fails the job before any pod runs.
TEST_F(ReconcilerTest, AnInvalidInlineModelFailsTheJobWithInvalidSpec) {
  Json job = MakeJob("bad", 1, 1, "OnFailure");
  job["spec"]["modelFile"] =
      "name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 7}\n"
      "data: {format: csv}\n";
  Create(job);
  Pass("bad");
  const JobStatus status = Status("bad");
  ASSERT_NE(status.Find(ConditionType::kFailed), nullptr);
  EXPECT_EQ(status.Find(ConditionType::kFailed)->reason, "InvalidSpec");
  EXPECT_THAT(status.Find(ConditionType::kFailed)->message,
              ::testing::HasSubstr("spec.modelFile: the last layer, layer 0 (dense \"dense0\"), "
                                   "produces 7 values per prediction"));
  EXPECT_EQ(Names(kube::Pods()), std::vector<std::string>{});
  EXPECT_EQ(Names(kube::ConfigMaps()), std::vector<std::string>{});
}

TEST_F(ReconcilerTest, PortFromTheNamedContainerPort) {
  Json job = MakeJob("p", 1, 1, "Never");
  job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["ports"] =
      Json::array({{{"name", "psflow-port"}, {"containerPort", 3333}}});
  Create(job);
  ASSERT_TRUE(Pass("p").status.ok());
  const Json worker = client_.Get(kube::Pods(), "default", "p-worker-0").value();
  EXPECT_EQ(ParseTfConfig(Env(worker, "TF_CONFIG"))->Tasks("ps"),
            std::vector<std::string>{"p-ps-0.p.default.svc:3333"});
  EXPECT_EQ(Env(client_.Get(kube::Pods(), "default", "p-ps-0").value(), "PSFLOW_BULK_PORT"),
            "3334");
}

TEST_F(ReconcilerTest, BulkPortFromTheNamedContainerPort) {
  Json job = MakeJob("b", 1, 1, "Never");
  job["spec"]["replicaSpecs"]["PS"]["template"]["spec"]["containers"][0]["ports"] =
      Json::array({{{"name", "psflow-bulk"}, {"containerPort", 7000}}});
  Create(job);
  ASSERT_TRUE(Pass("b").status.ok());
  EXPECT_EQ(Env(client_.Get(kube::Pods(), "default", "b-ps-0").value(), "PSFLOW_BULK_PORT"),
            "7000");
}

TEST_F(ReconcilerTest, SecondPassChangesNothingAndWritesNothing) {
  Create(MakeJob("idle", 1, 2, "OnFailure"));
  ASSERT_TRUE(Pass("idle").status.ok());
  const int64_t writes = store_.WriteCount();
  ReconcileResult r = Pass("idle");
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.pods_created + r.services_created + r.pods_deleted, 0);
  EXPECT_FALSE(r.status_written);
  EXPECT_EQ(store_.WriteCount(), writes);
}

TEST_F(ReconcilerTest, RunningOnceEveryReplicaRuns) {
  Create(MakeJob("run", 1, 2, "OnFailure"));
  ASSERT_TRUE(Pass("run").status.ok());
  SetPhase("run-ps-0", "Running");
  SetPhase("run-worker-0", "Running");
  EXPECT_EQ(Status("run").State(), "Created");
  now_ += absl::Seconds(7);
  ASSERT_TRUE(Pass("run").status.ok());
  EXPECT_EQ(Status("run").State(), "Created");  // worker 1 still pending
  SetPhase("run-worker-1", "Running");
  ReconcileResult r = Pass("run");
  const JobStatus status = Status("run");
  EXPECT_EQ(status.State(), "Running");
  EXPECT_EQ(status.workers, "2/2");
  EXPECT_EQ(status.replica_statuses.at(api::ReplicaType::kPS).active, 1);
  ASSERT_TRUE(r.time_to_running.has_value());
  EXPECT_EQ(*r.time_to_running, absl::Seconds(7));
  EXPECT_FALSE(Pass("run").time_to_running.has_value());  // only the first time
}

TEST_F(ReconcilerTest, ChiefSuccessSucceedsStopsPsAndHonoursCleanPodPolicyNone) {
  Json job = MakeJob("done", 1, 2, "OnFailure");
  job["spec"]["runPolicy"]["cleanPodPolicy"] = "None";
  Create(job);
  ASSERT_TRUE(Pass("done").status.ok());
  for (const char* pod : {"done-ps-0", "done-worker-0", "done-worker-1"}) SetPhase(pod, "Running");
  ASSERT_TRUE(Pass("done").status.ok());
  SetPhase("done-worker-0", "Succeeded");
  ReconcileResult r = Pass("done");
  ASSERT_TRUE(r.status.ok()) << r.status;
  const JobStatus status = Status("done");
  EXPECT_EQ(status.State(), "Succeeded");
  EXPECT_FALSE(status.Is(ConditionType::kRunning));
  EXPECT_EQ(status.completion_time, "2027-01-15T08:00:00Z");
  EXPECT_EQ(status.replica_statuses.at(api::ReplicaType::kWorker).completed_indexes,
            std::set<int>{0});
  // Worker 1 still runs: for the finish grace (30 s by default) nothing is stopped.
  EXPECT_EQ(r.requeue_after, absl::Seconds(30));
  EXPECT_EQ(Names(kube::Pods()).size(), 3u);
  now_ += absl::Seconds(29);
  EXPECT_EQ(Pass("done").requeue_after, absl::Seconds(1));
  EXPECT_EQ(Names(kube::Pods()).size(), 3u);
  now_ += absl::Seconds(1);
  ASSERT_TRUE(Pass("done").status.ok());
  // The ps is stopped even under None; the other worker and the services are kept.
  EXPECT_EQ(Names(kube::Pods()), (std::vector<std::string>{"done-worker-0", "done-worker-1"}));
  EXPECT_EQ(Names(kube::Services()), std::vector<std::string>{"done"});
}

// Issue 29: a worker finishing its last steps when the chief succeeded used to be deleted at once
// and lose its log; now the clean-up waits for it (up to the finish grace), the ps with it.
TEST_F(ReconcilerTest, CleanPodPolicyRunningWaitsForTheOtherWorkersThenDeletesActivePods) {
  Create(MakeJob("clean", 1, 2, "OnFailure"));
  ASSERT_TRUE(Pass("clean").status.ok());
  for (const char* pod : {"clean-ps-0", "clean-worker-0", "clean-worker-1"}) {
    SetPhase(pod, "Running");
  }
  SetPhase("clean-worker-0", "Succeeded");
  ASSERT_TRUE(Pass("clean").status.ok());
  EXPECT_EQ(Status("clean").State(), "Succeeded");
  EXPECT_EQ(Names(kube::Pods()).size(), 3u);
  EXPECT_EQ(Names(kube::Services()), std::vector<std::string>{"clean"});
  now_ += absl::Seconds(5);
  SetPhase("clean-worker-1", "Succeeded");  // within the grace: nothing of it is lost
  ASSERT_TRUE(Pass("clean").status.ok());
  EXPECT_EQ(Names(kube::Pods()), (std::vector<std::string>{"clean-worker-0", "clean-worker-1"}));
  EXPECT_TRUE(Names(kube::Services()).empty());
  const JobStatus status = Status("clean");
  EXPECT_EQ(status.replica_statuses.at(api::ReplicaType::kPS).active, 0);
  EXPECT_EQ(status.replica_statuses.at(api::ReplicaType::kWorker).succeeded, 2);
}

TEST_F(ReconcilerTest, FinishGraceZeroDeletesActivePodsAtOnce) {
  Json job = MakeJob("now", 1, 2, "OnFailure");
  job["spec"]["runPolicy"]["finishGraceSeconds"] = 0;
  Create(job);
  ASSERT_TRUE(Pass("now").status.ok());
  for (const char* pod : {"now-ps-0", "now-worker-0", "now-worker-1"}) SetPhase(pod, "Running");
  SetPhase("now-worker-0", "Succeeded");
  ASSERT_TRUE(Pass("now").status.ok());
  EXPECT_EQ(Names(kube::Pods()), std::vector<std::string>{"now-worker-0"});
  EXPECT_TRUE(Names(kube::Services()).empty());
}

// restartPolicy Always: the kubelet must not re-run a worker that finished (its pods get
// OnFailure), while the ps, which never finishes, keeps Always; the job succeeds.
TEST_F(ReconcilerTest, AlwaysNeverRerunsAFinishedWorkerSoTheJobSucceeds) {
  Create(MakeJob("alw", 1, 1, "Always"));
  ASSERT_TRUE(Pass("alw").status.ok());
  EXPECT_EQ(client_.Get(kube::Pods(), "default", "alw-worker-0").value()["spec"]["restartPolicy"],
            "OnFailure");
  EXPECT_EQ(client_.Get(kube::Pods(), "default", "alw-ps-0").value()["spec"]["restartPolicy"],
            "Always");
  SetPhase("alw-ps-0", "Running");
  SetPhase("alw-worker-0", "Succeeded", 0, "");
  ASSERT_TRUE(Pass("alw").status.ok());
  EXPECT_EQ(Status("alw").State(), "Succeeded");
}

TEST_F(ReconcilerTest, ChiefDecidesWhenTheJobHasOne) {
  Create(MakeJob("c", 1, 1, "Never", /*chief=*/true));
  ASSERT_TRUE(Pass("c").status.ok());
  EXPECT_EQ(kube::Label(client_.Get(kube::Pods(), "default", "c-chief-0").value(), kJobRoleLabel),
            "chief");
  SetPhase("c-worker-0", "Succeeded");
  ASSERT_TRUE(Pass("c").status.ok());
  EXPECT_FALSE(Status("c").Finished());
  SetPhase("c-chief-0", "Succeeded");
  ASSERT_TRUE(Pass("c").status.ok());
  EXPECT_EQ(Status("c").State(), "Succeeded");
}

TEST_F(ReconcilerTest, ACompletedReplicaWhosePodWasDeletedIsNeverRunAgain) {
  Json job = MakeJob("keep", 1, 2, "Never");
  job["spec"]["successPolicy"] = "AllWorkers";
  Create(job);
  ASSERT_TRUE(Pass("keep").status.ok());
  SetPhase("keep-worker-1", "Succeeded");
  ASSERT_TRUE(Pass("keep").status.ok());
  ASSERT_TRUE(client_.Delete(kube::Pods(), "default", "keep-worker-1", {}).ok());
  ReconcileResult r = Pass("keep");
  EXPECT_EQ(r.pods_created, 0);
  EXPECT_EQ(Names(kube::Pods()), (std::vector<std::string>{"keep-ps-0", "keep-worker-0"}));
  EXPECT_EQ(Job("keep")["status"]["replicaStatuses"]["Worker"]["completedIndexes"], "1");
  SetPhase("keep-worker-0", "Succeeded");
  ASSERT_TRUE(Pass("keep").status.ok());
  EXPECT_EQ(Status("keep").State(), "Succeeded");
}

struct PolicyCase {
  std::string policy;
  int exit_code;
  std::string reason;
  bool restarted;
};

class RestartPolicyTest : public ReconcilerTest,
                          public ::testing::WithParamInterface<PolicyCase> {};

TEST_P(RestartPolicyTest, FailedWorkerIsReplacedOrFailsTheJob) {
  const PolicyCase& c = GetParam();
  Create(MakeJob("rp", 1, 2, c.policy));
  ASSERT_TRUE(Pass("rp").status.ok());
  for (const char* pod : {"rp-ps-0", "rp-worker-0", "rp-worker-1"}) SetPhase(pod, "Running");
  ASSERT_TRUE(Pass("rp").status.ok());
  const std::string old_uid =
      kube::Uid(client_.Get(kube::Pods(), "default", "rp-worker-1").value());
  SetPhase("rp-worker-1", "Failed", c.exit_code, c.reason);
  ReconcileResult r = Pass("rp");
  ASSERT_TRUE(r.status.ok()) << r.status;
  JobStatus status = Status("rp");
  if (c.restarted) {
    EXPECT_EQ(r.restarts, 1);
    EXPECT_EQ(status.State(), "Restarting");
    EXPECT_FALSE(status.Is(ConditionType::kRunning));
    EXPECT_TRUE(absl::StrContains(status.Find(ConditionType::kRestarting)->message,
                                  "Worker 1 (pod rp-worker-1) failed"));
    EXPECT_EQ(status.replica_statuses.at(api::ReplicaType::kWorker).restarts, 1);
    EXPECT_EQ(status.restart_count, 1);
    // The next pass re-creates it; once it runs the job is Running again, not Restarting.
    ASSERT_TRUE(Pass("rp").status.ok());
    const Json pod = client_.Get(kube::Pods(), "default", "rp-worker-1").value();
    EXPECT_NE(kube::Uid(pod), old_uid);
    SetPhase("rp-worker-1", "Running");
    ASSERT_TRUE(Pass("rp").status.ok());
    status = Status("rp");
    EXPECT_EQ(status.State(), "Running");
    EXPECT_FALSE(status.Is(ConditionType::kRestarting));
  } else {
    EXPECT_EQ(status.State(), "Failed");
    const Condition* failed = status.Find(ConditionType::kFailed);
    EXPECT_EQ(failed->reason, "ReplicaFailed");
    EXPECT_TRUE(absl::StrContains(failed->message, "Worker 1 (pod rp-worker-1) failed: exit code " +
                                                       std::to_string(c.exit_code)))
        << failed->message;
    // cleanPodPolicy Running (the default): the active pods are deleted, the failed one kept.
    EXPECT_EQ(Names(kube::Pods()), std::vector<std::string>{"rp-worker-1"});
  }
}

INSTANTIATE_TEST_SUITE_P(Policies, RestartPolicyTest,
                         ::testing::Values(PolicyCase{"Never", 1, "Error", false},
                                           PolicyCase{"Never", 137, "OOMKilled", false},
                                           PolicyCase{"OnFailure", 137, "Evicted", true},
                                           PolicyCase{"Always", 2, "Error", true},
                                           PolicyCase{"ExitCode", 137, "OOMKilled", true},
                                           PolicyCase{"ExitCode", 143, "Error", true},
                                           PolicyCase{"ExitCode", 1, "Error", false},
                                           PolicyCase{"ExitCode", 127, "Error", false}),
                         [](const ::testing::TestParamInfo<PolicyCase>& param) {
                           return param.param.policy + "Exit" +
                                  std::to_string(param.param.exit_code);
                         });

TEST_F(ReconcilerTest, BackoffLimitCountsReplacementsAndNamesTheCause) {
  Json job = MakeJob("bo", 1, 1, "ExitCode");
  job["spec"]["runPolicy"]["backoffLimit"] = 1;
  Create(job);
  ASSERT_TRUE(Pass("bo").status.ok());
  SetPhase("bo-worker-0", "Failed", 137, "OOMKilled");
  ASSERT_EQ(Pass("bo").restarts, 1);
  ASSERT_TRUE(Pass("bo").status.ok());  // re-created
  SetPhase("bo-worker-0", "Failed", 137, "OOMKilled");
  ReconcileResult r = Pass("bo");
  EXPECT_EQ(r.restarts, 0);
  const JobStatus status = Status("bo");
  EXPECT_EQ(status.State(), "Failed");
  const Condition* failed = status.Find(ConditionType::kFailed);
  EXPECT_EQ(failed->reason, "BackoffLimitExceeded");
  EXPECT_EQ(failed->message,
            "restart 2 of the job's replicas exceeds backoffLimit 1; last: Worker 0 (pod "
            "bo-worker-0) failed: exit code 137 (OOMKilled)");
  // Per index: the one replacement, and how the pod last ended.
  const IndexStatus& index = status.replica_statuses.at(api::ReplicaType::kWorker).indexes.at(0);
  EXPECT_EQ(index.restarts, 1);
  EXPECT_EQ(index.replaced_restarts, 1);
  ASSERT_TRUE(index.last_failure.has_value());
  EXPECT_EQ(index.last_failure->reason, "OOMKilled");
  EXPECT_EQ(index.last_failure->exit_code, 137);
  EXPECT_EQ(index.last_failure->pod, "bo-worker-0");
  EXPECT_FALSE(status.replica_statuses.at(api::ReplicaType::kPS).indexes.count(0));
}

// The kubelet's restarts of a pod the operator did not delete (deleted by hand, drained, or left
// beyond the replica count by a scale-down) stay counted once it goes.
TEST_F(ReconcilerTest, InPlaceRestartsOfAPodDeletedByOthersOrScaledAwayStayCounted) {
  Create(MakeJob("kept", 1, 2, "OnFailure"));
  ASSERT_TRUE(Pass("kept").status.ok());
  for (const char* pod : {"kept-worker-0", "kept-worker-1"}) {
    SetPhase(pod, "Running");
    ASSERT_TRUE(store_.RestartContainer("default", pod, 1, "Error").ok());
    ASSERT_TRUE(store_.RestartContainer("default", pod, 1, "Error").ok());
  }
  ASSERT_TRUE(Pass("kept").status.ok());
  EXPECT_EQ(Status("kept").restart_count, 4);
  // Deleted by someone else: the operator makes a new pod, the old one's 2 restarts stay.
  ASSERT_TRUE(client_.Delete(kube::Pods(), "default", "kept-worker-0", {}).ok());
  ASSERT_TRUE(Pass("kept").status.ok());
  EXPECT_EQ(Status("kept").restart_count, 4);
  ASSERT_TRUE(Pass("kept").status.ok());  // and the pass after the new pod is made
  EXPECT_EQ(Status("kept").restart_count, 4);
  // Scaled down to one worker: worker 1's 2 restarts stay, before and after its pod goes.
  EditSpec("kept", [](Json& spec) { spec["replicaSpecs"]["Worker"]["replicas"] = 1; });
  ASSERT_TRUE(Pass("kept").status.ok());
  EXPECT_EQ(Status("kept").restart_count, 4);
  ASSERT_TRUE(Pass("kept").status.ok());
  const JobStatus status = Status("kept");
  EXPECT_EQ(status.restart_count, 4);
  EXPECT_EQ(status.replica_statuses.at(api::ReplicaType::kWorker).indexes.at(1).restarts, 2);
}

// A pod replaced between two passes (the cache skipped its deletion: a watch gap, a restore from
// backup) by one that has restarted too: the counted pod's restarts are kept, known by its uid.
TEST_F(ReconcilerTest, RestartsOfAPodReplacedBetweenTwoPassesStayCounted) {
  Create(MakeJob("swap", 1, 1, "OnFailure"));
  ASSERT_TRUE(Pass("swap").status.ok());
  SetPhase("swap-worker-0", "Running");
  ASSERT_TRUE(store_.RestartContainer("default", "swap-worker-0", 1, "Error").ok());
  ASSERT_TRUE(store_.RestartContainer("default", "swap-worker-0", 1, "Error").ok());
  ASSERT_TRUE(Pass("swap").status.ok());
  EXPECT_EQ(Status("swap").restart_count, 2);
  // The same pod again, as a new object: a new uid, no status yet.
  Json copy = client_.Get(kube::Pods(), "default", "swap-worker-0").value();
  copy["metadata"].erase("uid");
  copy["metadata"].erase("resourceVersion");
  copy["metadata"].erase("creationTimestamp");
  copy.erase("status");
  ASSERT_TRUE(client_.Delete(kube::Pods(), "default", "swap-worker-0", {}).ok());
  ASSERT_TRUE(client_.Create(kube::Pods(), "default", copy).ok());
  SetPhase("swap-worker-0", "Running");
  ASSERT_TRUE(store_.RestartContainer("default", "swap-worker-0", 1, "Error").ok());
  ASSERT_TRUE(Pass("swap").status.ok());
  const IndexStatus index =
      Status("swap").replica_statuses.at(api::ReplicaType::kWorker).indexes.at(0);
  EXPECT_EQ(index.restarts, 3);
  EXPECT_EQ(index.replaced_restarts, 2);
  EXPECT_EQ(index.counted_pod_uid,
            kube::Uid(client_.Get(kube::Pods(), "default", "swap-worker-0").value()));
  EXPECT_EQ(Status("swap").restart_count, 3);
  ASSERT_TRUE(Pass("swap").status.ok());  // and it stays so
  EXPECT_EQ(Status("swap").restart_count, 3);
}

// A pod left beyond the replica count because its delete failed keeps its restarts live: scaled
// back up before it goes, they are counted once, not folded in and then counted again.
TEST_F(ReconcilerTest, RestartsOfAPodWhoseScaleDownDeleteFailedAreCountedOnce) {
  Create(MakeJob("back", 1, 2, "OnFailure"));
  ASSERT_TRUE(Pass("back").status.ok());
  SetPhase("back-worker-1", "Running");
  ASSERT_TRUE(store_.RestartContainer("default", "back-worker-1", 1, "Error").ok());
  ASSERT_TRUE(store_.RestartContainer("default", "back-worker-1", 1, "Error").ok());
  ASSERT_TRUE(Pass("back").status.ok());
  EXPECT_EQ(Status("back").restart_count, 2);
  EditSpec("back", [](Json& spec) { spec["replicaSpecs"]["Worker"]["replicas"] = 1; });
  Refuse("delete", "pods", absl::UnavailableError("connection refused"));
  EXPECT_EQ(Pass("back").status.code(), absl::StatusCode::kUnavailable);
  client_.SetFault(nullptr);
  EXPECT_EQ(Status("back").restart_count, 2);
  EditSpec("back", [](Json& spec) { spec["replicaSpecs"]["Worker"]["replicas"] = 2; });
  ASSERT_TRUE(Pass("back").status.ok());
  EXPECT_EQ(Status("back").restart_count, 2);
  EXPECT_EQ(Status("back").replica_statuses.at(api::ReplicaType::kWorker).indexes.at(1).restarts,
            2);
}

// A pod already going (a finalizer or a grace period holds it) is not deleted again: its deletion
// was observed when it got its deletionTimestamp, and a second delete would be waited for in
// vain (the job not reconciled until the expectations expire).
TEST_F(ReconcilerTest, APodAlreadyGoingIsNotDeletedAgain) {
  Create(MakeJob("going", 1, 2, "OnFailure"));
  ASSERT_TRUE(Pass("going").status.ok());
  Json pod = client_.Get(kube::Pods(), "default", "going-worker-1").value();
  pod["metadata"]["finalizers"] = Json::array({"example.com/hold"});
  ASSERT_TRUE(client_.Update(kube::Pods(), "default", pod).ok());
  EditSpec("going", [](Json& spec) { spec["replicaSpecs"]["Worker"]["replicas"] = 1; });
  ReconcileResult r = Pass("going");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_deleted, 1);
  ASSERT_TRUE(kube::BeingDeleted(client_.Get(kube::Pods(), "default", "going-worker-1").value()));
  r = Pass("going");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_deleted, 0);
  EXPECT_EQ(Events("SuccessfulDeletePod").size(), 1u);
}

TEST_F(ReconcilerTest, BackoffLimitCountsTheKubeletsInPlaceRestarts) {
  Json job = MakeJob("inplace", 1, 1, "OnFailure");
  job["spec"]["runPolicy"]["backoffLimit"] = 1;
  Create(job);
  ASSERT_TRUE(Pass("inplace").status.ok());
  SetPhase("inplace-worker-0", "Running");
  ASSERT_TRUE(store_.RestartContainer("default", "inplace-worker-0", 1, "Error").ok());
  ASSERT_TRUE(Pass("inplace").status.ok());
  EXPECT_EQ(Status("inplace").restart_count, 1);
  EXPECT_FALSE(Status("inplace").Finished());
  ASSERT_TRUE(store_.RestartContainer("default", "inplace-worker-0", 1, "Error").ok());
  ASSERT_TRUE(Pass("inplace").status.ok());
  const JobStatus status = Status("inplace");
  EXPECT_EQ(status.State(), "Failed");
  EXPECT_EQ(status.Find(ConditionType::kFailed)->reason, "BackoffLimitExceeded");
  EXPECT_EQ(status.Find(ConditionType::kFailed)->message,
            "restart 2 of the job's replicas exceeds backoffLimit 1; last: Worker 0 (pod "
            "inplace-worker-0) was restarted in place after exit code 1 (Error)");
  const IndexStatus& index = status.replica_statuses.at(api::ReplicaType::kWorker).indexes.at(0);
  EXPECT_EQ(index.restarts, 2);
  EXPECT_EQ(index.replaced_restarts, 2);  // the failed job's pod is deleted: its restarts stay
  ASSERT_TRUE(index.last_failure.has_value());
  EXPECT_EQ(index.last_failure->reason, "Error");
  EXPECT_EQ(index.last_failure->exit_code, 1);
  // Each in-place restart is an event of its own, seen once.
  kube::ListOptions options;
  auto events = store_.List(kube::Events(), "default", options);
  ASSERT_TRUE(events.ok());
  int restarted = 0;
  for (const Json& event : events->items) {
    if (event.value("reason", "") != "ReplicaRestartedInPlace") continue;
    ++restarted;
    EXPECT_EQ(event.value("type", ""), "Warning");
    EXPECT_TRUE(absl::StrContains(event.value("message", ""),
                                  "Worker 0 (pod inplace-worker-0) was restarted by the kubelet "
                                  "after exit code 1 (Error)"))
        << event;
  }
  EXPECT_EQ(restarted, 2);
}

TEST_F(ReconcilerTest, ActiveDeadlineFailsTheJobAndCleansUp) {
  Json job = MakeJob("late", 1, 1, "OnFailure");
  job["spec"]["runPolicy"]["activeDeadlineSeconds"] = 60;
  Create(job);
  ReconcileResult r = Pass("late");
  ASSERT_TRUE(r.requeue_after.has_value());
  EXPECT_EQ(*r.requeue_after, absl::Seconds(60));
  SetPhase("late-ps-0", "Running");
  SetPhase("late-worker-0", "Running");
  now_ += absl::Seconds(59);
  EXPECT_EQ(*Pass("late").requeue_after, absl::Seconds(1));
  now_ += absl::Seconds(1);
  ASSERT_TRUE(Pass("late").status.ok());
  const JobStatus status = Status("late");
  EXPECT_EQ(status.State(), "Failed");
  EXPECT_EQ(status.Find(ConditionType::kFailed)->reason, "DeadlineExceeded");
  EXPECT_TRUE(Names(kube::Pods()).empty());
}

TEST_F(ReconcilerTest, SuspendDeletesPodsAndResumeRestartsTheDeadline) {
  Json job = MakeJob("sus", 1, 2, "OnFailure");
  job["spec"]["runPolicy"]["activeDeadlineSeconds"] = 100;
  Create(job);
  ASSERT_TRUE(Pass("sus").status.ok());
  for (const char* pod : {"sus-ps-0", "sus-worker-0", "sus-worker-1"}) SetPhase(pod, "Running");
  ASSERT_TRUE(Pass("sus").status.ok());
  now_ += absl::Seconds(80);
  EditSpec("sus", [](Json& spec) { spec["runPolicy"]["suspend"] = true; });
  ASSERT_TRUE(Pass("sus").status.ok());
  JobStatus status = Status("sus");
  EXPECT_EQ(status.State(), "Suspended");
  EXPECT_FALSE(status.Is(ConditionType::kRunning));
  EXPECT_TRUE(Names(kube::Pods()).empty());
  EXPECT_EQ(status.start_time, "");
  EXPECT_EQ(status.observed_generation, 2);
  now_ += absl::Seconds(500);  // suspended time does not count
  EditSpec("sus", [](Json& spec) { spec["runPolicy"]["suspend"] = false; });
  ReconcileResult r = Pass("sus");
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.pods_created, 3);
  EXPECT_EQ(*r.requeue_after, absl::Seconds(100));
  status = Status("sus");
  EXPECT_FALSE(status.Is(ConditionType::kSuspended));
  EXPECT_EQ(status.Find(ConditionType::kSuspended)->reason, "Resumed");
  EXPECT_EQ(status.State(), "Created");
}

TEST_F(ReconcilerTest, ASpecPsflowCannotRunFailsWithAClearMessage) {
  Json job = MakeJob("bad", 1, 0, "Never");
  job["spec"]["replicaSpecs"].erase("Worker");
  Create(job);
  ReconcileResult r = Pass("bad");
  EXPECT_TRUE(r.status.ok());
  const JobStatus status = Status("bad");
  EXPECT_EQ(status.State(), "Failed");
  EXPECT_EQ(status.Find(ConditionType::kFailed)->reason, "InvalidSpec");
  EXPECT_EQ(status.Find(ConditionType::kFailed)->message,
            "TrainingJob default/bad: spec.replicaSpecs: needs at least one Worker (or a Chief) "
            "replica");
  EXPECT_TRUE(Names(kube::Pods()).empty());
  EXPECT_FALSE(Pass("bad").status_written);  // reported once
}

TEST_F(ReconcilerTest, MalformedStatusAndFieldsNeverCrash) {
  Json job = MakeJob("odd", 1, 1, "Never");
  Create(job);
  Json stored = Job("odd");
  stored["status"] = {{"conditions", "not a list"},
                      {"replicaStatuses", {{"Worker", {{"completedIndexes", "x,-3,9-2"}}}}},
                      {"startTime", 17}};
  ASSERT_TRUE(client_.UpdateStatus(kube::TrainingJobs(), "default", stored).ok());
  ReconcileResult r = Pass("odd");
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 2);
  EXPECT_EQ(Status("odd").State(), "Created");
}

TEST_F(ReconcilerTest, OddlyTypedTemplateFieldsAndHugeIndexesNeverCrash) {
  Json job = MakeJob("types", 1, 1, "Never");
  Json& container = job["spec"]["replicaSpecs"]["Worker"]["template"]["spec"]["containers"][0];
  container["env"].push_back({{"name", true}, {"value", 5}});
  container["ports"] = Json::array({{{"name", true}, {"containerPort", 1}}});
  job["spec"]["replicaSpecs"]["PS"]["template"]["metadata"] = "not an object";
  Create(job);
  Json stored = Job("types");
  stored["status"] = {
      {"replicaStatuses", {{"Worker", {{"completedIndexes", "2147483647,0-2147483647"}}}}}};
  ASSERT_TRUE(client_.UpdateStatus(kube::TrainingJobs(), "default", stored).ok());
  ReconcileResult r = Pass("types");
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 2);
  const Json pod = client_.Get(kube::Pods(), "default", "types-worker-0").value();
  EXPECT_EQ(Env(pod, "PSFLOW_REPLICA_TYPE"), "worker");
}

TEST_F(ReconcilerTest, SimultaneousFailuresDoNotOvershootBackoffLimit) {
  Json job = MakeJob("two", 1, 2, "ExitCode");
  job["spec"]["runPolicy"]["backoffLimit"] = 1;
  Create(job);
  ASSERT_TRUE(Pass("two").status.ok());
  SetPhase("two-worker-0", "Failed", 137, "OOMKilled");
  SetPhase("two-worker-1", "Failed", 137, "OOMKilled");
  ReconcileResult r = Pass("two");
  EXPECT_EQ(r.restarts, 0);
  EXPECT_EQ(Status("two").Find(ConditionType::kFailed)->reason, "BackoffLimitExceeded");
}

TEST_F(ReconcilerTest, ARunningJobEditedIntoAnInvalidSpecStopsItsPods) {
  Create(MakeJob("edit", 1, 1, "OnFailure"));
  ASSERT_TRUE(Pass("edit").status.ok());
  SetPhase("edit-ps-0", "Running");
  SetPhase("edit-worker-0", "Running");
  EditSpec("edit", [](Json& spec) { spec["replicaSpecs"].erase("Worker"); });
  ASSERT_TRUE(Pass("edit").status.ok());
  EXPECT_EQ(Status("edit").Find(ConditionType::kFailed)->reason, "InvalidSpec");
  EXPECT_TRUE(Names(kube::Pods()).empty());
}

// A view whose job stays as it was first read (or as given), its pods and services current: a
// job cache that lags behind the API server.
class StaleJobView : public ClusterView {
 public:
  explicit StaleJobView(kube::KubeClient& client, ObjectPtr job = nullptr)
      : fresh_(client), frozen_(std::move(job)) {}
  ObjectPtr Job(const std::string& ns, const std::string& name) const override {
    if (frozen_ == nullptr) frozen_ = fresh_.Job(ns, name);
    return frozen_;
  }
  std::vector<ObjectPtr> Pods(const std::string& ns, const std::string& j) const override {
    return fresh_.Pods(ns, j);
  }
  std::vector<ObjectPtr> Services(const std::string& ns, const std::string& j) const override {
    return fresh_.Services(ns, j);
  }

 private:
  DirectView fresh_;
  mutable ObjectPtr frozen_;
};

TEST_F(ReconcilerTest, ACacheThatHasNotSeenOurStatusWriteIsNotActedOn) {
  Json job = MakeJob("stale", 1, 1, "OnFailure");
  job["spec"]["runPolicy"]["cleanPodPolicy"] = "All";
  Create(job);
  ASSERT_TRUE(Pass("stale").status.ok());
  StaleJobView stale(client_);
  Reconciler lagging(client_, stale, expectations_, events_, [this] { return now_; });
  SetPhase("stale-worker-0", "Succeeded");
  ASSERT_TRUE(lagging.Reconcile("default", "stale").status.ok());  // Succeeded, cleaned up
  expectations_.Forget("default/stale");
  EXPECT_TRUE(Names(kube::Pods()).empty());
  // The cache still shows the job before Succeeded: nothing is re-created.
  ReconcileResult r = lagging.Reconcile("default", "stale");
  EXPECT_EQ(r.pods_created, 0);
  EXPECT_TRUE(Names(kube::Pods()).empty());
}

// A pass that replaced a failed pod writes its restart even when the job changed under it (a
// label edited meanwhile makes the status write a 409): the restart, its lastFailure and the
// backoff count must not be lost with the deleted pod.
TEST_F(ReconcilerTest, ARestartSurvivesAStatusWriteConflict) {
  CreateRunning(MakeJob("conflict", 1, 2, "OnFailure"));
  StaleJobView stale(client_, view_.Job("default", "conflict"));
  Json job = Job("conflict");
  job["metadata"]["labels"]["edited"] = "yes";
  ASSERT_TRUE(client_.Update(kube::TrainingJobs(), "default", job).ok());
  SetPhase("conflict-worker-1", "Failed", 3);
  Reconciler lagging(client_, stale, expectations_, events_, [this] { return now_; });
  const ReconcileResult r = lagging.Reconcile("default", "conflict");
  EXPECT_EQ(r.restarts, 1);
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(r.status_written);
  const JobStatus status = Status("conflict");
  EXPECT_EQ(status.restart_count, 1);
  EXPECT_EQ(status.replica_statuses.at(api::ReplicaType::kWorker).indexes.at(1).replaced_restarts,
            1);
  EXPECT_EQ(Job("conflict")["metadata"]["labels"]["edited"], "yes");  // the edit stays
}

// A restart is stored before its pod is deleted: a pass whose status write is refused twice (the
// retry conflicts too) deletes nothing, and the next pass counts the same failure once.
TEST_F(ReconcilerTest, ARestartIsStoredBeforeItsPodIsDeleted) {
  CreateRunning(MakeJob("first", 1, 2, "OnFailure"));
  SetPhase("first-worker-1", "Failed", 3);
  RefuseStatusWrites(2);
  ReconcileResult r = Pass("first");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kAborted) << r.status;
  EXPECT_EQ(r.restarts, 0);
  EXPECT_EQ(r.pods_deleted, 0);
  const std::vector<std::string> pods = Names(kube::Pods());
  EXPECT_NE(std::find(pods.begin(), pods.end(), "first-worker-1"), pods.end());
  EXPECT_EQ(Status("first").restart_count, 0);
  EXPECT_TRUE(Events("RestartingReplica").empty());

  client_.SetFault(nullptr);
  r = Pass("first");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.restarts, 1);
  EXPECT_EQ(r.pods_deleted, 1);
  ASSERT_TRUE(Pass("first").status.ok());  // the replacement
  RunAll("first");
  ASSERT_TRUE(Pass("first").status.ok());
  const JobStatus status = Status("first");
  EXPECT_EQ(status.restart_count, 1);
  const ReplicaStatus& workers = status.replica_statuses.at(api::ReplicaType::kWorker);
  EXPECT_EQ(workers.failed, 1);
  EXPECT_EQ(workers.indexes.at(1).replaced_restarts, 1);
  EXPECT_EQ(Events("RestartingReplica").size(), 1u);
}

// A restart stored whose pod could not be deleted: a later pass deletes that pod again and
// counts nothing twice (the failed pod's uid is in the status).
TEST_F(ReconcilerTest, AFailedPodWhoseDeleteFailedIsDeletedAgainNotCountedAgain) {
  CreateRunning(MakeJob("again", 1, 2, "OnFailure"));
  SetPhase("again-worker-1", "Failed", 3);
  Refuse("delete", "pods", absl::UnavailableError("etcd is unhappy"));
  ReconcileResult r = Pass("again");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_EQ(r.restarts, 1);
  EXPECT_EQ(Status("again").restart_count, 1);
  EXPECT_FALSE(Status("again")
                   .replica_statuses.at(api::ReplicaType::kWorker)
                   .indexes.at(1)
                   .replaced_pod_uid.empty());

  client_.SetFault(nullptr);
  r = Pass("again");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.restarts, 0);
  EXPECT_EQ(r.pods_deleted, 1);
  const JobStatus status = Status("again");
  EXPECT_EQ(status.restart_count, 1);
  EXPECT_EQ(status.replica_statuses.at(api::ReplicaType::kWorker).failed, 1);
  EXPECT_EQ(Events("RestartingReplica").size(), 1u);
}

// Issue 31's real-node defect: a pod made again under the name of one just deleted carried the
// deleted pod's status (a ps Completed at the old pod IP). Read as its own, it ends a job whose ps
// policy is Never; the operator deletes it and makes it again, counted nowhere, with a Warning.
TEST_F(ReconcilerTest, APodWithAnEarlierPodsStatusIsMadeAgainCountedNowhere) {
  CreateRunning(MakeJob("stale", 1, 1, "Never"));
  Json pod = client_.Get(kube::Pods(), "default", "stale-ps-0").value();
  const std::string uid = kube::Uid(pod);
  pod["status"] = {
      {"phase", "Succeeded"},
      {"podIP", "10.85.0.26"},
      {"conditions",
       Json::array({{{"type", "PodScheduled"},
                     {"status", "True"},
                     {"lastTransitionTime", FormatTimestamp(now_ - absl::Seconds(11))}}})},
      {"containerStatuses",
       Json::array({{{"name", "psflow"},
                     {"restartCount", 3},
                     {"state", {{"terminated", {{"exitCode", 0}, {"reason", "Completed"}}}}}}})}};
  ASSERT_TRUE(client_.UpdateStatus(kube::Pods(), "default", pod).ok());
  now_ += absl::Seconds(5);
  ReconcileResult r = Pass("stale");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_deleted, 1);
  EXPECT_EQ(r.restarts, 0);
  EXPECT_EQ(Events("StaleStatus"),
            std::vector<std::string>{absl::StrCat(
                "Warning: PS 0 (pod stale-ps-0): its status is an earlier pod's (phase Succeeded, "
                "exit code 0 (Completed), pod IP 10.85.0.26): scheduled at ",
                FormatTimestamp(now_ - absl::Seconds(16)), ", before the pod was made at ",
                FormatTimestamp(now_ - absl::Seconds(5)), "; deleted to be made again")});

  r = Pass("stale");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 1);
  const Json remade = client_.Get(kube::Pods(), "default", "stale-ps-0").value();
  EXPECT_NE(kube::Uid(remade), uid);
  RunAll("stale");
  ASSERT_TRUE(Pass("stale").status.ok());
  EXPECT_EQ(Events("StaleStatus").size(), 1u);
  const JobStatus status = Status("stale");
  EXPECT_EQ(status.restart_count, 0);
  const ReplicaStatus& ps = status.replica_statuses.at(api::ReplicaType::kPS);
  EXPECT_EQ(ps.failed, 0);
  // The earlier pod's kubelet restarts are not this pod's, and nothing failed.
  for (const auto& [index, is] : ps.indexes) {
    EXPECT_EQ(is.replaced_restarts, 0) << index;
    EXPECT_FALSE(is.last_failure.has_value()) << index;
  }
  EXPECT_TRUE(status.Is(ConditionType::kRunning)) << Job("stale")["status"].dump();
}

TEST_F(ReconcilerTest, TtlDeletesTheFinishedJobAndItsObjects) {
  Json job = MakeJob("ttl", 1, 1, "Never");
  job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 30;
  job["spec"]["runPolicy"]["cleanPodPolicy"] = "None";
  Create(job);
  ASSERT_TRUE(Pass("ttl").status.ok());
  SetPhase("ttl-worker-0", "Succeeded");
  ReconcileResult r = Pass("ttl");
  EXPECT_EQ(*r.requeue_after, absl::Seconds(30));
  now_ += absl::Seconds(30);
  r = Pass("ttl");
  EXPECT_TRUE(r.job_deleted);
  EXPECT_FALSE(client_.Get(kube::TrainingJobs(), "default", "ttl").ok());
  EXPECT_TRUE(Names(kube::Pods()).empty());  // garbage-collected with their owner
  EXPECT_TRUE(Names(kube::Services()).empty());
}

// What the reconciler remembers of its own status writes goes with the job: a job deleted right
// after its last write (ttlSecondsAfterFinished: 0, or by a user) left its entry forever.
TEST_F(ReconcilerTest, NothingIsRememberedOfAJobThatIsGone) {
  Json ttl = MakeJob("gone-ttl", 1, 1, "Never");
  ttl["spec"]["runPolicy"]["ttlSecondsAfterFinished"] = 0;
  Create(ttl);
  ASSERT_TRUE(Pass("gone-ttl").status.ok());
  SetPhase("gone-ttl-worker-0", "Succeeded");
  ReconcileResult r = Pass("gone-ttl");
  ASSERT_TRUE(r.status_written);
  ASSERT_TRUE(r.job_deleted);
  EXPECT_EQ(reconciler_.awaited_writes(), 0u);

  Create(MakeJob("gone-user", 1, 1, "Never"));
  ASSERT_TRUE(Pass("gone-user").status.ok());
  EXPECT_EQ(reconciler_.awaited_writes(), 1u);  // its first status write
  ASSERT_TRUE(client_.Delete(kube::TrainingJobs(), "default", "gone-user", {}).ok());
  Pass("gone-user");
  EXPECT_EQ(reconciler_.awaited_writes(), 0u);
}

TEST_F(ReconcilerTest, ScalingWorkersDownDeletesTheExtraPods) {
  Create(MakeJob("scale", 1, 3, "OnFailure"));
  ASSERT_TRUE(Pass("scale").status.ok());
  EditSpec("scale", [](Json& spec) { spec["replicaSpecs"]["Worker"]["replicas"] = 2; });
  ReconcileResult r = Pass("scale");
  EXPECT_EQ(r.pods_deleted, 1);
  EXPECT_EQ(r.services_deleted, 0);  // the job's one Service names whichever pods there are
  EXPECT_EQ(Names(kube::Pods()),
            (std::vector<std::string>{"scale-ps-0", "scale-worker-0", "scale-worker-1"}));
  EXPECT_EQ(Status("scale").workers, "0/2");
}

// A per-replica Service an older operator made (one per replica, before the job's one) of a
// replica the spec no longer has is deleted; one within the count is kept, as a running pod of
// that older operator may still be dialled by it. A delete that fails is reported, so the job is
// queued again and the delete retried.
TEST_F(ReconcilerTest, AnOlderOperatorsServiceBeyondTheCountIsDeletedAndAFailedDeleteRetried) {
  Create(MakeJob("svc", 1, 3, "OnFailure"));
  ASSERT_TRUE(Pass("svc").status.ok());
  for (const char* index : {"1", "2"}) {
    const Json legacy = {
        {"apiVersion", "v1"},
        {"kind", "Service"},
        {"metadata",
         {{"name", absl::StrCat("svc-worker-", index)},
          {"namespace", "default"},
          {"labels",
           {{kJobNameLabel, "svc"}, {kReplicaTypeLabel, "worker"}, {kReplicaIndexLabel, index}}},
          {"ownerReferences", Json::array({{{"apiVersion", "psflow.io/v1alpha1"},
                                            {"kind", "TrainingJob"},
                                            {"name", "svc"},
                                            {"uid", kube::Uid(Job("svc"))},
                                            {"controller", true}}})}}},
        {"spec", {{"clusterIP", "None"}}}};
    ASSERT_TRUE(client_.Create(kube::Services(), "default", legacy).ok());
  }
  EditSpec("svc", [](Json& spec) { spec["replicaSpecs"]["Worker"]["replicas"] = 2; });
  Refuse("delete", "services", absl::UnavailableError("the API server is busy"));
  ReconcileResult r = Pass("svc");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_EQ(r.services_deleted, 0);
  client_.SetFault(nullptr);
  r = Pass("svc");
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.services_deleted, 1);
  EXPECT_EQ(Names(kube::Services()), (std::vector<std::string>{"svc", "svc-worker-1"}));
}

// A view whose pod and service lists never change: the informer cache lagging behind.
class FrozenView : public ClusterView {
 public:
  explicit FrozenView(kube::KubeClient& client) : fresh_(client) {}
  ObjectPtr Job(const std::string& ns, const std::string& name) const override {
    return fresh_.Job(ns, name);
  }
  std::vector<ObjectPtr> Pods(const std::string&, const std::string&) const override { return {}; }
  std::vector<ObjectPtr> Services(const std::string&, const std::string&) const override {
    return {};
  }

 private:
  DirectView fresh_;
};

TEST_F(ReconcilerTest, ALaggingCacheNeverCausesDuplicates) {
  FrozenView frozen(client_);
  Reconciler lagging(client_, frozen, expectations_, events_, [this] { return now_; });
  Create(MakeJob("lag", 1, 2, "OnFailure"));
  ASSERT_EQ(lagging.Reconcile("default", "lag").pods_created, 3);
  // The cache has not shown the pods: expectations hold the next pass back.
  ReconcileResult held = lagging.Reconcile("default", "lag");
  EXPECT_EQ(held.pods_created, 0);
  EXPECT_EQ(*held.requeue_after, absl::Seconds(5));
  // The job, its pods, its Service, one event and (TLS) its Secret.
  EXPECT_EQ(client_.CallCount("create"), 1 + 3 + 1 + 1 + 1);
  // Even with expectations gone the names are fixed: the API answers AlreadyExists.
  expectations_.Forget("default/lag");
  ReconcileResult again = lagging.Reconcile("default", "lag");
  EXPECT_TRUE(again.status.ok()) << again.status;
  EXPECT_EQ(Names(kube::Pods()).size(), 3u);
  EXPECT_EQ(Names(kube::Services()).size(), 1u);
}

TEST_F(ReconcilerTest, FailedCreationsAreRetriedAndExpectationsReleased) {
  Create(MakeJob("flaky", 1, 1, "OnFailure"));
  Refuse("create", "pods", absl::UnavailableError("connection refused"), "flaky-worker-0");
  ReconcileResult r = reconciler_.Reconcile("default", "flaky");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Names(kube::Pods()), std::vector<std::string>{"flaky-ps-0"});
  expectations_.CreationObserved("default/flaky");  // the informer sees flaky-ps-0
  EXPECT_TRUE(expectations_.Satisfied("default/flaky"));
  client_.SetFault(nullptr);
  r = Pass("flaky");
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.pods_created, 1);
}

// spec.networkPolicy.enabled: the NetworkPolicy comes first; while it cannot be made no pod is,
// and once it exists later passes that make pods find it there.
// A gang's PodGroup comes before its pods, which join it; without the scheduler's resource no
// pod is made, and a Warning says what is missing.
TEST_F(ReconcilerTest, AGangsPodGroupComesBeforeItsPodsWhichJoinIt) {
  Json job = MakeJob("gang", 1, 2, "OnFailure");
  job["spec"]["runPolicy"]["schedulingPolicy"] = {{"gang", "volcano"}, {"queue", "research"}};
  Create(job);
  ReconcileResult r = Pass("gang");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_TRUE(Names(kube::Pods()).empty());
  EXPECT_EQ(Events("GangSchedulerMissing"),
            std::vector<std::string>{
                "Warning: spec.runPolicy.schedulingPolicy.gang volcano needs the PodGroup resource "
                "podgroups.scheduling.volcano.sh/v1beta1, which this cluster does not serve (is "
                "Volcano installed?); no pod is made until it is"});

  store_.RegisterResource(kube::VolcanoPodGroups(), false);
  r = Pass("gang");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 3);
  const Json group = client_.Get(kube::VolcanoPodGroups(), "default", "gang").value();
  EXPECT_EQ(group["spec"]["minMember"], 3);
  EXPECT_EQ(group["spec"]["minTaskMember"], Json({{"ps", 1}, {"worker", 2}}));
  EXPECT_EQ(group["spec"]["queue"], "research");
  EXPECT_EQ(kube::ControllerUid(group), kube::Uid(Job("gang")));
  const Json pod = client_.Get(kube::Pods(), "default", "gang-worker-1").value();
  EXPECT_EQ(pod["spec"]["schedulerName"], "volcano");
  EXPECT_EQ(pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"], "gang");
  EXPECT_EQ(pod["metadata"]["annotations"]["volcano.sh/task-spec"], "worker");
  EXPECT_THAT(Events("SuccessfulCreate").back(), ::testing::HasSubstr("PodGroup gang"));
  // A replaced pod finds the PodGroup there.
  SetPhase("gang-worker-1", "Failed", 1);
  ASSERT_TRUE(Pass("gang").status.ok());
  r = Pass("gang");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 1);
  EXPECT_EQ(client_.Get(kube::VolcanoPodGroups(), "default", "gang").value(), group);

  // Scaled down to one worker, then a pod replaced: the gang no longer waits for the worker gone
  // (with minMember 3 Volcano would never place the replacement). A field the operator does not
  // set (a scheduler's default) stays.
  Json defaulted = client_.Get(kube::VolcanoPodGroups(), "default", "gang").value();
  defaulted["spec"]["minTaskMember"]["extra"] = 0;
  defaulted["spec"]["defaultedByTheScheduler"] = "kept";
  ASSERT_TRUE(client_.Update(kube::VolcanoPodGroups(), "default", defaulted).ok());
  EditSpec("gang", [](Json& spec) { spec["replicaSpecs"]["Worker"]["replicas"] = 1; });
  ASSERT_TRUE(Pass("gang").status.ok());
  SetPhase("gang-ps-0", "Failed", 1);
  ASSERT_TRUE(Pass("gang").status.ok());
  r = Pass("gang");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 1);
  const Json scaled = client_.Get(kube::VolcanoPodGroups(), "default", "gang").value();
  EXPECT_EQ(scaled["spec"]["minMember"], 2);
  EXPECT_EQ(scaled["spec"]["minTaskMember"], Json({{"ps", 1}, {"worker", 1}}));
  EXPECT_EQ(scaled["spec"]["defaultedByTheScheduler"], "kept");
  EXPECT_THAT(Events("SuccessfulCreate"), ::testing::Contains(::testing::HasSubstr(
                                              "; updated PodGroup gang (the replica counts now)")));
  // An RBAC older than this operator (create only): the PodGroup is there, the pods go on.
  Refuse("get", "podgroups", absl::PermissionDeniedError("forbidden"));
  SetPhase("gang-worker-0", "Failed", 1);
  ASSERT_TRUE(Pass("gang").status.ok());
  r = Pass("gang");
  client_.SetFault(nullptr);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 1);
}

TEST_F(ReconcilerTest, AnOptedInJobsNetworkPolicyComesBeforeItsPods) {
  store_.RegisterResource(kube::NetworkPolicies(), false);
  Json job = MakeJob("fenced", 1, 1, "ExitCode");
  job["spec"]["networkPolicy"] = {{"enabled", true}};
  Create(job);
  Refuse("create", "networkpolicies", absl::UnavailableError("connection refused"));
  ReconcileResult r = Pass("fenced");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_EQ(r.status.message(), "NetworkPolicy fenced-network: connection refused");
  EXPECT_TRUE(Names(kube::Pods()).empty());
  client_.SetFault(nullptr);
  r = Pass("fenced");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 2);
  EXPECT_EQ(Names(kube::NetworkPolicies()), std::vector<std::string>{"fenced-network"});
  const Json policy = client_.Get(kube::NetworkPolicies(), "default", "fenced-network").value();
  EXPECT_EQ(kube::ControllerUid(policy), kube::Uid(Job("fenced")));
  // A replaced pod: the policy is asked for again, found, and the pod made.
  SetPhase("fenced-worker-0", "Failed", 137, "OOMKilled");
  ASSERT_TRUE(Pass("fenced").status.ok());
  r = Pass("fenced");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 1);
  EXPECT_EQ(Names(kube::NetworkPolicies()), std::vector<std::string>{"fenced-network"});
}

// An edit of spec.networkPolicy reaches the policy when pods are next made; a policy of the name
// that is another's is not taken for the job's: no pod is made until it goes.
TEST_F(ReconcilerTest, AnEditedNetworkPolicyIsUpdatedAndAnotherOwnersHoldsThePodsBack) {
  store_.RegisterResource(kube::NetworkPolicies(), false);
  Json job = MakeJob("edited", 1, 1, "ExitCode");
  job["spec"]["networkPolicy"] = {{"enabled", true}};
  Create(job);
  ASSERT_TRUE(Pass("edited").status.ok());
  const Json monitoring = {{"namespaceSelector", {{"matchLabels", {{"team", "monitoring"}}}}}};
  EditSpec("edited",
           [&](Json& spec) { spec["networkPolicy"]["metricsFrom"] = Json::array({monitoring}); });
  SetPhase("edited-worker-0", "Failed", 137, "OOMKilled");
  ASSERT_TRUE(Pass("edited").status.ok());
  ReconcileResult r = Pass("edited");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.pods_created, 1);
  const Json policy = client_.Get(kube::NetworkPolicies(), "default", "edited-network").value();
  EXPECT_TRUE(absl::StrContains(policy["spec"].dump(), "monitoring")) << policy["spec"];

  const Json other = {{"apiVersion", "networking.k8s.io/v1"},
                      {"kind", "NetworkPolicy"},
                      {"metadata", {{"name", "theirs-network"}, {"namespace", "default"}}},
                      {"spec", {{"podSelector", Json::object()}}}};
  ASSERT_TRUE(client_.Create(kube::NetworkPolicies(), "default", other).ok());
  Json theirs = MakeJob("theirs", 1, 1, "ExitCode");
  theirs["spec"]["networkPolicy"] = {{"enabled", true}};
  Create(theirs);
  r = Pass("theirs");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kUnavailable) << r.status;
  EXPECT_TRUE(absl::StrContains(r.status.message(),
                                "exists but is not owned by TrainingJob "
                                "default/theirs"))
      << r.status;
  for (const std::string& pod : Names(kube::Pods())) {
    EXPECT_FALSE(absl::StartsWith(pod, "theirs-")) << pod;
  }
}

TEST_F(ReconcilerTest, AJobWithoutNetworkPolicyGetsNone) {
  store_.RegisterResource(kube::NetworkPolicies(), false);
  Create(MakeJob("open", 1, 1, "OnFailure"));
  int policy_calls = 0;
  client_.SetFault([&](absl::string_view, const kube::Resource& r, absl::string_view) {
    if (r.plural == "networkpolicies") ++policy_calls;
    return absl::OkStatus();
  });
  ASSERT_TRUE(Pass("open").status.ok());
  client_.SetFault(nullptr);
  EXPECT_EQ(Names(kube::Pods()).size(), 2u);
  EXPECT_TRUE(Names(kube::NetworkPolicies()).empty());
  EXPECT_EQ(policy_calls, 0);
}

// A template the API refuses: slow start means one refused create, then the job fails for good.
TEST_F(ReconcilerTest, ARefusedPodTemplateCostsOneCreateAndFailsTheJob) {
  Create(MakeJob("refused", 1, 8, "OnFailure"));
  int pod_creates = 0;
  client_.SetFault([&](absl::string_view verb, const kube::Resource& r, absl::string_view) {
    if (verb != "create" || r.plural != "pods") return absl::OkStatus();
    ++pod_creates;
    return absl::InvalidArgumentError(
        "Pod \"refused-ps-0\" is invalid: spec.containers[0].name: Invalid value: \"Bad_Name\"");
  });
  ReconcileResult r = Pass("refused");
  client_.SetFault(nullptr);
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(pod_creates, 1);
  const JobStatus status = Status("refused");
  EXPECT_EQ(status.State(), "Failed");
  EXPECT_EQ(status.Find(ConditionType::kFailed)->reason, "InvalidPodTemplate");
  EXPECT_TRUE(absl::StrContains(status.Find(ConditionType::kFailed)->message, "Bad_Name"));
  EXPECT_TRUE(Pass("refused").status.ok());  // finished: nothing is retried
  EXPECT_EQ(pod_creates, 1);
}

TEST_F(ReconcilerTest, CreationIsBoundedPerPassAndStopsWithTheOperator) {
  ReconcilerOptions options;
  options.max_creates_per_pass = 10;
  bool stopping = false;
  options.stopping = [&] { return stopping; };
  Reconciler bounded(
      client_, view_, expectations_, events_, [this] { return now_; }, options);
  Create(MakeJob("big", 1, 20, "OnFailure"));
  ReconcileResult r = bounded.Reconcile("default", "big");
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.services_created, 1);
  EXPECT_EQ(r.pods_created, 10);
  EXPECT_EQ(r.requeue_after, absl::ZeroDuration());  // back at once for the rest
  int passes = 1;
  int created = 10;
  while (created < 21 && passes < 10) {
    expectations_.Forget("default/big");  // as the informer would, having seen them
    r = bounded.Reconcile("default", "big");
    ASSERT_TRUE(r.status.ok()) << r.status;
    created += r.pods_created;
    ++passes;
  }
  EXPECT_EQ(created, 21);
  EXPECT_EQ(passes, 3);
  EXPECT_EQ(Names(kube::Pods()).size(), 21u);
  // A stopping operator creates nothing more.
  Create(MakeJob("late", 1, 1, "OnFailure"));
  stopping = true;
  r = bounded.Reconcile("default", "late");
  EXPECT_EQ(r.services_created + r.pods_created, 0);
}

// A conflict on the status write (another writer bumped the job) is retried once on the current
// version when nobody changed the status meanwhile; a second conflict is reported, and the next
// pass writes.
// Issue 29: a pod the scheduler cannot place gives the job the Unschedulable condition and one
// Warning event with the scheduler's message (not repeated while it stays the same); the
// condition turns False once the pod is placed.
TEST_F(ReconcilerTest, AnUnschedulablePodIsAConditionAndOneWarningEvent) {
  Create(MakeJob("big", 1, 1, "OnFailure"));
  ASSERT_TRUE(Pass("big").status.ok());
  SetPhase("big-ps-0", "Running");
  const std::string why = "0/1 nodes are available: 1 Insufficient cpu.";
  Json pod = client_.Get(kube::Pods(), "default", "big-worker-0").value();
  pod["status"]["phase"] = "Pending";
  pod["status"]["conditions"] = Json::array({{{"type", "PodScheduled"},
                                              {"status", "False"},
                                              {"reason", "Unschedulable"},
                                              {"message", why}}});
  ASSERT_TRUE(client_.UpdateStatus(kube::Pods(), "default", pod).ok());
  const std::string message = "Worker 0 (pod big-worker-0): " + why;
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE(Pass("big").status.ok());
    const JobStatus status = Status("big");
    const Condition* c = status.Find(ConditionType::kUnschedulable);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->status);
    EXPECT_EQ(c->message, message);
  }
  EXPECT_EQ(Events("Unschedulable"), std::vector<std::string>{"Warning: " + message});
  SetPhase("big-worker-0", "Running");
  ASSERT_TRUE(Pass("big").status.ok());
  const JobStatus status = Status("big");
  const Condition* c = status.Find(ConditionType::kUnschedulable);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->status);
}

// Issue 31: a queue (Kueue's webhook, played here) gates the pods as they are made and removes
// the gates when it admits the group. Meanwhile the job is Queued, not late; from the admission
// on, its scheduling timeout runs.
TEST_F(ReconcilerTest, PodsAQueueHoldsBackAreQueuedAndTheTimeoutCountsFromTheirAdmission) {
  Json job = MakeJob("q", 1, 1, "OnFailure");
  job["spec"]["runPolicy"]["schedulingTimeoutSeconds"] = 30;
  Create(job);
  ASSERT_TRUE(Pass("q").status.ok());
  const auto gate = [&](const Json& gates) {
    for (const char* name : {"q-ps-0", "q-worker-0"}) {
      Json pod = client_.Get(kube::Pods(), "default", name).value();
      pod["spec"]["schedulingGates"] = gates;
      ASSERT_TRUE(client_.Update(kube::Pods(), "default", pod).ok()) << name;
    }
  };
  gate(Json::array({{{"name", "kueue.x-k8s.io/admission"}}}));
  const std::string message =
      "PS 0 (pod q-ps-0) waits for its scheduling gates to go: kueue.x-k8s.io/admission (and 1 "
      "more pods)";
  for (int pass = 0; pass < 2; ++pass) {
    now_ += absl::Seconds(600);  // far past the timeout: queued time does not count
    const ReconcileResult r = Pass("q");
    ASSERT_TRUE(r.status.ok());
    EXPECT_FALSE(r.requeue_after.has_value());
    const JobStatus status = Status("q");
    EXPECT_EQ(status.State(), "Queued");
    const Condition* c = status.Find(ConditionType::kQueued);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE(c->status);
    EXPECT_EQ(c->reason, "SchedulingGated");
    EXPECT_EQ(c->message, message);
  }
  EXPECT_EQ(Events("Queued"), std::vector<std::string>{"Normal: " + message});

  gate(Json::array());  // admitted
  ReconcileResult r = Pass("q");
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.requeue_after, absl::Seconds(30));
  JobStatus status = Status("q");
  const Condition* c = status.Find(ConditionType::kQueued);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->status);
  EXPECT_EQ(c->reason, "Admitted");
  EXPECT_EQ(c->last_transition_time, FormatTimestamp(now_));
  EXPECT_EQ(Events("Admitted").size(), 1u);
  now_ += absl::Seconds(29);
  ASSERT_TRUE(Pass("q").status.ok());
  EXPECT_EQ(Status("q").State(), "Created");
  now_ += absl::Seconds(1);
  ASSERT_TRUE(Pass("q").status.ok());
  status = Status("q");
  EXPECT_EQ(status.State(), "Failed");
  EXPECT_EQ(status.Find(ConditionType::kFailed)->reason, "Unschedulable");
}

// A queued job suspended is no longer queued; resumed, its new pods say nothing of an admission
// until they are there, and a queue that gates them again queues it again.
TEST_F(ReconcilerTest, AQueuedJobSuspendedAndResumedIsQueuedAgainWithoutASpuriousAdmission) {
  Create(MakeJob("qsr", 1, 1, "OnFailure"));
  ASSERT_TRUE(Pass("qsr").status.ok());
  const auto gate_all = [&] {
    for (const char* name : {"qsr-ps-0", "qsr-worker-0"}) {
      Json pod = client_.Get(kube::Pods(), "default", name).value();
      pod["spec"]["schedulingGates"] = Json::array({{{"name", "kueue.x-k8s.io/admission"}}});
      ASSERT_TRUE(client_.Update(kube::Pods(), "default", pod).ok()) << name;
    }
  };
  gate_all();
  ASSERT_TRUE(Pass("qsr").status.ok());
  EXPECT_EQ(Status("qsr").State(), "Queued");
  EditSpec("qsr", [](Json& spec) { spec["runPolicy"]["suspend"] = true; });
  ASSERT_TRUE(Pass("qsr").status.ok());
  JobStatus status = Status("qsr");
  EXPECT_EQ(status.State(), "Suspended");
  EXPECT_EQ(status.Find(ConditionType::kQueued)->reason, "Suspended");
  EXPECT_FALSE(status.Is(ConditionType::kQueued));
  EditSpec("qsr", [](Json& spec) { spec["runPolicy"]["suspend"] = false; });
  ASSERT_TRUE(Pass("qsr").status.ok());  // makes the pods again
  gate_all();
  ASSERT_TRUE(Pass("qsr").status.ok());
  EXPECT_EQ(Status("qsr").State(), "Queued");
  EXPECT_TRUE(Events("Admitted").empty());
  EXPECT_EQ(Events("Queued").size(), 2u);
}

// A queued job that ends (here: edited into a spec psflow cannot run) is no longer queued.
TEST_F(ReconcilerTest, AQueuedJobThatFailsIsNoLongerQueued) {
  Create(MakeJob("qf", 1, 1, "OnFailure"));
  ASSERT_TRUE(Pass("qf").status.ok());
  for (const char* name : {"qf-ps-0", "qf-worker-0"}) {
    Json pod = client_.Get(kube::Pods(), "default", name).value();
    pod["spec"]["schedulingGates"] = Json::array({{{"name", "kueue.x-k8s.io/admission"}}});
    ASSERT_TRUE(client_.Update(kube::Pods(), "default", pod).ok()) << name;
  }
  ASSERT_TRUE(Pass("qf").status.ok());
  ASSERT_TRUE(Status("qf").Is(ConditionType::kQueued));
  EditSpec("qf", [](Json& spec) { spec["replicaSpecs"].erase("Worker"); });
  Pass("qf");
  const JobStatus status = Status("qf");
  EXPECT_EQ(status.State(), "Failed");
  EXPECT_FALSE(status.Is(ConditionType::kQueued));
  EXPECT_EQ(status.Find(ConditionType::kQueued)->reason, "InvalidSpec");
}

// A job that ran and is preempted (its pods made again, gated) is Queued, not Running, until its
// queue admits it again.
TEST_F(ReconcilerTest, APreemptedJobIsQueuedNotRunning) {
  CreateRunning(MakeJob("pre", 1, 1, "OnFailure"));
  EXPECT_EQ(Status("pre").State(), "Running");
  for (const char* name : {"pre-ps-0", "pre-worker-0"}) {
    ASSERT_TRUE(client_.Delete(kube::Pods(), "default", name, {}).ok());
  }
  ASSERT_TRUE(Pass("pre").status.ok());  // made again
  for (const char* name : {"pre-ps-0", "pre-worker-0"}) {
    Json pod = client_.Get(kube::Pods(), "default", name).value();
    pod["spec"]["schedulingGates"] = Json::array({{{"name", "kueue.x-k8s.io/admission"}}});
    ASSERT_TRUE(client_.Update(kube::Pods(), "default", pod).ok()) << name;
  }
  ASSERT_TRUE(Pass("pre").status.ok());
  const JobStatus status = Status("pre");
  EXPECT_EQ(status.State(), "Queued");
  EXPECT_FALSE(status.Is(ConditionType::kRunning));
  EXPECT_EQ(status.restart_count, 0);
}

// Issue 31: for a job whose suspend is in use (suspended before, then resumed), the scheduling
// timeout suspends it again, spec included, so that whoever resumed it can resume it again.
TEST_F(ReconcilerTest, ASchedulingTimeoutSuspendsAJobThatWasSuspendedBefore) {
  Json job = MakeJob("qs", 1, 1, "OnFailure");
  job["spec"]["runPolicy"]["suspend"] = true;
  job["spec"]["runPolicy"]["schedulingTimeoutSeconds"] = 30;
  Create(job);
  ASSERT_TRUE(Pass("qs").status.ok());
  EXPECT_EQ(Status("qs").State(), "Suspended");
  EditSpec("qs", [](Json& spec) { spec["runPolicy"]["suspend"] = false; });  // admitted
  ReconcileResult r = Pass("qs");
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.pods_created, 2);
  SetPhase("qs-ps-0", "Running");
  now_ += absl::Seconds(30);  // the worker never runs
  r = Pass("qs");
  ASSERT_TRUE(r.status.ok()) << r.status;
  const Json stored = Job("qs");
  EXPECT_EQ(stored["spec"]["runPolicy"]["suspend"], true);
  const JobStatus status = Status("qs");
  EXPECT_EQ(status.State(), "Suspended");
  const Condition* c = status.Find(ConditionType::kSuspended);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->reason, "SchedulingTimeout");
  const std::string why =
      "not every replica was running within schedulingTimeoutSeconds=30; Worker 0 (pod "
      "qs-worker-0) is still Pending; suspended until resumed";
  EXPECT_EQ(c->message, why);
  EXPECT_FALSE(status.Is(ConditionType::kFailed));
  EXPECT_EQ(status.start_time, "");
  EXPECT_EQ(Events("SchedulingTimeout"),
            std::vector<std::string>{"Warning: " + why.substr(0, why.find("; suspended until")) +
                                     "; suspending it (spec.runPolicy.suspend set)"});
  EXPECT_TRUE(Names(kube::Pods()).empty());
  EXPECT_EQ(r.pods_deleted, 2);
  // Resumed again: the timeout counts from the resumption.
  EditSpec("qs", [](Json& spec) { spec["runPolicy"]["suspend"] = false; });
  r = Pass("qs");
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.pods_created, 2);
  EXPECT_EQ(r.requeue_after, absl::Seconds(30));
}

// After the spec update of a suspension on timeout, a cache still at the version the pass read
// is not acted on (it would suspend again and record the events twice); and an operator whose
// RBAC may not update the job fails it as before.
TEST_F(ReconcilerTest, ASuspensionOnTimeoutWaitsForTheCacheAndFailsWithoutTheRbacForIt) {
  // A job made suspended, resumed (its pods made) and left with them Pending to its timeout.
  const auto resumed_to_its_timeout = [&](const std::string& name) {
    Json job = MakeJob(name, 1, 1, "OnFailure");
    job["spec"]["runPolicy"]["suspend"] = true;
    job["spec"]["runPolicy"]["schedulingTimeoutSeconds"] = 30;
    Create(job);
    ASSERT_TRUE(Pass(name).status.ok());
    EditSpec(name, [](Json& spec) { spec["runPolicy"]["suspend"] = false; });
    ASSERT_TRUE(Pass(name).status.ok());
    now_ += absl::Seconds(30);
  };
  resumed_to_its_timeout("qc");
  StaleJobView stale(client_);
  Reconciler lagging(client_, stale, expectations_, events_, [this] { return now_; });
  ASSERT_TRUE(lagging.Reconcile("default", "qc").status.ok());  // suspends, through the spec
  expectations_.Forget("default/qc");
  EXPECT_EQ(Status("qc").Find(ConditionType::kSuspended)->reason, "SchedulingTimeout");
  EXPECT_EQ(Status("qc").observed_generation, Job("qc")["metadata"]["generation"].get<int64_t>());
  const ReconcileResult again = lagging.Reconcile("default", "qc");  // the cache: before all that
  EXPECT_TRUE(again.status.ok());
  EXPECT_EQ(again.requeue_after, absl::Seconds(5));
  EXPECT_EQ(Events("SchedulingTimeout").size(), 1u);
  EXPECT_EQ(Events("Suspended").size(), 1u);  // the first suspension's, at creation
  EXPECT_EQ(Status("qc").Find(ConditionType::kSuspended)->reason, "SchedulingTimeout");

  resumed_to_its_timeout("qd");
  Refuse("update", "trainingjobs", absl::PermissionDeniedError("forbidden"));
  ASSERT_TRUE(Pass("qd").status.ok());
  client_.SetFault(nullptr);
  const JobStatus status = Status("qd");
  EXPECT_EQ(status.State(), "Failed");
  EXPECT_EQ(status.Find(ConditionType::kFailed)->reason, "Unschedulable");
  EXPECT_THAT(
      status.Find(ConditionType::kFailed)->message,
      ::testing::HasSubstr("not suspended: the operator may not set "
                           "spec.runPolicy.suspend (its RBAC lacks update on trainingjobs)"));
}

// A pass that throws (here the throughput probe: any bug or unforeseen object shape) is an
// INTERNAL error to retry, and the job's owner hears of it: one Warning event per distinct
// message, again after a pass succeeded in between.
TEST_F(ReconcilerTest, AThrowingPassIsAnErrorAndAWarningEventOncePerMessage) {
  Create(MakeJob("mnist", 1, 1, "OnFailure"));
  bool throwing = true;
  ReconcilerOptions options;
  options.throughput = [&](const std::string&) -> std::optional<Throughput> {
    if (throwing) throw std::runtime_error("probe exploded");
    return std::nullopt;
  };
  Reconciler reconciler(
      client_, view_, expectations_, events_, [this] { return now_; }, options);
  const std::string event =
      "Warning: the operator failed to reconcile this job (probe exploded); retrying with backoff";
  for (int i = 0; i < 2; ++i) {
    const ReconcileResult r = reconciler.Reconcile("default", "mnist");
    EXPECT_EQ(r.status.code(), absl::StatusCode::kInternal) << r.status;
    EXPECT_TRUE(absl::StrContains(r.status.message(), "probe exploded")) << r.status;
  }
  EXPECT_EQ(Events("ReconcileError"), std::vector<std::string>{event});
  throwing = false;
  EXPECT_TRUE(reconciler.Reconcile("default", "mnist").status.ok());
  expectations_.Forget(kube::Key("default", "mnist"));
  throwing = true;
  EXPECT_FALSE(reconciler.Reconcile("default", "mnist").status.ok());
  EXPECT_EQ(Events("ReconcileError"), (std::vector<std::string>{event, event}));
}

TEST_F(ReconcilerTest, StatusConflictIsRetriedOnceThenReportedForRetry) {
  Create(MakeJob("race", 1, 1, "OnFailure"));
  ASSERT_TRUE(Pass("race").status.ok());
  RefuseStatusWrites(1);
  SetPhase("race-ps-0", "Running");
  ReconcileResult r = Pass("race");
  EXPECT_TRUE(r.status.ok()) << r.status;
  EXPECT_TRUE(r.status_written);

  RefuseStatusWrites(2);
  SetPhase("race-worker-0", "Running");
  r = Pass("race");
  EXPECT_EQ(r.status.code(), absl::StatusCode::kAborted);
  EXPECT_FALSE(r.status_written);
  r = Pass("race");
  EXPECT_TRUE(r.status.ok());
  EXPECT_TRUE(r.status_written);
  client_.SetFault(nullptr);
}

constexpr char kLostTail[] =
    ". The chief re-initialises its variables from the chief's copy and the global step resumes "
    "from the workers' last; the updates the chief had not pulled and the optimizer's slots are "
    "lost";

// A ps the kubelet restarts without a checkpoint has lost the training progress: the job says so
// in a Warning event and a condition that stays, once; its state is not changed by it.
TEST_F(ReconcilerTest, APsRestartedWithoutCheckpointTellsTheProgressWasLostOnce) {
  ASSERT_NO_FATAL_FAILURE(CreateRunning(MakeJob("lost", 1, 1, "OnFailure")));
  EXPECT_EQ(Status("lost").replica_statuses.at(api::ReplicaType::kPS).observed_pods.size(), 1u);
  EXPECT_EQ(Status("lost").Find(ConditionType::kProgressLost), nullptr);
  now_ += absl::Seconds(30);
  ASSERT_TRUE(store_.RestartContainer("default", "lost-ps-0", 137, "OOMKilled").ok());
  ASSERT_TRUE(Pass("lost").status.ok());

  const std::string message = absl::StrCat(
      "PS 0 (pod lost-ps-0) was restarted in place after exit code 137 (OOMKilled) and lost its "
      "training progress: it keeps no checkpoint (no --checkpoint_dir; "
      "spec.replicaSpecs.PS.checkpoint gives it one)",
      kLostTail);
  const JobStatus status = Status("lost");
  const Condition* lost = status.Find(ConditionType::kProgressLost);
  ASSERT_NE(lost, nullptr);
  EXPECT_TRUE(lost->status);
  EXPECT_EQ(lost->reason, "NoCheckpoint");
  EXPECT_EQ(lost->message, message);
  EXPECT_EQ(lost->last_transition_time, "2027-01-15T08:00:30Z");
  EXPECT_EQ(status.State(), "Running");
  EXPECT_EQ(Job("lost")["status"]["replicaStatuses"]["PS"]["observedPods"][0]["restarts"], 1);
  EXPECT_EQ(Events("ProgressLost"), std::vector<std::string>{"Warning: " + message});

  // Later passes find nothing new: no write, no event, the condition as it was.
  now_ += absl::Seconds(30);
  const int64_t writes = store_.WriteCount();
  ReconcileResult r = Pass("lost");
  EXPECT_TRUE(r.status.ok());
  EXPECT_FALSE(r.status_written);
  EXPECT_EQ(store_.WriteCount(), writes);
  EXPECT_EQ(Events("ProgressLost").size(), 1u);
}

// An emptyDir checkpoint outlives the kubelet's restart (a Normal event, no condition) but not
// the pod: a ps in a new pod starts from nothing.
TEST_F(ReconcilerTest, AnEmptyDirCheckpointOutlivesAnInPlaceRestartButNotThePod) {
  Json job = MakeJob("scratch", 1, 1, "OnFailure");
  job["spec"]["replicaSpecs"]["PS"]["checkpoint"] = {{"volume", "emptyDir"}};
  ASSERT_NO_FATAL_FAILURE(CreateRunning(job));
  ASSERT_TRUE(store_.RestartContainer("default", "scratch-ps-0", 1, "Error").ok());
  ASSERT_TRUE(Pass("scratch").status.ok());
  EXPECT_EQ(Events("RestoringCheckpoint"),
            std::vector<std::string>{
                "Normal: PS 0 (pod scratch-ps-0) was restarted in place after exit code 1 "
                "(Error); it restores its newest checkpoint "
                "(--checkpoint_dir=/var/lib/psflow/checkpoints on emptyDir volume "
                "psflow-checkpoints): the steps since that checkpoint are trained again (had it "
                "written none yet, the chief "
                "re-initialises it and the ps and chief logs say the progress was lost)"});
  EXPECT_EQ(Status("scratch").Find(ConditionType::kProgressLost), nullptr);

  // Deleted (drained, evicted, by hand): the operator makes a new pod, told once its ps runs.
  ASSERT_TRUE(client_.Delete(kube::Pods(), "default", "scratch-ps-0", {}).ok());
  ReconcileResult r = Pass("scratch");
  ASSERT_TRUE(r.status.ok());
  ASSERT_EQ(r.pods_created, 1);
  EXPECT_EQ(Events("ProgressLost").size(), 0u);
  SetPhase("scratch-ps-0", "Running");
  ASSERT_TRUE(Pass("scratch").status.ok());
  const std::string message = absl::StrCat(
      "PS 0 (pod scratch-ps-0) runs in a new pod (the one before was deleted or replaced) and "
      "lost its training progress: its checkpoints (--checkpoint_dir=/var/lib/psflow/checkpoints "
      "on emptyDir volume psflow-checkpoints) went with the old pod (a persistentVolumeClaim "
      "checkpoint outlives it)",
      kLostTail);
  EXPECT_EQ(Events("ProgressLost"), std::vector<std::string>{"Warning: " + message});
  const JobStatus status = Status("scratch");
  const Condition* lost = status.Find(ConditionType::kProgressLost);
  ASSERT_NE(lost, nullptr);
  EXPECT_EQ(lost->reason, "CheckpointLostWithPod");
  EXPECT_EQ(lost->message, message);
  EXPECT_EQ(Events("RestoringCheckpoint").size(), 1u);
}

// A persistentVolumeClaim outlives the pods: suspending and resuming the job loses nothing.
TEST_F(ReconcilerTest, AClaimCheckpointOutlivesSuspendAndResume) {
  Json job = MakeJob("kept", 1, 1, "OnFailure");
  job["spec"]["replicaSpecs"]["PS"]["checkpoint"] = {{"volume", "persistentVolumeClaim"},
                                                     {"claimName", "kept-ckpt"}};
  ASSERT_NO_FATAL_FAILURE(CreateRunning(job));
  EditSpec("kept", [](Json& spec) { spec["runPolicy"]["suspend"] = true; });
  ASSERT_TRUE(Pass("kept").status.ok());
  ASSERT_TRUE(Names(kube::Pods()).empty());
  EditSpec("kept", [](Json& spec) { spec["runPolicy"]["suspend"] = false; });
  ASSERT_EQ(Pass("kept").pods_created, 2);
  RunAll("kept");
  ASSERT_TRUE(Pass("kept").status.ok());
  EXPECT_EQ(Events("RestoringCheckpoint"),
            std::vector<std::string>{
                "Normal: PS 0 (pod kept-ps-0) runs in a new pod (the one before was deleted or "
                "replaced); it restores its newest checkpoint "
                "(--checkpoint_dir=/var/lib/psflow/checkpoints on persistentVolumeClaim kept-ckpt "
                "(volume psflow-checkpoints)): the steps since that checkpoint are trained again "
                "(had it written none yet, the chief "
                "re-initialises it and the ps and chief logs say the progress was lost)"});
  EXPECT_EQ(Events("ProgressLost").size(), 0u);
  EXPECT_EQ(Status("kept").Find(ConditionType::kProgressLost), nullptr);
}

// The event is recorded with the status that holds the restart: a status write that fails (409,
// its retry on the current version too) tells nothing, and the pass after it tells it once.
TEST_F(ReconcilerTest, AProgressLossIsToldOnceEvenWhenItsStatusWriteConflicts) {
  ASSERT_NO_FATAL_FAILURE(CreateRunning(MakeJob("race", 1, 1, "OnFailure")));
  ASSERT_TRUE(store_.RestartContainer("default", "race-ps-0", 137, "OOMKilled").ok());
  RefuseStatusWrites(2);
  EXPECT_EQ(Pass("race").status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Events("ProgressLost").size(), 0u);
  ASSERT_TRUE(Pass("race").status.ok());
  EXPECT_EQ(Events("ProgressLost").size(), 1u);
  ASSERT_TRUE(Pass("race").status.ok());
  EXPECT_EQ(Events("ProgressLost").size(), 1u);
  EXPECT_TRUE(Status("race").Is(ConditionType::kProgressLost));
  client_.SetFault(nullptr);
}

TEST_F(ReconcilerTest, ThroughputComesFromTheProbeAndStaysWhenItHasNone) {
  std::optional<Throughput> measured;
  ReconcilerOptions options;
  options.throughput = [&measured](const std::string& key) {
    EXPECT_EQ(key, "default/lm");
    return measured;
  };
  Reconciler reconciler(
      client_, view_, expectations_, events_, [this] { return now_; }, options);
  auto pass = [&] {
    ReconcileResult r = reconciler.Reconcile("default", "lm");
    expectations_.Forget(kube::Key("default", "lm"));
    return r;
  };
  Create(MakeJob("lm", 1, 1, "OnFailure"));
  ASSERT_TRUE(pass().status.ok());
  EXPECT_FALSE(Job("lm")["status"].contains("throughput"));
  SetPhase("lm-ps-0", "Running");
  SetPhase("lm-worker-0", "Running");
  measured = Throughput{20000.0, 1000.0};
  ASSERT_TRUE(pass().status.ok());
  EXPECT_EQ(Job("lm")["status"]["throughput"],
            (Json{{"wordsPerSecond", 20000.0}, {"examplesPerSecond", 1000.0}}));
  measured.reset();  // e.g. no scrape answered: the last value stays
  ASSERT_TRUE(pass().status.ok());
  EXPECT_DOUBLE_EQ(Status("lm").examples_per_second.value(), 1000.0);
  measured = Throughput{std::nullopt, 900.0};
  ASSERT_TRUE(pass().status.ok());
  EXPECT_FALSE(Status("lm").words_per_second);
  EXPECT_DOUBLE_EQ(Status("lm").examples_per_second.value(), 900.0);
  // Finished: the probe drops the job; the status keeps what it last did.
  measured.reset();
  SetPhase("lm-worker-0", "Succeeded");
  ASSERT_TRUE(pass().status.ok());
  EXPECT_EQ(Status("lm").State(), "Succeeded");
  EXPECT_DOUBLE_EQ(Status("lm").examples_per_second.value(), 900.0);
}

}  // namespace
}  // namespace psflow::controller
