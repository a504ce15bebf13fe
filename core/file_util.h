// File-system helpers with absl::Status errors ("<what> <path>: <strerror>", the errno's code):
// a descriptor that closes itself, durable folder creation and fsync, folder listing, and a
// guard that removes a temporary file unless it was renamed into place.
#ifndef PSFLOW_CORE_FILE_UTIL_H_
#define PSFLOW_CORE_FILE_UTIL_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

// $TMPDIR where it is set and not empty, else "/tmp".
std::string TempDirectory();

// absl::ErrnoToStatus(error, "<what> <path>").
absl::Status ErrnoError(int error, absl::string_view what, absl::string_view path);

// Owns a file descriptor (or a socket): closes it when it goes out of scope; -1 is none.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd();
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

  // Closes now, reporting what close(2) reports (a deferred write error); `path` names the file
  // in the error. EINTR is not retried on Linux (the descriptor is gone either way).
  absl::Status Close(absl::string_view path);

 private:
  int fd_;
};

// fsync(2), retried on EINTR; a file system that cannot sync (EINVAL, e.g. some folders) is OK.
absl::Status FsyncFd(int fd, absl::string_view path);
// Opens the folder and fsyncs it: makes the entries created or renamed in it durable.
absl::Status FsyncDir(const std::string& path);

// The folder holding `path`: "." for a bare name, "/" for a file in the root; trailing slashes
// are ignored.
std::string ParentDir(std::string path);

// mkdir -p (mode 0755), fsync'ing the parent of every folder it creates so that the new entry is
// durable. OK if `path` is a folder already; FAILED_PRECONDITION (ENOTDIR) if it or a parent
// exists as something else.
absl::Status MakeDirs(const std::string& path);

// The names of a folder's entries other than "." and "..", in the order readdir gives them;
// NOT_FOUND if the folder does not exist.
absl::StatusOr<std::vector<std::string>> DirNames(const std::string& path);

// Removes the file at `path` when it goes out of scope, unless Release() was called (the file
// was renamed into place); a failed removal is logged as a WARNING, not reported.
class TempFileGuard {
 public:
  explicit TempFileGuard(std::string path) : path_(std::move(path)) {}
  ~TempFileGuard();
  TempFileGuard(const TempFileGuard&) = delete;
  TempFileGuard& operator=(const TempFileGuard&) = delete;
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

// write(2) of all `size` bytes to `fd`, retried on EINTR and short writes; `path` names the file
// in the error (a write that makes no progress is ENOSPC).
absl::Status WriteFull(int fd, const void* data, size_t size, absl::string_view path);

// Creates or replaces the file at `path` so that a crash at any moment leaves either the old file
// (or none) or the complete new one under that name, never a partial file: `fill` writes the
// contents to a new temporary file in the same folder (".<name>.tmp.<pid>.<n>", passed as `fd`,
// open for writing, and `temp_path`), which is then fsync'ed, closed, renamed to `path`, and the
// folder fsync'ed. On an error before the rename, `fill`'s or the file system's (a missing or
// read-only folder, a full disk), the temporary file is removed and the file at `path` is left as
// it was; only a failed fsync of the folder after the rename leaves the new file in place (not yet
// durable). Errors carry the errno's code and name the path; INVALID_ARGUMENT for a `path` ending
// in '/'. Only a crash leaves a temporary file behind. Thread-safe; of concurrent writers of one
// path, the last rename wins.
absl::Status WriteFileAtomically(
    const std::string& path,
    absl::FunctionRef<absl::Status(int fd, const std::string& temp_path)> fill);

}  // namespace psflow

#endif  // PSFLOW_CORE_FILE_UTIL_H_
