// Replays a fuzz target's corpus without libFuzzer, so every build runs the targets (ctest, label
// fuzz): each argument is a file or a folder of files, run through LLVMFuzzerTestOneInput in
// name order. Inputs named "valid-*" must be accepted and "invalid-*" rejected (the target's
// RecordOutcome); a crash or sanitizer report ends the run. Exits 1 when an input's outcome is
// wrong, a file cannot be read or no input was found.
//
//   <target>_fuzzer tests/fuzz/corpus/<target> [more files or folders]
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (fs::is_directory(argv[i], ec)) {
      for (const fs::directory_entry& entry : fs::directory_iterator(argv[i], ec)) {
        if (entry.is_regular_file()) inputs.push_back(entry.path());
      }
    } else {
      inputs.emplace_back(argv[i]);
    }
    if (ec) {
      std::fprintf(stderr, "replay: %s: %s\n", argv[i], ec.message().c_str());
      return 1;
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs (usage: %s CORPUS_DIR_OR_FILE...)\n", argv[0]);
    return 1;
  }
  size_t failures = 0;
  size_t valid = 0;
  size_t invalid = 0;
  for (const fs::path& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in.is_open()) {
      std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 1;
    }
    std::ostringstream text;
    text << in.rdbuf();  // sets failbit on `text` for an empty file, a valid input
    const std::string bytes = text.str();
    psflow::fuzz::TakeOutcome();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const std::optional<bool> accepted = psflow::fuzz::TakeOutcome();
    const std::string name = path.filename().string();
    const char* expected = nullptr;
    if (StartsWith(name, "valid-")) {
      ++valid;
      if (accepted != true) expected = "accepted";
    } else if (StartsWith(name, "invalid-")) {
      ++invalid;
      if (accepted != false) expected = "rejected";
    }
    if (expected != nullptr) {
      std::fprintf(stderr, "replay: %s should be %s, but was %s\n", path.c_str(), expected,
                   !accepted ? "given no verdict" : (*accepted ? "accepted" : "rejected"));
      ++failures;
    }
  }
  std::printf("replayed %zu inputs (%zu valid, %zu invalid, %zu other): %zu wrong\n", inputs.size(),
              valid, invalid, inputs.size() - valid - invalid, failures);
  return failures == 0 ? 0 : 1;
}
