#include "operator/kube/bearer_token.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/read_file.h"

namespace psflow::kube {

BearerToken::BearerToken(std::string token, std::string token_file)
    : fixed_(std::move(token)), file_(std::move(token_file)), current_(fixed_) {}

absl::StatusOr<std::string> BearerToken::Get() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (file_.empty()) return current_;
  // A stat per request is cheap next to the request, and notices a rotation at once.
  struct stat st {};
  absl::Status error;
  if (::stat(file_.c_str(), &st) != 0) {
    error = absl::UnauthenticatedError(
        absl::StrCat("cannot read bearer token file ", file_, ": ", std::strerror(errno)));
  } else if (!have_file_token_ || st.st_ino != inode_ || st.st_size != size_ ||
             st.st_mtim.tv_sec != mtime_.tv_sec || st.st_mtim.tv_nsec != mtime_.tv_nsec) {
    absl::StatusOr<std::string> text = ReadFile(file_);
    if (text.ok()) {
      current_ = std::string(absl::StripAsciiWhitespace(*text));
      have_file_token_ = true;
      inode_ = st.st_ino;
      size_ = st.st_size;
      mtime_ = st.st_mtim;
    } else {
      error =
          absl::UnauthenticatedError(absl::StrCat("bearer token file: ", text.status().message()));
    }
  }
  if (!error.ok() && !have_file_token_ && fixed_.empty()) return error;
  return current_;
}

}  // namespace psflow::kube
