#include "core/log.h"

#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
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

std::atomic<LogFormat> g_format{LogFormat::kText};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarning:
      return "warning";
    case LogLevel::kError:
      return "error";
  }
  return "unknown";
}

const char* BaseName(const char* file) {
  const char* base = std::strrchr(file, '/');
  return base ? base + 1 : file;
}

void AppendJsonString(std::string& out, const std::string& s) {
  out += '"';
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned char>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

}  // namespace

void SetLogFormat(LogFormat format) { g_format = format; }

LogMessage::LogMessage(LogLevel level, const char* file, int line)
    : level_(level), file_(file), line_(line) {
  if (g_format.load() == LogFormat::kJson) return;  // formatted whole in the destructor
  timeval tv{};
  gettimeofday(&tv, nullptr);
  tm parts{};
  localtime_r(&tv.tv_sec, &parts);
  char stamp[32];
  std::snprintf(stamp, sizeof(stamp), "%02d:%02d:%02d.%03d", parts.tm_hour, parts.tm_min,
                parts.tm_sec, static_cast<int>(tv.tv_usec / 1000));
  stream_ << LevelLetter(level) << ' ' << stamp << ' ' << BaseName(file) << ':' << line << "] ";
}

LogMessage::~LogMessage() {
  std::string text;
  if (g_format.load() == LogFormat::kJson) {
    timeval tv{};
    gettimeofday(&tv, nullptr);
    tm parts{};
    gmtime_r(&tv.tv_sec, &parts);
    char stamp[64];
    std::snprintf(stamp, sizeof(stamp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
                  parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
                  parts.tm_min, parts.tm_sec, static_cast<int>(tv.tv_usec / 1000));
    text = std::string("{\"ts\":\"") + stamp + "\",\"level\":\"" + LevelName(level_) +
           "\",\"caller\":";
    AppendJsonString(text, std::string(BaseName(file_)) + ":" + std::to_string(line_));
    text += ",\"msg\":";
    AppendJsonString(text, stream_.str());
    text += "}\n";
  } else {
    stream_ << '\n';
    text = stream_.str();
  }
  // One write per line so lines from several threads never interleave.
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
}

}  // namespace psflow
