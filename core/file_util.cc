#include "core/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace psflow {

absl::Status ErrnoError(int error, absl::string_view what, absl::string_view path) {
  return absl::ErrnoToStatus(error, absl::StrCat(what, " ", path));
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status Fd::Close(absl::string_view path) {
  const int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0 && errno != EINTR) return ErrnoError(errno, "close", path);
  return absl::OkStatus();
}

absl::Status FsyncFd(int fd, absl::string_view path) {
  while (::fsync(fd) != 0) {
    if (errno == EINTR) continue;
    if (errno == EINVAL) return absl::OkStatus();
    return ErrnoError(errno, "fsync", path);
  }
  return absl::OkStatus();
}

absl::Status FsyncDir(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, "open folder", path);
  RETURN_IF_ERROR(FsyncFd(fd.get(), path));
  return fd.Close(path);
}

std::string ParentDir(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

namespace {

bool IsDir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

absl::Status MakeDirs(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0) return FsyncDir(ParentDir(path));
  int error = errno;
  if (error == ENOENT) {
    const std::string parent = ParentDir(path);
    if (parent != path) {
      RETURN_IF_ERROR(MakeDirs(parent));
      if (::mkdir(path.c_str(), 0755) == 0) return FsyncDir(parent);
      error = errno;
    }
  }
  if (error == EEXIST) {
    if (IsDir(path)) return absl::OkStatus();
    error = ENOTDIR;
  }
  return ErrnoError(error, "mkdir", path);
}

absl::StatusOr<std::vector<std::string>> DirNames(const std::string& path) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(path.c_str()), &::closedir);
  if (dir == nullptr) return ErrnoError(errno, "open folder", path);
  std::vector<std::string> names;
  while (true) {
    errno = 0;
    const dirent* entry = ::readdir(dir.get());
    if (entry == nullptr) {
      if (errno != 0) return ErrnoError(errno, "read folder", path);
      break;
    }
    const absl::string_view name = entry->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  return names;
}

TempFileGuard::~TempFileGuard() {
  if (!path_.empty() && ::unlink(path_.c_str()) != 0 && errno != ENOENT) {
    PSFLOW_LOG(WARNING) << "cannot remove temporary file " << path_ << ": " << std::strerror(errno);
  }
}

}  // namespace psflow
