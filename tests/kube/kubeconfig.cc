#include "tests/kube/kubeconfig.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace psflow::kubetest {
namespace {

// A YAML double-quoted scalar: JSON string syntax is a subset of it.
std::string Quoted(absl::string_view text) { return nlohmann::json(text).dump(); }

}  // namespace

std::string KubeconfigYaml(absl::string_view server, absl::string_view token) {
  std::string user =
      token.empty() ? "  user: {}\n" : absl::StrCat("  user:\n    token: ", Quoted(token), "\n");
  return absl::StrCat(
      "apiVersion: v1\n"
      "kind: Config\n"
      "clusters:\n"
      "- name: psflow-test\n"
      "  cluster:\n"
      "    server: ",
      Quoted(server),
      "\n"
      "users:\n"
      "- name: psflow-test\n",
      user,
      "contexts:\n"
      "- name: psflow-test\n"
      "  context:\n"
      "    cluster: psflow-test\n"
      "    user: psflow-test\n"
      "    namespace: default\n"
      "current-context: psflow-test\n"
      "preferences: {}\n");
}

absl::Status WriteKubeconfigFile(const std::string& path, absl::string_view server,
                                 absl::string_view token) {
  const std::string text = KubeconfigYaml(server, token);
  const std::string temporary = path + ".tmp";
  auto fail = [&](const char* what) {
    const std::string why = std::strerror(errno);
    ::unlink(temporary.c_str());
    return absl::UnavailableError(absl::StrCat("kubeconfig ", path, ": ", what, ": ", why));
  };
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail("open");
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return fail("write");
    }
    written += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return fail("close");
  if (std::rename(temporary.c_str(), path.c_str()) != 0) return fail("rename");
  return absl::OkStatus();
}

}  // namespace psflow::kubetest
