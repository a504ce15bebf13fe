#include "tests/observe/observed_run.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/free_ports.h"
#include "core/http_get.h"
#include "core/prometheus_text.h"
#include "core/status_macros.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/test_util.h"

namespace psflow::observe {
namespace {

namespace fs = std::filesystem;
using kube::Json;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Each worker trains 20 s, however fast the machine: a number of steps took 20 s on one CPU model
// and 8 s on another, too short for Prometheus, which starts scraping a target up to 5 s after
// its file lists it, to see the workers train together for 5 s.
constexpr char kJobManifest[] = R"(apiVersion: psflow.io/v1alpha1
kind: TrainingJob
metadata: {name: observe-lm}
spec:
  replicaSpecs:
    PS:
      replicas: 1
      template:
        spec:
          containers:
            # TCP, not psflow run's shared memory, as a pod's ps would be reached.
            - name: psflow
              command: [psflow-ps]
              env: [{name: PSFLOW_BULK_SOCKET, value: ""}]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
            - name: psflow
              command: [psflow-worker]
              args: [--model=ptb_lstm, --model_config=test, --data_source=synthetic,
                     --compute_threads=1, --train_steps=1000000, --train_seconds=20,
                     --log_every_steps=1000]
)";

// Where prometheus-local.yml's file_sd looks; the test points it at its own directory.
constexpr char kTargetsGlob[] = "/tmp/psflow-targets/*.json";

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Json KubeJob() {
  auto replica = [](int n) {
    return Json{{"replicas", n},
                {"restartPolicy", "OnFailure"},
                {"template",
                 {{"spec",
                   {{"containers",
                     Json::array({{{"name", "psflow"}, {"image", "psflow/worker:test"}}})}}}}}};
  };
  return {{"apiVersion", "psflow.io/v1alpha1"},
          {"kind", "TrainingJob"},
          {"metadata", {{"name", ObservedRun::kKubeJobName}, {"namespace", "default"}}},
          {"spec", {{"replicaSpecs", {{"PS", replica(1)}, {"Worker", replica(1)}}}}}};
}

}  // namespace

absl::StatusOr<std::unique_ptr<ObservedRun>> ObservedRun::Run() {
  std::unique_ptr<ObservedRun> run(new ObservedRun());
  run->dir_ = fs::temp_directory_path() / absl::StrCat("psflow_observe_", getpid());
  fs::remove_all(run->dir_);
  fs::create_directories(run->dir_ / "targets");
  ASSIGN_OR_RETURN(const std::vector<int> ports, FreeLocalPorts(1));
  RETURN_IF_ERROR(run->StartOperator());
  RETURN_IF_ERROR(run->StartPrometheus(ports[0]));
  RETURN_IF_ERROR(run->Train());
  RETURN_IF_ERROR(run->FindTrainingWindow());
  return run;
}

ObservedRun::~ObservedRun() {
  prometheus_.reset();  // both write into dir_
  operator_.reset();
  std::error_code ignored;
  fs::remove_all(dir_, ignored);
}

absl::Status ObservedRun::StartOperator() {
  store_.RegisterBuiltins();
  store_.RegisterResource(kube::TrainingJobs(), /*has_status_subresource=*/true);
  ASSIGN_OR_RETURN(apiserver_, kubetest::TestApiServer::Start(&store_, {}));
  const std::string kubeconfig = (dir_ / "kubeconfig").string();
  RETURN_IF_ERROR(apiserver_->WriteKubeconfig(kubeconfig));
  ASSIGN_OR_RETURN(
      operator_,
      BackgroundProcess::Start(
          {testing::Binary("psflow-operator"), "--kubeconfig=" + kubeconfig, "--identity=observe",
           // Any free port, read back from its log: a port picked here first could be taken
           // (by a connection of a test beside this one) before the operator binds it.
           "--metrics_address=127.0.0.1", "--metrics_port=0",
           // The default lease and renew deadline: on a loaded machine a renewal may take a
           // second or more, and a replica that lost its lease stops its controller.
           "--lease_namespace=default", "--lease_duration_s=15", "--renew_deadline_s=10",
           "--retry_period_s=0.25", "--workers=2"},
          testing::Environment({})));
  const auto give_up = std::chrono::steady_clock::now() + seconds(60);
  while (operator_port_ == 0) {
    for (const std::string& line : testing::LinesWith(operator_->output(), "serving /metrics")) {
      operator_port_ = std::stoi(line.substr(line.rfind(':') + 1));
    }
    if (operator_port_ != 0) break;
    if (operator_->Wait(milliseconds(50)).has_value() ||
        std::chrono::steady_clock::now() > give_up) {
      return absl::InternalError("psflow-operator did not serve its metrics:\n" +
                                 operator_->output());
    }
  }
  // Listed for Prometheus the way prometheus-local.yml's comment tells a user to.
  std::ofstream(dir_ / "targets" / "operator.json")
      << absl::StrCat(R"([{"targets": ["127.0.0.1:)", operator_port_, R"("], "labels": {"job": ")",
                      kOperatorScrapeJob, "\"}}]\n");
  return store_.Create(kube::TrainingJobs(), "default", KubeJob()).status();
}

