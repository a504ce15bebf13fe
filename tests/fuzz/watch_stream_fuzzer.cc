// libFuzzer target: arbitrary bytes as the body of a Kubernetes watch answer, decoded as
// RestKubeClient's watch decodes it (operator/kube/rest_client.cc ReadEvents): the bytes arrive
// in pieces (their size chosen by the input's first byte), WatchLineBuffer cuts them into lines,
// ParseWatchEvent decodes each non-blank one (ERROR events through StatusFromStatusObject) until
// the first error ends the watch. Any input must end in events or an error status, never a
// crash; the lines handed out must be exactly the input's lines, "\r\n" ends included.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "operator/kube/watch_decoder.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

// The status of one line as ReadEvents' `deliver` treats it: blank lines are skipped.
absl::Status Deliver(absl::string_view line) {
  if (absl::StripAsciiWhitespace(line).empty()) return absl::OkStatus();
  return psflow::kube::ParseWatchEvent(line, "watch /api/v1/pods").status();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using psflow::kube::WatchLineBuffer;
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;
  absl::string_view body = psflow::fuzz::AsText(data + 1, size - 1);
  const absl::string_view input = body;
  WatchLineBuffer lines;
  size_t line_start = 0;  // where the next line the buffer hands out starts in `input`
  absl::Status status;
  while (!body.empty() && status.ok()) {
    const absl::string_view bytes = body.substr(0, piece);
    body.remove_prefix(bytes.size());
    PSFLOW_FUZZ_CHECK(lines.Append(bytes).ok());
    while (std::optional<std::string> line = lines.NextLine()) {
      const size_t newline = input.find('\n', line_start);
      PSFLOW_FUZZ_CHECK(newline != absl::string_view::npos);
      absl::string_view expected = input.substr(line_start, newline - line_start);
      if (!expected.empty() && expected.back() == '\r') expected.remove_suffix(1);
      PSFLOW_FUZZ_CHECK(*line == expected);
      line_start = newline + 1;
      status = Deliver(*line);
      if (!status.ok()) break;
    }
  }
  if (status.ok()) {
    PSFLOW_FUZZ_CHECK(lines.Remainder() == input.substr(line_start));
    status = Deliver(lines.Remainder());
  }
  psflow::fuzz::RecordOutcome(status.ok());
  return 0;
}
