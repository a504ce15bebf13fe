#include "operator/local/run_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "operator/local/console.h"

namespace psflow::local {
namespace {

absl::Status CannotWrite(const std::string& path, const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "run folder ", path, " cannot be written: ", why, " (choose one with --run_dir)"));
}

}  // namespace

absl::StatusOr<std::string> CreateRunFolder(const std::string& dir, absl::string_view job,
                                            absl::Time now) {
  std::string path = dir;
  if (path.empty()) {
    if (absl::Status made = MakeDirs("psflow-runs"); !made.ok()) {
      return CannotWrite("psflow-runs", std::string(made.message()));
    }
    const std::string base = absl::StrCat(
        "psflow-runs/", job, "-", absl::FormatTime("%Y%m%d-%H%M%S", now, absl::LocalTimeZone()));
    path = base;
    // mkdir, not a test first: two runs started in the same second each get a folder of their
    // own.
    for (int n = 2; mkdir(path.c_str(), 0755) != 0; ++n) {
      if (errno != EEXIST) return CannotWrite(path, std::strerror(errno));
      path = absl::StrCat(base, "-", n);
    }
  } else if (absl::Status made = MakeDirs(path); !made.ok()) {
    return CannotWrite(path, std::string(made.message()));
  }
  if (access(path.c_str(), W_OK | X_OK) != 0) return CannotWrite(path, std::strerror(errno));
  return path;
}

absl::StatusOr<std::unique_ptr<ReplicaLog>> ReplicaLog::Open(std::string path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("replica log ", path, " cannot be written: ", strerror(errno)));
  }
  return std::unique_ptr<ReplicaLog>(new ReplicaLog(std::move(path), fd));
}

void ReplicaLog::StartRun(absl::string_view marker) {
  Append(marker);
  tail_.clear();
}

void ReplicaLog::Append(absl::string_view line) {
  if (const int error = WriteAll(fd_.get(), absl::StrCat(line, "\n")); error != 0) {
    if (lines_lost_++ == 0) write_error_ = absl::StrCat(path_, ": ", strerror(error));
  }
  tail_.emplace_back(line);
  if (tail_.size() > kTailLines) tail_.pop_front();
}

}  // namespace psflow::local
