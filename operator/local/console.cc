#include "operator/local/console.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace psflow::local {
namespace {

constexpr char kEraseLine[] = "\r\033[K";

}  // namespace

int WriteAll(int fd, absl::string_view text) {
  while (!text.empty()) {
    const ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    if (n == 0) return EIO;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

int TerminalColumns(int fd) {
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  int columns;
  const char* env = std::getenv("COLUMNS");
  if (env != nullptr && absl::SimpleAtoi(env, &columns) && columns > 0) return columns;
  return 80;
}

Console::Console(Display display, std::chrono::seconds every)
    : display_(display), every_(every), next_periodic_(std::chrono::steady_clock::now() + every) {}

std::string Console::LiveLine(const ProgressSnapshot& p) const {
  // Asked each time: the terminal may have been resized since.
  return FormatProgressLine(p, TerminalColumns(STDOUT_FILENO));
}

void Console::Line(absl::string_view text) {
  if (live_.empty()) {
    WriteAll(STDOUT_FILENO, absl::StrCat(text, "\n"));
  } else {
    WriteAll(STDOUT_FILENO, absl::StrCat(kEraseLine, text, "\n", live_));
  }
}

void Console::Progress(const ProgressSnapshot& p) {
  if (display_ == Display::kLive) {
    live_ = LiveLine(p);
    WriteAll(STDOUT_FILENO, absl::StrCat(kEraseLine, live_));
  } else if (display_ == Display::kPeriodic && std::chrono::steady_clock::now() >= next_periodic_) {
    next_periodic_ = std::chrono::steady_clock::now() + every_;
    WriteAll(STDOUT_FILENO, absl::StrCat(FormatProgressPlain(p), "\n"));
    periodic_written_ = true;
  }
}

void Console::EndProgress(const ProgressSnapshot& p) {
  if (display_ == Display::kLive) {
    WriteAll(STDOUT_FILENO, absl::StrCat(kEraseLine, LiveLine(p), "\n"));
    live_.clear();
  } else if (display_ == Display::kPeriodic && (periodic_written_ || p.steps > 0)) {
    WriteAll(STDOUT_FILENO, absl::StrCat(FormatProgressPlain(p), "\n"));
  }
  display_ = Display::kNone;
}

}  // namespace psflow::local
