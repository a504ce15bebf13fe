// The psflow-test-apiserver program, run as tests and scripts run it.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/kube/http_test_client.h"

extern char** environ;

namespace psflow::kubetest {
namespace {

// Serves until SIGTERM, announces its URL, writes a kubeconfig, asks for the token.
TEST(TestApiServerMain, ServesUntilSigterm) {
  const std::string kubeconfig = ::testing::TempDir() + "/apiserver-main-kubeconfig.yaml";
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  const std::string kubeconfig_flag = "--kubeconfig_out=" + kubeconfig;
  std::vector<std::string> args = {PSFLOW_TEST_APISERVER, "--port=0", "--token=tk",
                                   kubeconfig_flag};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, PSFLOW_TEST_APISERVER, &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);

  std::string line;
  pollfd p{out[0], POLLIN, 0};
  while (line.find('\n') == std::string::npos && poll(&p, 1, 10000) > 0) {
    char buffer[256];
    const ssize_t n = read(out[0], buffer, sizeof(buffer));
    if (n <= 0) break;
    line.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  const std::string prefix = "psflow-test-apiserver serving on http://127.0.0.1:";
  ASSERT_EQ(line.rfind(prefix, 0), 0u) << line;
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(line.substr(prefix.size(), line.find('\n') - prefix.size()), &port));
  EXPECT_EQ(YAML::LoadFile(kubeconfig)["clusters"][0]["cluster"]["server"].as<std::string>(),
            absl::StrCat("http://127.0.0.1:", port));

  absl::StatusOr<HttpResponse> resources =
      HttpRequestOnce(port, "GET", "/apis/psflow.io/v1alpha1", "", "Authorization: Bearer tk\r\n");
  ASSERT_TRUE(resources.ok()) << resources.status();
  EXPECT_EQ(resources->code, 200);
  EXPECT_EQ(resources->Json()["resources"][0]["name"], "trainingjobs");
  EXPECT_EQ(HttpRequestOnce(port, "GET", "/api/v1")->code, 401);

  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::filesystem::remove(kubeconfig);
}

}  // namespace
}  // namespace psflow::kubetest
