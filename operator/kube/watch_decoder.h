// Decoding a watch response body: newline-delimited JSON events, {"type": ..., "object": ...},
// as they arrive in pieces of any size.
#ifndef PSFLOW_OPERATOR_KUBE_WATCH_DECODER_H_
#define PSFLOW_OPERATOR_KUBE_WATCH_DECODER_H_

#include <cstddef>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "operator/kube/kube_client.h"

namespace psflow::kube {

// Accumulates bytes and hands back whole lines. Not thread-safe.
class WatchLineBuffer {
 public:
  // Far above any object the API server stores (etcd's limit is 1.5 MiB).
  static constexpr size_t kMaxLineBytes = 64 << 20;

  // DATA_LOSS when a line grows past kMaxLineBytes without ending.
  absl::Status Append(absl::string_view bytes);
  // The next complete line, without its "\n" (and "\r"), if one has arrived.
  std::optional<std::string> NextLine();
  // The bytes after the last "\n": a final line the stream ended without terminating.
  absl::string_view Remainder() const;

 private:
  std::string buffer_;
  size_t start_ = 0;    // where the next line begins
  size_t scanned_ = 0;  // buffer_[start_, scanned_) holds no '\n'
};

// One event line. An ERROR event is its status (StatusFromStatusObject: a 410 is
// OUT_OF_RANGE). A line that is not JSON, lacks an object, or has an unknown type is DATA_LOSS.
// `what` ("watch /api/v1/pods") starts error messages.
absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view line, absl::string_view what);

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_WATCH_DECODER_H_
