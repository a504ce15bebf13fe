#include "operator/kube/watch_decoder.h"

#include "absl/strings/str_cat.h"
#include "operator/kube/api_status.h"

namespace psflow::kube {

absl::Status WatchLineBuffer::Append(absl::string_view bytes) {
  // Drop consumed lines before growing, so the buffer holds at most one partial line plus input.
  if (start_ > 0 && start_ * 2 >= buffer_.size()) {
    buffer_.erase(0, start_);
    scanned_ -= start_;
    start_ = 0;
  }
  buffer_.append(bytes.data(), bytes.size());
  if (buffer_.size() - start_ > kMaxLineBytes && buffer_.find('\n', start_) == std::string::npos) {
    return absl::DataLossError(
        absl::StrCat("a watch event is longer than ", kMaxLineBytes, " bytes"));
  }
  return absl::OkStatus();
}

std::optional<std::string> WatchLineBuffer::NextLine() {
  const size_t newline = buffer_.find('\n', scanned_);
  if (newline == std::string::npos) {
    scanned_ = buffer_.size();
    return std::nullopt;
  }
  size_t end = newline;
  if (end > start_ && buffer_[end - 1] == '\r') --end;
  std::string line = buffer_.substr(start_, end - start_);
  start_ = scanned_ = newline + 1;
  return line;
}

absl::string_view WatchLineBuffer::Remainder() const {
  return absl::string_view(buffer_).substr(start_);
}

absl::StatusOr<WatchEvent> ParseWatchEvent(absl::string_view line, absl::string_view what) {
  const auto data_loss = [&](absl::string_view why) {
    return absl::DataLossError(
        absl::StrCat(what, ": ", why, ": ", line.substr(0, 200), line.size() > 200 ? "..." : ""));
  };
  const Json parsed = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object()) return data_loss("not a JSON watch event");
  const auto type = parsed.find("type");
  const auto object = parsed.find("object");
  if (type == parsed.end() || !type->is_string()) return data_loss("event without a type");
  if (object == parsed.end() || !object->is_object()) return data_loss("event without an object");
  const std::string& name = type->get_ref<const std::string&>();
  WatchEvent event{WatchEventType::kAdded, *object};
  if (name == "ADDED") {
    event.type = WatchEventType::kAdded;
  } else if (name == "MODIFIED") {
    event.type = WatchEventType::kModified;
  } else if (name == "DELETED") {
    event.type = WatchEventType::kDeleted;
  } else if (name == "BOOKMARK") {
    event.type = WatchEventType::kBookmark;
  } else if (name == "ERROR") {
    return StatusFromStatusObject(*object, what);
  } else {
    return data_loss(absl::StrCat("unknown event type \"", name, "\""));
  }
  return event;
}

}  // namespace psflow::kube
