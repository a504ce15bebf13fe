// Where `psflow run` keeps a run's replica logs: one folder per run, one file per replica.
#ifndef PSFLOW_OPERATOR_LOCAL_RUN_FOLDER_H_
#define PSFLOW_OPERATOR_LOCAL_RUN_FOLDER_H_

#include <cstdint>
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

  // Appends `line` and a newline. A write error (disk full) does not stop the training the log
  // records: the line still joins the tail, is counted as lost, and the first error is kept for
  // the runner to say once (write_error).
  void Append(absl::string_view line);
  const std::string& path() const { return path_; }
  // Lines a write error lost, and the first such error ("<path>: No space left on device");
  // empty while none.
  int64_t lines_lost() const { return lines_lost_; }
  const std::string& write_error() const { return write_error_; }
  // The last (at most kTailLines) lines appended since the last StartRun, oldest first.
  std::vector<std::string> Tail() const { return {tail_.begin(), tail_.end()}; }
  // The replica runs again (restarted): `marker` goes to the file, and the tail starts over, so a
  // failure report shows this run's lines only.
  void StartRun(absl::string_view marker);

 private:
  ReplicaLog(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  Fd fd_;
  std::deque<std::string> tail_;
  int64_t lines_lost_ = 0;
  std::string write_error_;
};

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_RUN_FOLDER_H_
