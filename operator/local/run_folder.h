// Where `psflow run` keeps a run's replica logs: one folder per run, one file per replica.
#ifndef PSFLOW_OPERATOR_LOCAL_RUN_FOLDER_H_
#define PSFLOW_OPERATOR_LOCAL_RUN_FOLDER_H_

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "core/file_util.h"

namespace psflow::local {

// The folder for one run, created (with its parents) and checked writable: `dir` when not empty
// (it may exist already), else psflow-runs/<job>-<YYYYmmdd-HHMMSS> in the working directory at
// local time `now` (-2, -3, ... appended when that exists). FAILED_PRECONDITION naming the path
// and the reason when it cannot be created or written.
absl::StatusOr<std::string> CreateRunFolder(const std::string& dir, absl::string_view job,
                                            absl::Time now);

// One replica's log file, truncated on Open; it keeps the last kTailLines lines in memory for
// the failure report. Not thread-safe.
class ReplicaLog {
 public:
  static constexpr size_t kTailLines = 20;

  // FAILED_PRECONDITION naming `path` when it cannot be opened for writing.
  static absl::StatusOr<std::unique_ptr<ReplicaLog>> Open(std::string path);
  ReplicaLog(const ReplicaLog&) = delete;
  ReplicaLog& operator=(const ReplicaLog&) = delete;

  // Appends `line` and a newline. A write error (disk full) is dropped: a log must not stop
  // the training it records.
  void Append(absl::string_view line);
  const std::string& path() const { return path_; }
  // The last (at most kTailLines) lines appended, oldest first.
  std::vector<std::string> Tail() const { return {tail_.begin(), tail_.end()}; }

 private:
  ReplicaLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  Fd fd_;
  std::deque<std::string> tail_;
};

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_RUN_FOLDER_H_
