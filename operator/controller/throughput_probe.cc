#include "operator/controller/throughput_probe.h"

#include <condition_variable>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/prometheus_text.h"
#include "operator/controller/pod_state.h"
#include "operator/controller/replica_objects.h"
#include "operator/kube/object_meta.h"

namespace psflow::controller {
namespace {

constexpr char kExamples[] = "psflow_worker_examples_total";
constexpr char kWords[] = "psflow_worker_words_total";

int MetricsPort(const kube::Json& pod) {
  const kube::Json* containers = nullptr;
  if (pod.contains("spec") && pod["spec"].is_object() && pod["spec"].contains("containers")) {
    containers = &pod["spec"]["containers"];
  }
  if (containers == nullptr || !containers->is_array()) return kDefaultMetricsPort;
  for (const kube::Json& container : *containers) {
    if (!container.is_object() || !container.contains("ports")) continue;
    const kube::Json& ports = container["ports"];
    if (!ports.is_array()) continue;
    for (const kube::Json& port : ports) {
      if (port.is_object() && port.contains("name") && port["name"] == kMetricsPortName &&
          port.contains("containerPort") && port["containerPort"].is_number_integer()) {
        return port["containerPort"].get<int>();
      }
    }
  }
  return kDefaultMetricsPort;
}

}  // namespace

bool ProbedState(const kube::Json& job) {
  const std::string state = kube::StringAt(job, "status", "state");
  return state == "Running" || state == "Restarting";
}

std::vector<ScrapeTarget> ScrapeTargets(const kube::Json& job, const std::vector<ObjectPtr>& pods) {
  std::vector<ScrapeTarget> targets;
  const std::string uid = kube::Uid(job);
  for (const ObjectPtr& pod : pods) {
    if (uid.empty() || kube::ControllerUid(*pod) != uid) continue;
    const std::string type = kube::Label(*pod, kReplicaTypeLabel);
    if (type != "worker" && type != "chief") continue;  // the ps count no examples
    const PodState state = ReadPodState(*pod);
    const std::string ip = kube::StringAt(*pod, "status", "podIP");
    if (state.phase != PodPhase::kRunning || state.being_deleted || ip.empty()) continue;
    targets.push_back({kube::Uid(*pod), kube::Name(*pod), ip, MetricsPort(*pod)});
  }
  return targets;
}

ThroughputProbe::ThroughputProbe(Options options, ListJobs list_jobs, Scrape scrape,
                                 Changed changed, std::function<absl::Time()> now,
                                 OperatorMetrics* metrics)
    : options_(options),
      list_jobs_(std::move(list_jobs)),
      scrape_(std::move(scrape)),
      changed_(std::move(changed)),
      now_(std::move(now)),
      metrics_(metrics) {}

void ThroughputProbe::Run(std::stop_token stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  while (!stop.stop_requested()) {
    const auto next = std::chrono::steady_clock::now() +
                      std::chrono::microseconds(absl::ToInt64Microseconds(options_.interval));
    ProbeOnce(stop);
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_until(lock, stop, next, [] { return false; });
  }
}

void ThroughputProbe::ProbeOnce(std::stop_token stop) {
  const std::vector<ProbedJob> jobs = list_jobs_();
  std::set<std::string> listed;
  for (const ProbedJob& job : jobs) {
    if (stop.stop_requested()) return;
    listed.insert(job.key);
    if (ProbeJob(job, jobs_[job.key])) changed_(job.key);
  }
  // Jobs no longer probed: their status keeps the last value written.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (listed.count(it->first)) {
      ++it;
      continue;
    }
    latest_.erase(it->first);
    it = jobs_.erase(it);
  }
}

bool ThroughputProbe::ProbeJob(const ProbedJob& job, JobState& state) {
  std::vector<PodCounters> samples;
  std::set<std::string> targets;
  std::string failure;  // the round's first failed scrape
  for (const ScrapeTarget& target : job.targets) {
    targets.insert(target.uid);
    absl::StatusOr<std::string> text = scrape_(target);
    const absl::Time answered = now_();
    std::optional<double> examples;
    if (text.ok()) examples = SumSamples(*text, kExamples);
    if (metrics_ != nullptr) metrics_->CountThroughputScrape(examples.has_value());
    if (!examples) {
      if (failure.empty()) {
        failure = absl::StrCat(
            "pod ", target.name, " (", target.ip, ":", target.port, "/metrics): ",
            text.ok() ? absl::StrCat("no ", kExamples) : std::string(text.status().message()));
      }
      continue;
    }
    samples.push_back({target.uid, *examples, SumSamples(*text, kWords), answered});
  }
  if (!failure.empty() && !state.failing) {
    PSFLOW_LOG(WARNING) << "throughput of TrainingJob " << job.key << ": cannot scrape " << failure
                        << " (logged once until a round succeeds)";
  }
  state.failing = !failure.empty();

  const Throughput rates = state.rate.Update(samples, targets);
  std::optional<Throughput> now;
  if (rates.examples_per_second) now = rates;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = latest_.find(job.key);
  std::optional<Throughput> before;
  if (it != latest_.end()) before = it->second;
  if (!ThroughputChanged(before, now, options_.change_fraction)) return false;
  if (now) {
    latest_[job.key] = *now;
  } else {
    latest_.erase(job.key);
  }
  return true;
}

std::optional<Throughput> ThroughputProbe::Latest(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = latest_.find(key);
  if (it == latest_.end()) return std::nullopt;
  return it->second;
}

}  // namespace psflow::controller
