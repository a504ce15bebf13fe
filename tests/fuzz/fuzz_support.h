// What the fuzz targets of tests/fuzz share (docs/fuzzing.md). Each target is one
// *_fuzzer.cc defining LLVMFuzzerTestOneInput over one parser of outside input; it runs under
// libFuzzer (a PSFLOW_FUZZ build, scripts/fuzz.sh) or under replay_main.cc, which replays the
// checked-in corpus in ctest. Not thread-safe: a target runs one input at a time.
#ifndef PSFLOW_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define PSFLOW_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace psflow::fuzz {

// The target's verdict on its current input: accepted (the parser returned a value) or
// rejected (it returned an error). The replay driver holds it against the input's file name:
// "valid-*" inputs must be accepted, "invalid-*" rejected (any other name: either).
void RecordOutcome(bool accepted);
// The verdict recorded since the last call, if any; clears it.
std::optional<bool> TakeOutcome();

// The input as text (bytes unchanged).
absl::string_view AsText(const uint8_t* data, size_t size);

// Splits `data` at each kPartSeparator into exactly `n` parts: the last one holds the rest of
// the input, missing ones are empty. For targets whose parser reads several files.
inline constexpr absl::string_view kPartSeparator = "\n--8<--\n";
std::vector<absl::string_view> SplitParts(absl::string_view data, size_t n);

// A folder of this process's own (under $TMPDIR, else /tmp), made on first use and removed at
// exit, for targets whose parser reads files.
const std::string& ScratchDir();
// Writes `bytes` to ScratchDir()/name (replacing it) and returns its path. Aborts when it cannot
// (the target cannot go on without its file).
std::string WriteScratchFile(const std::string& name, absl::string_view bytes);

// Whether a data reader's error is one it promises for a bad or missing file: NOT_FOUND,
// DATA_LOSS or INVALID_ARGUMENT (anything else, e.g. INTERNAL, is a defect).
bool IsDataFileError(const absl::Status& status);

// Prints "<file>:<line>: invariant violated: <what>" and aborts (libFuzzer then saves the input)
// when `holds` is false. For properties the product promises, checked on inputs it accepted.
void Check(bool holds, const char* what, const char* file, int line);

}  // namespace psflow::fuzz

#define PSFLOW_FUZZ_CHECK(condition) \
  ::psflow::fuzz::Check((condition), #condition, __FILE__, __LINE__)

#endif  // PSFLOW_TESTS_FUZZ_FUZZ_SUPPORT_H_
