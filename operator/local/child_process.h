// A child process whose stdout and stderr arrive on one pipe, for the local runner (and tests).
//
// The child runs in its own process group (so the runner, not the terminal, decides when it
// stops) and is sent SIGTERM when the thread that spawned it exits (PR_SET_PDEATHSIG: spawn from
// a thread that outlives the child, e.g. the main thread). Not thread-safe.
#ifndef PSFLOW_OPERATOR_LOCAL_CHILD_PROCESS_H_
#define PSFLOW_OPERATOR_LOCAL_CHILD_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace psflow::local {

struct ExitStatus {
  int code = 0;    // exit code when the child exited
  int signal = 0;  // signal number when it was killed by one
  bool ok() const { return code == 0 && signal == 0; }
  std::string Describe() const;  // "exit code 1", "killed by signal 9 (Killed)"
};

class ChildProcess {
 public:
  // Runs argv with exactly `env` ("NAME=value" entries); argv[0] without a '/' is looked up in
  // env's PATH. NOT_FOUND when argv[0] cannot be executed; nothing is left running then.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Spawn(const std::vector<std::string>& argv,
                                                             const std::vector<std::string>& env);
  // SIGKILLs the process group if the child is still running, and reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Non-blocking read end of the output pipe; -1 once CloseOutput() was called.
  int output_fd() const { return output_fd_; }
  void CloseOutput();

  // Sends `sig` to the child's process group (no-op once it has been reaped).
  void Signal(int sig);
  // Reaps the child if it has exited; never blocks. The status once reaped, else nullopt.
  std::optional<ExitStatus> Poll();
  const std::optional<ExitStatus>& exit_status() const { return exit_; }

  // Appends everything the child writes to *output until it exits, then reaps it. nullopt when
  // `timeout` passes first (the child keeps running; the caller decides what to do).
  std::optional<ExitStatus> WaitWithOutput(std::chrono::milliseconds timeout, std::string* output);

 private:
  ChildProcess(pid_t pid, int output_fd) : pid_(pid), output_fd_(output_fd) {}
  pid_t pid_;
  int output_fd_;
  std::optional<ExitStatus> exit_;
};

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_CHILD_PROCESS_H_
