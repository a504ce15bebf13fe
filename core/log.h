// Minimal leveled logging to stderr, one line per message:
//   PSFLOW_LOG(INFO) << "listening on " << address;
// Lines look like "I 03:21:07.123 ps_service.cc:42] listening on 127.0.0.1:2222". Thread-safe:
// each message is written with a single write(2). FATAL does not exist on purpose: errors are
// returned as absl::Status and reported once by main().
#ifndef PSFLOW_CORE_LOG_H_
#define PSFLOW_CORE_LOG_H_

#include <sstream>

namespace psflow {

enum class LogLevel { kInfo, kWarning, kError };

// kText (the default) as above; kJson writes one JSON object per line for log collectors:
//   {"ts":"2026-11-23T03:21:07.123Z","level":"info","caller":"ps_service.cc:42","msg":"..."}
enum class LogFormat { kText, kJson };
void SetLogFormat(LogFormat format);

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogLevel level_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

}  // namespace psflow

#define PSFLOW_LOG_LEVEL_INFO ::psflow::LogLevel::kInfo
#define PSFLOW_LOG_LEVEL_WARNING ::psflow::LogLevel::kWarning
#define PSFLOW_LOG_LEVEL_ERROR ::psflow::LogLevel::kError
#define PSFLOW_LOG(level) \
  ::psflow::LogMessage(PSFLOW_LOG_LEVEL_##level, __FILE__, __LINE__).stream()

#endif  // PSFLOW_CORE_LOG_H_
