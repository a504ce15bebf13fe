#include "core/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/log.h"
#include "core/status_macros.h"

namespace psflow {

std::string TempDirectory() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
}

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

absl::Status WriteFull(int fd, const void* data, size_t size, absl::string_view path) {
  // One write(2) moves at most this much (Linux caps a call just below 2 GiB anyway).
  constexpr size_t kMaxWriteBytes = size_t{1} << 30;
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, std::min(size, kMaxWriteBytes));
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, "write", path);
    }
    if (n == 0) return ErrnoError(ENOSPC, "write", path);
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(
    const std::string& path,
    absl::FunctionRef<absl::Status(int fd, const std::string& temp_path)> fill) {
  const size_t slash = path.rfind('/');
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("write ", path, ": not a file name"));
  }
  const std::string dir = ParentDir(path);
  // pid and a per-process count: two writers (processes or threads) never share a temporary file.
  static std::atomic<uint64_t> count{0};
  const std::string temp_path =
      absl::StrCat(slash == std::string::npos ? "" : path.substr(0, slash + 1), ".", name, ".tmp.",
                   ::getpid(), ".", count.fetch_add(1));
  {
    Fd fd(::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd.valid()) return ErrnoError(errno, "create", temp_path);
    TempFileGuard guard(temp_path);
    RETURN_IF_ERROR(fill(fd.get(), temp_path));
    RETURN_IF_ERROR(FsyncFd(fd.get(), temp_path));
    RETURN_IF_ERROR(fd.Close(temp_path));
    if (::rename(temp_path.c_str(), path.c_str()) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("rename ", temp_path, " to ", path));
    }
    guard.Release();
  }
  // The new file is complete under its name; make the rename durable.
  return FsyncDir(dir);
}

}  // namespace psflow
