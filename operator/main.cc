// psflow-operator: runs TrainingJobs on Kubernetes. Watches TrainingJob resources and, for each,
// creates one pod per replica with TF_CONFIG injected and one headless Service, keeps the job's
// status, restarts replicas per their restartPolicy, enforces deadlines and cleans up.
//
// With --leader_elect (the default) several replicas may run: the one holding the Lease
// <lease_namespace>/<lease_name> acts, the others wait to take over. A leader that loses the
// Lease stops acting and stands by. SIGTERM/SIGINT stop it
// gracefully: workers drain, the Lease is released, the process exits 0.
#include <signal.h>
#include <unistd.h>

#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "core/backoff.h"
#include "core/command_line.h"
#include "core/log.h"
#include "core/metrics.h"
#include "operator/controller/controller.h"
#include "operator/controller/leader_election.h"
#include "operator/controller/operator_metrics.h"
#include "operator/controller/replica_objects.h"
#include "operator/controller/shared_memory_channel.h"
#include "operator/kube/kubeconfig.h"
#include "operator/kube/rest_client.h"

ABSL_FLAG(std::string, kubeconfig, "",
          "kubeconfig file (default: $KUBECONFIG, else in-cluster service account, else "
          "~/.kube/config)");
ABSL_FLAG(std::string, context, "", "kubeconfig context (default: its current-context)");
ABSL_FLAG(std::string, namespace, "", "Namespace to watch; empty watches all namespaces");
ABSL_FLAG(int, workers, 4, "Reconcile worker threads");
ABSL_FLAG(double, qps, 300, "Requests per second to the API server (client-side rate limit)");
ABSL_FLAG(int, burst, 600, "Request burst above --qps");
ABSL_FLAG(std::string, metrics_address, "0.0.0.0", "Address of /metrics, /healthz, /readyz");
ABSL_FLAG(int, metrics_port, 8080, "Port of /metrics, /healthz, /readyz (0: any free port)");
ABSL_FLAG(bool, leader_elect, true, "Run only while holding the leader Lease");
ABSL_FLAG(std::string, lease_name, "psflow-operator", "Name of the leader Lease");
ABSL_FLAG(std::string, lease_namespace, "",
          "Namespace of the leader Lease (default: $POD_NAMESPACE, else the watched namespace, "
          "else default)");
ABSL_FLAG(std::string, identity, "",
          "This replica's name in the Lease (default: $POD_NAME, "
          "else hostname_pid)");
ABSL_FLAG(double, lease_duration_s, 15, "Leader Lease duration");
ABSL_FLAG(double, renew_deadline_s, 10, "Give up leadership when not renewed for this long");
ABSL_FLAG(double, retry_period_s, 2, "Interval of Lease acquire/renew attempts");
ABSL_FLAG(int, watch_timeout_s, 300, "Server-side timeout of each watch (then re-watched)");
ABSL_FLAG(double, throughput_interval_s, 30,
          "Seconds between scrapes of the running jobs' worker /metrics for status.throughput "
          "(the WORDS/S and EXAMPLES/S columns); 0: off");
ABSL_FLAG(std::string, log_format, "text", "Log lines: text or json");
ABSL_FLAG(std::string, shared_memory_dir, psflow::controller::kDefaultSharedMemoryDir,
          "The directory of each node under which a job with spec.sharedMemory gets its own "
          "(<dir>/<job uid>, a hostPath volume of its pods, made mode 1777) for its ps tasks' "
          "sockets");

