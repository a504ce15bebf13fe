// psflow's binaries as a user meets them on the command line: --help lists each binary's own
// flags with their defaults, grouped by the file that defines them and named from the repository
// root (never a build path); the worker's final line reports the rates that fit its model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/test_util.h"

namespace psflow::testing {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr auto kTimeout = std::chrono::seconds(120);

CommandResult RunBinary(const std::vector<std::string>& argv) {
  CommandResult r = RunCommand(argv, Environment({}, {"TF_CONFIG"}), kTimeout);
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status.signal, 0) << r.output;
  return r;
}

// The help text of `flag` in absl's --help output ("--name (help); default: value;", wrapped
// over several lines), with each run of whitespace made one space; empty when it is not listed.
std::string FlagHelp(const std::string& help, const std::string& flag) {
  const std::string start = absl::StrCat("\n    --", flag, " (");
  const size_t begin = help.find(start);
  if (begin == std::string::npos) return "";
  size_t end = help.find("\n    --", begin + 1);
  end = std::min(end, help.find("\n\n", begin + 1));
  std::vector<absl::string_view> words =
      absl::StrSplit(absl::string_view(help).substr(begin, end - begin), absl::ByAnyChar(" \n"),
                     absl::SkipEmpty());
  return absl::StrJoin(words, " ");
}

struct Flag {
  std::string name;
  std::string default_value;  // as --help prints it: strings quoted
};

// Runs `binary --help`; checks the head, the groups (exactly `files`, in this order), the flags'
// defaults, and that nothing but repository paths appears.
void ExpectReadableHelp(const std::string& binary, const std::vector<std::string>& files,
                        const std::vector<Flag>& flags) {
  const CommandResult r = RunBinary({Binary(binary), "--help"});
  EXPECT_EQ(r.status.code, 1) << r.output;  // absl's --help exits 1
  EXPECT_THAT(r.output, StartsWith(binary + ": ")) << r.output;
  std::vector<std::string> groups;
  for (absl::string_view line : absl::StrSplit(r.output, '\n')) {
    if (absl::ConsumePrefix(&line, "  Flags from ") && absl::ConsumeSuffix(&line, ":")) {
      groups.emplace_back(line);
    }
  }
  EXPECT_EQ(groups, files) << r.output;
  for (const Flag& flag : flags) {
    EXPECT_THAT(FlagHelp(r.output, flag.name), EndsWith("; default: " + flag.default_value + ";"))
        << "--" << flag.name << " in\n"
        << r.output;
  }
  EXPECT_THAT(r.output, Not(HasSubstr("No flags matched"))) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("--flagfile"))) << r.output;  // absl's, in --helpfull
  EXPECT_THAT(r.output, Not(HasSubstr("/tmp/"))) << r.output;
  // absl drops the leading "/" of a path it prints.
  EXPECT_THAT(r.output, Not(HasSubstr(absl::StripPrefix(SourceDir(), "/")))) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr(absl::StripPrefix(BinDir(), "/")))) << r.output;
}

TEST(Help, PsflowListsItsFlagsWithTheirDefaults) {
  ExpectReadableHelp("psflow", {"operator/local/main.cc"},
                     {{"progress", "\"auto\""},
                      {"progress_every_s", "10"},
                      {"run_dir", "\"\""},
                      {"verbose", "false"},
                      {"stop_grace_s", "10"},
                      {"prometheus_targets", "\"\""}});
}

TEST(Help, PsflowWorkerListsTheClusterFlagsThenItsOwn) {
  ExpectReadableHelp("psflow-worker", {"core/task_flags.cc", "worker/main.cc"},
                     {{"job_name", "\"\""},
                      {"task_index", "-1"},
                      {"metrics_port", "-1"},
                      {"model", "\"\""},
                      {"compute_threads", "0"},
                      {"compute", "\"real\""},
                      {"placement", "\"balanced\""},
                      {"overlap", "true"},
                      {"device", "\"cpu\""},
                      {"eval_interval_s", "30"},
                      {"ps_timeout_s", "60"}});
}

TEST(Help, PsflowPsListsTheClusterFlagsThenItsOwn) {
  ExpectReadableHelp("psflow-ps", {"core/task_flags.cc", "ps/main.cc"},
                     {{"ps_hosts", "\"\""},
                      {"bind_address", "\"0.0.0.0\""},
                      {"checkpoint_every_s", "60"},
                      {"keep_checkpoints", "3"}});
}

TEST(Help, PsflowOperatorListsItsFlagsWithTheirDefaults) {
  ExpectReadableHelp("psflow-operator", {"operator/main.cc"},
                     {{"workers", "4"},
                      {"leader_elect", "true"},
                      {"lease_name", "\"psflow-operator\""},
                      {"metrics_port", "8080"}});
}

TEST(Help, HelpfullAddsAbslsOwnFlags) {
  const CommandResult r = RunBinary({Binary("psflow-ps"), "--helpfull"});
  EXPECT_EQ(r.status.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--flagfile")) << r.output;
  EXPECT_THAT(r.output, HasSubstr("  Flags from ps/main.cc:\n")) << r.output;
}

TEST(Help, VersionNamesPsflowsVersion) {
  const CommandResult r = RunBinary({Binary("psflow-worker"), "--version"});
  EXPECT_EQ(r.status.code, 0) << r.output;
  EXPECT_THAT(r.output, StartsWith("psflow ")) << r.output;
}

// The worker alone on a few synthetic batches; its "done:" line.
std::string DoneLine(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {Binary("psflow-worker"), "--data_source=synthetic",
                                   "--train_steps=3", "--log_every_steps=0", "--compute_threads=1"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  const CommandResult r = RunBinary(argv);
  EXPECT_TRUE(r.status.ok()) << r.status.Describe() << "\n" << r.output;
  const std::vector<std::string> done = LinesWith(r.output, "worker 0 done: ");
  return done.size() == 1 ? done[0] : r.output;
}

TEST(WorkerDoneLine, AClassifierReportsExamplesPerSecondAndNoWords) {
  const std::string done = DoneLine({"--model=mnist_mlp"});
  EXPECT_GT(Field(done, "examples_per_sec"), 0) << done;
  EXPECT_THAT(done, Not(HasSubstr("words"))) << done;
}

TEST(WorkerDoneLine, ALanguageModelReportsWordsPerSecondToo) {
  const std::string done = DoneLine({"--model=ptb_lstm", "--model_config=test"});
  EXPECT_GT(Field(done, "examples_per_sec"), 0) << done;
  EXPECT_GT(Field(done, "words_per_sec"), 0) << done;
}

}  // namespace
}  // namespace psflow::testing
