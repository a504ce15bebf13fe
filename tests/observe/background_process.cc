#include "tests/observe/background_process.h"

#include <signal.h>

namespace psflow::observe {

using std::chrono::milliseconds;

absl::StatusOr<std::unique_ptr<BackgroundProcess>> BackgroundProcess::Start(
    const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  absl::StatusOr<std::unique_ptr<local::ChildProcess>> child =
      local::ChildProcess::Spawn(argv, env);
  if (!child.ok()) return child.status();
  return std::unique_ptr<BackgroundProcess>(new BackgroundProcess(*std::move(child)));
}

BackgroundProcess::BackgroundProcess(std::unique_ptr<local::ChildProcess> child)
    : child_(std::move(child)), reader_([this] { Read(); }) {}

BackgroundProcess::~BackgroundProcess() {
  Signal(SIGKILL);
  stop_ = true;
  reader_.join();
}

void BackgroundProcess::Read() {
  std::string chunk;
  while (!stop_) {
    chunk.clear();
    std::optional<local::ExitStatus> exit;
    {
      std::lock_guard<std::mutex> lock(child_mu_);
      exit = child_->WaitWithOutput(milliseconds(50), &chunk);
    }
    std::lock_guard<std::mutex> lock(mu_);
    output_ += chunk;
    if (exit) {
      exit_ = exit;
      return;
    }
  }
}

void BackgroundProcess::Signal(int sig) {
  std::lock_guard<std::mutex> lock(child_mu_);
  child_->Signal(sig);
}

std::optional<local::ExitStatus> BackgroundProcess::Wait(milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (exit_ || std::chrono::steady_clock::now() >= end) return exit_;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

std::string BackgroundProcess::output() {
  std::lock_guard<std::mutex> lock(mu_);
  return output_;
}

}  // namespace psflow::observe