namespace {

using psflow::controller::Controller;
using psflow::controller::OperatorMetrics;

constexpr char kUsage[] =
    "psflow-operator [--kubeconfig=FILE] [--namespace=NS] [--leader_elect=true] ...\n"
    "Runs psflow TrainingJobs on Kubernetes.";

int Fail(const std::string& message) {
  std::fprintf(stderr, "psflow-operator: %s\n", message.c_str());
  return 1;
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : fallback;
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// One line naming what is missing, for the errors no retry can fix.
std::string Explain(const absl::Status& status, const std::string& ns) {
  if (status.code() == absl::StatusCode::kNotFound) {
    return absl::StrCat("CRD trainingjobs.psflow.io is not installed (", status.message(),
                        "); install it: kubectl apply -f deploy/crd/");
  }
  if (status.code() == absl::StatusCode::kPermissionDenied) {
    return absl::StrCat("RBAC forbids what the operator needs in ",
                        ns.empty() ? "all namespaces" : "namespace " + ns, ": ", status.message(),
                        "; bind the psflow-operator ClusterRole");
  }
  if (status.code() == absl::StatusCode::kUnauthenticated) {
    return absl::StrCat("the API server rejected the credentials: ", status.message());
  }
  return std::string(status.message());
}

// Checks once the API server is reachable that it serves TrainingJobs and that the operator
// may list what it watches. Retries while the server cannot be reached; gives up on the
// errors only an administrator can fix.
absl::Status Preflight(psflow::kube::RestKubeClient& client, const std::string& ns,
                       std::stop_token stop) {
  psflow::Backoff backoff(std::chrono::milliseconds(500), std::chrono::seconds(30),
                          psflow::Backoff::Clock::time_point::max());
  while (!stop.stop_requested()) {
    absl::Status s = client.CheckResourceServed(psflow::kube::TrainingJobs());
    psflow::kube::ListOptions owned;
    owned.label_selector = psflow::controller::kJobNameLabel;
    if (s.ok()) s = client.List(psflow::kube::TrainingJobs(), ns, {}).status();
    if (s.ok()) s = client.List(psflow::kube::Pods(), ns, owned).status();
    if (s.ok()) s = client.List(psflow::kube::Services(), ns, owned).status();
    if (s.ok() || s.code() != absl::StatusCode::kUnavailable) return s;
    PSFLOW_LOG(WARNING) << "API server not reachable, retrying: " << s.message();
    std::mutex mu;
    std::condition_variable_any cv;
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, stop, backoff.NextDelay().value_or(std::chrono::seconds(30)),
                [] { return false; });
  }
  return absl::CancelledError("stopped");
}

}  // namespace

