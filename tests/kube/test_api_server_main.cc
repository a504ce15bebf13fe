// psflow-test-apiserver: the test Kubernetes API server (test_api_server.h) as a program, for
// running the operator by hand or from scripts without a cluster. Serves pods, services, events,
// leases and trainingjobs.psflow.io/v1alpha1 (with their status subresources) from memory on
// 127.0.0.1 until SIGTERM or SIGINT. Prints one line with its URL once it accepts connections
// (after the kubeconfig, when asked for, is written).
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "core/command_line.h"
#include "core/status_macros.h"
#include "operator/kube/resource.h"
#include "tests/kube/object_store.h"
#include "tests/kube/test_api_server.h"

ABSL_FLAG(int, port, 0, "Port on 127.0.0.1 to serve on (0: a free one)");
ABSL_FLAG(std::string, kubeconfig_out, "",
          "Write a kubeconfig for the server to this path (empty: none)");
ABSL_FLAG(std::string, token, "",
          "Bearer token every request must carry (empty: no authentication)");

namespace psflow::kubetest {
namespace {

absl::Status Main() {
  // Taken by sigwait below, in no other thread.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const int port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError("--port must be between 0 and 65535");
  }
  ObjectStore store;
  store.RegisterBuiltins();
  store.RegisterResource(kube::TrainingJobs(), /*has_status_subresource=*/true);
  TestApiServer::Options options;
  options.port = port;
  options.bearer_token = absl::GetFlag(FLAGS_token);
  ASSIGN_OR_RETURN(std::unique_ptr<TestApiServer> server,
                   TestApiServer::Start(&store, std::move(options)));
  if (const std::string path = absl::GetFlag(FLAGS_kubeconfig_out); !path.empty()) {
    RETURN_IF_ERROR(server->WriteKubeconfig(path));
  }
  std::printf("psflow-test-apiserver serving on %s\n", server->url().c_str());
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  server->Stop();
  return absl::OkStatus();
}

}  // namespace
}  // namespace psflow::kubetest

int main(int argc, char** argv) {
  psflow::ParseFlags(argc, argv,
                     "Test Kubernetes API server on 127.0.0.1: psflow-test-apiserver [--port=N] "
                     "[--kubeconfig_out=PATH] [--token=T]");
  const absl::Status status = psflow::kubetest::Main();
  if (!status.ok()) {
    std::fprintf(stderr, "psflow-test-apiserver: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
