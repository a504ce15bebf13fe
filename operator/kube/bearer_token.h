// The bearer token each API request carries, following a token file as it rotates.
#ifndef PSFLOW_OPERATOR_KUBE_BEARER_TOKEN_H_
#define PSFLOW_OPERATOR_KUBE_BEARER_TOKEN_H_

#include <sys/types.h>

#include <ctime>
#include <mutex>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"

namespace psflow::kube {

// Thread-safe.
class BearerToken {
 public:
  // `token_file` empty: always `token`. Otherwise the file's contents (whitespace trimmed),
  // re-read whenever the file changes (inode, size or modification time: kubelet swaps a
  // symlink when it rotates a projected token).
  BearerToken(std::string token, std::string token_file);

  // The token to send; "" for none. While the file cannot be read, the last token read from it
  // (or `token`); UNAUTHENTICATED naming the file when there has never been one.
  absl::StatusOr<std::string> Get();

 private:
  const std::string fixed_;
  const std::string file_;
  std::mutex mutex_;
  std::string current_ ABSL_GUARDED_BY(mutex_);
  bool have_file_token_ ABSL_GUARDED_BY(mutex_) = false;
  ino_t inode_ ABSL_GUARDED_BY(mutex_) = 0;
  off_t size_ ABSL_GUARDED_BY(mutex_) = -1;
  timespec mtime_ ABSL_GUARDED_BY(mutex_) = {};
};

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_BEARER_TOKEN_H_
