#include "operator/local/scrape_targets.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace psflow::local {

std::string FileSdJson(const std::vector<ScrapeTarget>& targets) {
  nlohmann::json groups = nlohmann::json::array();
  for (const ScrapeTarget& t : targets) {
    groups.push_back({{"targets", {t.address}},
                      {"labels",
                       {{"job", t.job},
                        {"replica_type", t.replica_type},
                        {"replica_index", std::to_string(t.replica_index)}}}});
  }
  return groups.dump(1) + "\n";
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& content) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
  const std::string temp = absl::StrCat(dir, ".", path.substr(dir.size()), ".tmp");
  auto failed = [&](const char* what) {
    const int err = errno;
    unlink(temp.c_str());
    return absl::FailedPreconditionError(
        absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(err)));
  };
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failed("write");
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return failed("write");
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return failed("write");
  if (std::rename(temp.c_str(), path.c_str()) != 0) return failed("replace");
  return absl::OkStatus();
}

}  // namespace psflow::local