absl::Status ObservedRun::StartPrometheus(int port) {
  const std::string source = testing::SourceDir() + "/deploy/prometheus/";
  const std::string config = ReadFile(source + "prometheus-local.yml");
  size_t uses = 0;
  for (size_t at = config.find(kTargetsGlob); at != std::string::npos;
       at = config.find(kTargetsGlob, at + 1)) {
    ++uses;
  }
  if (uses != 1) {
    return absl::FailedPreconditionError(absl::StrCat("prometheus-local.yml names ", kTargetsGlob,
                                                      " ", uses, " times, not once: update ",
                                                      "tests/observe/observed_run.cc"));
  }
  std::ofstream(dir_ / "prometheus.yml")
      << absl::StrReplaceAll(config, {{kTargetsGlob, (dir_ / "targets" / "*.json").string()}});
  // rule_files names psflow-alerts.yml relative to the config: copied beside it, unchanged.
  fs::copy_file(source + "psflow-alerts.yml", dir_ / "psflow-alerts.yml");
  ASSIGN_OR_RETURN(prometheus_,
                   PrometheusServer::Start((dir_ / "prometheus.yml").string(),
                                           (dir_ / "tsdb").string(), port, seconds(30)));
  return absl::OkStatus();
}

absl::Status ObservedRun::Train() {
  std::ofstream(dir_ / "job.yaml") << kJobManifest;
  const fs::path targets = dir_ / "targets" / absl::StrCat(kJobName, ".json");
  ASSIGN_OR_RETURN(std::unique_ptr<BackgroundProcess> run,
                   BackgroundProcess::Start(
                       {testing::Binary("psflow"), "run", "--progress=never", "--verbose",
                        "--run_dir=" + (dir_ / "runs").string(),
                        "--prometheus_targets=" + targets.string(), (dir_ / "job.yaml").string()},
                       testing::Environment({})));
  const auto give_up = std::chrono::steady_clock::now() + seconds(240);
  std::optional<local::ExitStatus> exit;
  while (!(exit = run->Wait(milliseconds(100)))) {
    if (std::chrono::steady_clock::now() > give_up) {
      return absl::DeadlineExceededError("psflow run did not end:\n" + run->output());
    }
    DriveKubeJob();
    if (scraped_.empty()) {
      // Every read must parse: the runner replaces the file whole.
      const Json listed = Json::parse(ReadFile(targets), nullptr, false);
      if (listed.is_array() && !listed.empty()) {
        targets_while_training_ = listed.dump();
        ScrapeEveryTarget();
      }
    }
  }
  run_output_ = run->output();
  run_status_ = *exit;
  targets_after_ = ReadFile(targets);
  if (!run_status_.ok() || scraped_.empty()) {
    return absl::InternalError(absl::StrCat("psflow run: ", run_status_.Describe(),
                                            scraped_.empty() ? ", no replica scraped" : "", "\n",
                                            run_output_));
  }
  return absl::OkStatus();
}

void ObservedRun::DriveKubeJob() {
  kube::ListOptions selector;
  selector.label_selector = absl::StrCat("psflow.io/job-name=", kKubeJobName);
  auto pods = store_.List(kube::Pods(), "default", selector);
  if (!pods.ok()) return;
  auto job = store_.Get(kube::TrainingJobs(), "default", kKubeJobName);
  const std::string state = job.ok() ? kube::StringAt(*job, "status", "state") : "";
  if (state == "Created" && pods->items.size() == 2) {
    for (const Json& pod : pods->items) {
      if (kube::StringAt(pod, "status", "phase") != "Running") {
        store_.SetPodPhase("default", kube::Name(pod), "Running").IgnoreError();
      }
    }
  } else if (state == "Running") {
    // The chief completes: the job succeeds and the operator deletes the ps pod.
    store_.SetPodPhase("default", absl::StrCat(kKubeJobName, "-worker-0"), "Succeeded")
        .IgnoreError();
  }
}

void ObservedRun::ScrapeEveryTarget() {
  const Json groups = Json::parse(targets_while_training_);
  std::map<std::string, std::string> scraped;
  for (const Json& group : groups) {
    const std::string address = group["targets"][0];
    const std::string name = absl::StrCat(group["labels"].value("replica_type", "?"), "-",
                                          group["labels"].value("replica_index", "?"));
    auto text = HttpGet("127.0.0.1", std::stoi(address.substr(address.rfind(':') + 1)), "/metrics",
                        milliseconds(2000));
    // Wait until every worker has trained a while (a few hundred steps).
    if (!text.ok() || (absl::StartsWith(name, "worker") &&
                       SumSamples(*text, "psflow_worker_steps_total").value_or(0) < 300)) {
      return;
    }
    scraped[name] = *text;
  }
  auto text = HttpGet("127.0.0.1", operator_port_, "/metrics", milliseconds(2000));
  if (!text.ok()) return;
  scraped["operator"] = *text;
  scraped_ = std::move(scraped);
}

absl::Status ObservedRun::FindTrainingWindow() {
  // Every sample Prometheus holds of the workers' word counters.
  ASSIGN_OR_RETURN(
      const Json data,
      prometheus_->Query(absl::StrCat("psflow_worker_words_total{job=\"", kJobName, "\"}[10m]"),
                         UnixNow()));
  if (data["result"].size() != 2) {
    return absl::InternalError("expected the series of 2 workers, got " + data.dump());
  }
  window_start_ = 0;
  window_end_ = 1e300;
  for (const Json& series : data["result"]) {
    double last = 0;
    for (const Json& sample : series["values"]) {
      last = std::max(last, std::stod(sample[1].get<std::string>()));
    }
    double first_rise = 1e300, last_before_end = 0;
    for (const Json& sample : series["values"]) {
      const double t = sample[0].get<double>();
      const double v = std::stod(sample[1].get<std::string>());
      if (v > 0) first_rise = std::min(first_rise, t);
      if (v < last) last_before_end = std::max(last_before_end, t);
    }
    window_start_ = std::max(window_start_, first_rise);
    window_end_ = std::min(window_end_, last_before_end);
  }
  if (window_end_ - window_start_ < 5) {
    return absl::InternalError(absl::StrCat("the workers trained together for only ",
                                            window_end_ - window_start_, " s: ", data.dump()));
  }
  return absl::OkStatus();
}

}  // namespace psflow::observe
