#include "core/command_line.h"

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace psflow {
namespace {

// Every psflow file of this build is named with the prefix the compiler gave this one: what
// precedes "core/command_line.cc" in __FILE__ (a build's absolute checkout path, or nothing).
constexpr absl::string_view kThisFile = "core/command_line.cc";

absl::string_view SourceRoot() {
  const absl::string_view file = __FILE__;
  return absl::EndsWith(file, kThisFile) ? file.substr(0, file.size() - kThisFile.size())
                                         : absl::string_view();
}

// absl's own flags, shown by --helpfull only.
bool DefinedByPsflow(absl::string_view repository_path) {
  return !absl::StartsWith(repository_path, "absl/");
}

}  // namespace

std::string RepositoryPath(absl::string_view file) {
  const absl::string_view root = SourceRoot();
  if (!root.empty()) absl::ConsumePrefix(&file, root);
  while (absl::ConsumePrefix(&file, "/") || absl::ConsumePrefix(&file, "./")) continue;
  return std::string(file);
}

std::vector<char*> ParseFlags(int argc, char** argv, absl::string_view usage) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.normalize_filename = RepositoryPath;
  config.contains_help_flags = DefinedByPsflow;  // called with the normalized name
  config.contains_helpshort_flags = DefinedByPsflow;
  config.version_string = [] { return absl::StrCat("psflow ", PSFLOW_VERSION, "\n"); };
  absl::SetFlagsUsageConfig(config);
  return absl::ParseCommandLine(argc, argv);
}

}  // namespace psflow
