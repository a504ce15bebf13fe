#include "operator/local/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/status_macros.h"

namespace psflow::local {

std::string ExitStatus::Describe() const {
  if (signal != 0) return absl::StrCat("killed by signal ", signal, " (", strsignal(signal), ")");
  return absl::StrCat("exit code ", code);
}

namespace {

// argv0 itself when it contains a '/', else the first executable file named argv0 in the PATH
// of `env` (default "/usr/local/bin:/usr/bin:/bin").
absl::StatusOr<std::string> FindProgram(const std::string& argv0,
                                        const std::vector<std::string>& env) {
  if (argv0.find('/') != std::string::npos) {
    if (access(argv0.c_str(), X_OK) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot run \"", argv0, "\": ", strerror(errno)));
    }
    return argv0;
  }
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& e : env) {
    if (e.rfind("PATH=", 0) == 0) path = e.substr(5);
  }
  for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", argv0);
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return absl::NotFoundError(
      absl::StrCat("cannot run \"", argv0, "\": not found in PATH (", path, ")"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Spawn(
    const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command");
  // Resolve the program here: after fork only async-signal-safe calls are allowed, and the
  // search must use the child's PATH, not ours.
  ASSIGN_OR_RETURN(const std::string program, FindProgram(argv[0], env));
  int out[2], status_pipe[2];
  if (pipe2(out, O_CLOEXEC) != 0)
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  // Everything the child needs is built before fork: after it only async-signal-safe calls.
  std::vector<char*> c_argv, c_env;
  for (const auto& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const auto& e : env) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    for (int fd : {out[0], out[1], status_pipe[0], status_pipe[1]}) close(fd);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    execve(program.c_str(), c_argv.data(), c_env.data());
    const int err = errno;
    [[maybe_unused]] ssize_t n = write(status_pipe[1], &err, sizeof(err));
    _exit(127);
  }
  close(out[1]);
  close(status_pipe[1]);
  int err = 0;
  ssize_t n;
  do {
    n = read(status_pipe[0], &err, sizeof(err));
  } while (n < 0 && errno == EINTR);
  close(status_pipe[0]);
  if (n == sizeof(err)) {  // exec failed
    waitpid(pid, nullptr, 0);
    close(out[0]);
    return absl::NotFoundError(absl::StrCat("cannot run \"", argv[0], "\": ", strerror(err)));
  }
  fcntl(out[0], F_SETFL, fcntl(out[0], F_GETFL) | O_NONBLOCK);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid, out[0]));
}

ChildProcess::~ChildProcess() {
  if (!exit_) {
    Signal(SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  CloseOutput();
}

void ChildProcess::CloseOutput() {
  if (output_fd_ >= 0) close(output_fd_);
  output_fd_ = -1;
}

void ChildProcess::Signal(int sig) {
  if (!exit_) kill(-pid_, sig);
}

std::optional<ExitStatus> ChildProcess::Poll() {
  if (exit_) return exit_;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return std::nullopt;
  ExitStatus s;
  if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
  } else {
    s.code = WEXITSTATUS(status);
  }
  exit_ = s;
  // Stragglers of the group (grandchildren) go with it.
  kill(-pid_, SIGKILL);
  return exit_;
}

std::optional<ExitStatus> ChildProcess::WaitWithOutput(std::chrono::milliseconds timeout,
                                                       std::string* output) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now())
        .count();
  };
  // At least one look, however short the timeout (1 ms is 0 whole milliseconds left at once).
  while (output_fd_ >= 0) {
    pollfd fd{output_fd_, POLLIN, 0};
    poll(&fd, 1, static_cast<int>(std::clamp<int64_t>(left_ms(), 0, 100)));
    char buf[65536];
    const ssize_t n = read(output_fd_, buf, sizeof(buf));
    if (n > 0) output->append(buf, static_cast<size_t>(n));
    if (n == 0) {
      CloseOutput();
      break;
    }
    if (left_ms() <= 0) return std::nullopt;
  }
  // Output closed: the child is exiting (or handed its output to someone else).
  while (!Poll()) {
    if (left_ms() <= 0) return std::nullopt;
    usleep(5000);
  }
  return exit_;
}

}  // namespace psflow::local
