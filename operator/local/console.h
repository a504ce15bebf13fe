// What `psflow run` writes to its stdout: event lines, and a progress display kept below them.
#ifndef PSFLOW_OPERATOR_LOCAL_CONSOLE_H_
#define PSFLOW_OPERATOR_LOCAL_CONSOLE_H_

#include <chrono>
#include <string>

#include "absl/strings/string_view.h"
#include "operator/local/progress_bar.h"

namespace psflow::local {

// Writes all of `text` to `fd`, retrying on EINTR; gives up on an error and returns its errno (0
// when all was written). Callers writing to a terminal or pipe may ignore it (a closed pipe must
// not stop the run: SIGPIPE is ignored while it lasts).
int WriteAll(int fd, absl::string_view text);

// The width of the terminal on `fd` (TIOCGWINSZ), else $COLUMNS, else 80.
int TerminalColumns(int fd);

class Console {
 public:
  enum class Display {
    kLive,      // one line redrawn in place ("\r\033[K"), never wider than the terminal
    kPeriodic,  // a plain line every `every` (for logs and pipes)
    kNone,
  };
  Console(Display display, std::chrono::seconds every);

  // One line of text (no newline in it); a live progress line is redrawn below it.
  void Line(absl::string_view text);
  // The latest progress: redrawn now (live), or written if `every` has passed since the last.
  void Progress(const ProgressSnapshot& p);
  // The progress display ends with `p`: live, the line is drawn a last time and kept; periodic,
  // a last plain line is written if any was before or any step was trained (a job that failed
  // at once gets none).
  // Progress does nothing afterwards.
  void EndProgress(const ProgressSnapshot& p);

 private:
  std::string LiveLine(const ProgressSnapshot& p) const;

  Display display_;
  std::chrono::seconds every_;
  std::string live_;  // the live line on screen; empty when none
  std::chrono::steady_clock::time_point next_periodic_;
  bool periodic_written_ = false;
};

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_CONSOLE_H_
