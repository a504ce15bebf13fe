#include "core/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <string>

namespace psflow {
namespace {

char LevelLetter(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return 'I';
    case LogLevel::kWarning:
      return 'W';
    case LogLevel::kError:
      return 'E';
  }
  return '?';
}

}  // namespace

LogMessage::LogMessage(LogLevel level, const char* file, int line) {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  tm parts{};
  localtime_r(&tv.tv_sec, &parts);
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%02d:%02d:%02d.%03d", parts.tm_hour, parts.tm_min,
                parts.tm_sec, static_cast<int>(tv.tv_usec / 1000));
  const char* base = std::strrchr(file, '/');
  stream_ << LevelLetter(level) << ' ' << stamp << ' ' << (base ? base + 1 : file) << ':' << line
          << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string text = stream_.str();
  // One write per line so lines from several threads never interleave.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
}

}  // namespace psflow