int main(int argc, char** argv) {
  psflow::ParseFlags(argc, argv, kUsage);
  const std::string log_format = absl::GetFlag(FLAGS_log_format);
  if (log_format == "json") {
    psflow::SetLogFormat(psflow::LogFormat::kJson);
  } else if (log_format != "text") {
    return Fail(absl::StrCat("--log_format=", log_format, ": must be text or json"));
  }
  if (absl::GetFlag(FLAGS_workers) < 1) return Fail("--workers must be at least 1");
  if (absl::Status s =
          psflow::controller::CheckSharedMemoryDir(absl::GetFlag(FLAGS_shared_memory_dir));
      !s.ok()) {
    return Fail(absl::StrCat("--shared_memory_dir: ", s.message()));
  }
  if (!(absl::GetFlag(FLAGS_throughput_interval_s) >= 0)) {
    return Fail("--throughput_interval_s must be 0 (off) or a number of seconds");
  }

  // Signals go to one thread, which asks everything else to stop.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  std::stop_source stop;
  std::thread signal_thread([&signals, &stop] {
    int sig = 0;
    sigwait(&signals, &sig);
    // A stop already requested is main's own ending (finish wakes this thread): nothing to say.
    if ((sig == SIGTERM || sig == SIGINT) && !stop.stop_requested()) {
      PSFLOW_LOG(INFO) << "signal " << sig << ": stopping";
      stop.request_stop();
    }
  });
  auto finish = [&](int code) {
    if (!stop.stop_requested()) {
      stop.request_stop();
      pthread_kill(signal_thread.native_handle(), SIGTERM);
    }
    signal_thread.join();
    return code;
  };

  absl::StatusOr<psflow::kube::ClusterConfig> config = psflow::kube::ResolveClusterConfig(
      absl::GetFlag(FLAGS_kubeconfig), absl::GetFlag(FLAGS_context));
  if (!config.ok()) return finish(Fail(std::string(config.status().message())));

  absl::StatusOr<std::unique_ptr<psflow::MetricsEndpoint>> endpoint =
      psflow::MetricsEndpoint::Start(absl::GetFlag(FLAGS_metrics_address),
                                     absl::GetFlag(FLAGS_metrics_port));
  if (!endpoint.ok()) return finish(Fail(std::string(endpoint.status().message())));
  OperatorMetrics metrics((*endpoint)->registry());
  PSFLOW_LOG(INFO) << "serving /metrics, /healthz, /readyz on "
                   << absl::GetFlag(FLAGS_metrics_address) << ":" << (*endpoint)->port();

  psflow::kube::RestKubeClient::Options client_options;
  client_options.qps = absl::GetFlag(FLAGS_qps);
  client_options.burst = absl::GetFlag(FLAGS_burst);
  client_options.observer = [&metrics](absl::string_view verb, const psflow::kube::Resource&,
                                       int code, double) { metrics.CountApiRequest(verb, code); };
  absl::StatusOr<std::unique_ptr<psflow::kube::RestKubeClient>> client =
      psflow::kube::RestKubeClient::Create(*config, client_options);
  if (!client.ok()) return finish(Fail(std::string(client.status().message())));

  const std::string ns = absl::GetFlag(FLAGS_namespace);
  PSFLOW_LOG(INFO) << "psflow-operator: API server " << config->server << ", watching "
                   << (ns.empty() ? "all namespaces" : "namespace " + ns);
  absl::Status preflight = Preflight(**client, ns, stop.get_token());
  if (stop.stop_requested()) return finish(0);
  if (!preflight.ok()) return finish(Fail(Explain(preflight, ns)));

  psflow::controller::ControllerOptions options;
  options.ns = ns;
  options.workers = absl::GetFlag(FLAGS_workers);
  options.watch_timeout_seconds = absl::GetFlag(FLAGS_watch_timeout_s);
  options.throughput_interval = absl::Seconds(absl::GetFlag(FLAGS_throughput_interval_s));
  options.reconciler.shared_memory_dir = absl::GetFlag(FLAGS_shared_memory_dir);

  // /readyz: a standby replica is ready (healthy, waiting); the leader once its caches synced.
  std::mutex active_mu;
  Controller* active = nullptr;
  (*endpoint)->SetReadinessCheck([&]() -> absl::Status {
    std::lock_guard<std::mutex> lock(active_mu);
    if (active == nullptr || active->Synced()) return absl::OkStatus();
    return absl::UnavailableError("caches not synced yet");
  });
  auto lead = [&](std::stop_token leading) {
    Controller controller(**client, options, &metrics);
    {
      std::lock_guard<std::mutex> lock(active_mu);
      active = &controller;
    }
    metrics.SetLeading(true);
    controller.Run(leading);
    metrics.SetLeading(false);
    std::lock_guard<std::mutex> lock(active_mu);
    active = nullptr;
  };

  int code = 0;
  if (absl::GetFlag(FLAGS_leader_elect)) {
    psflow::controller::LeaderElectionOptions election;
    election.ns = absl::GetFlag(FLAGS_lease_namespace);
    if (election.ns.empty()) election.ns = EnvOr("POD_NAMESPACE", ns.empty() ? "default" : ns);
    election.name = absl::GetFlag(FLAGS_lease_name);
    election.identity = absl::GetFlag(FLAGS_identity);
    if (election.identity.empty()) {
      char host[HOST_NAME_MAX + 1] = {};
      gethostname(host, sizeof(host) - 1);
      election.identity = EnvOr("POD_NAME", absl::StrCat(host, "_", getpid()));
    }
    election.lease_duration = Millis(absl::GetFlag(FLAGS_lease_duration_s));
    election.renew_deadline = Millis(absl::GetFlag(FLAGS_renew_deadline_s));
    election.retry_period = Millis(absl::GetFlag(FLAGS_retry_period_s));
    PSFLOW_LOG(INFO) << "leader election: Lease " << election.ns << "/" << election.name << " as "
                     << election.identity;
    // Losing the Lease (the API server unreachable past the renew deadline, or another replica
    // took it) stops the controller (its workers drained, its informers stopped) and this
    // replica stands by to acquire the Lease again: no restart of the process is needed.
    while (!stop.stop_requested()) {
      psflow::controller::LeaderElector elector(**client, election);
      absl::Status s = elector.Run(stop.get_token(), lead);
      if (s.ok()) break;
      if (s.code() != absl::StatusCode::kAborted) {
        code = Fail(Explain(s, election.ns));
        break;
      }
      PSFLOW_LOG(WARNING) << s.message() << "; standing by to acquire it again";
    }
  } else {
    lead(stop.get_token());
  }
  (*endpoint)->SetReadinessCheck(nullptr);
  return finish(code);
}
