#include "tests/fuzz/fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace psflow::fuzz {
namespace {

std::optional<bool> outcome;

std::string MakeScratchDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/psflow-fuzz-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    std::perror(("fuzz: mkdtemp " + pattern).c_str());
    std::abort();
  }
  return pattern;
}

void RemoveScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(ScratchDir(), ignored);
}

}  // namespace

void RecordOutcome(bool accepted) { outcome = accepted; }

std::optional<bool> TakeOutcome() {
  std::optional<bool> taken = outcome;
  outcome.reset();
  return taken;
}

absl::string_view AsText(const uint8_t* data, size_t size) {
  return absl::string_view(reinterpret_cast<const char*>(data), size);
}

std::vector<absl::string_view> SplitParts(absl::string_view data, size_t n) {
  std::vector<absl::string_view> parts;
  while (parts.size() + 1 < n) {
    const size_t at = data.find(kPartSeparator);
    if (at == absl::string_view::npos) break;
    parts.push_back(data.substr(0, at));
    data.remove_prefix(at + kPartSeparator.size());
  }
  parts.push_back(data);
  parts.resize(n);
  return parts;
}

const std::string& ScratchDir() {
  static const std::string* dir = [] {
    auto* made = new std::string(MakeScratchDir());
    std::atexit(RemoveScratchDir);
    return made;
  }();
  return *dir;
}

std::string WriteScratchFile(const std::string& name, absl::string_view bytes) {
  const std::string path = ScratchDir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

void Check(bool holds, const char* what, const char* file, int line) {
  if (holds) return;
  std::fprintf(stderr, "%s:%d: invariant violated: %s\n", file, line, what);
  std::abort();
}

bool IsDataFileError(const absl::Status& status) {
  return status.code() == absl::StatusCode::kNotFound ||
         status.code() == absl::StatusCode::kDataLoss ||
         status.code() == absl::StatusCode::kInvalidArgument;
}

}  // namespace psflow::fuzz
