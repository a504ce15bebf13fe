// `psflow run` in a real terminal (tmux, a fixed 100x30 pane): the live progress bar shows a
// percentage and an ETA, is redrawn in place (the pane never holds more than one bar line), fits
// the width, and the summary table follows it at the end.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "tests/test_util.h"

namespace psflow::testing {
namespace {

namespace fs = std::filesystem;
constexpr int kColumns = 100;

// A tmux server of this test's own (its own socket, no user configuration).
class Tmux {
 public:
  Tmux() : socket_(absl::StrCat("psflow-test-", getpid())) {}
  ~Tmux() { Run({"kill-server"}); }
  CommandResult Run(const std::vector<std::string>& args) const {
    std::vector<std::string> argv = {"tmux", "-L", socket_, "-f", "/dev/null"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, Environment({}), std::chrono::seconds(20));
  }
  // The pane's visible text, one string per row.
  std::vector<std::string> Capture() const {
    const CommandResult r = Run({"capture-pane", "-p", "-t", "run"});
    return absl::StrSplit(r.output, '\n');
  }

 private:
  std::string socket_;
};

bool TmuxInstalled() {
  return RunCommand({"sh", "-c", "command -v tmux"}, Environment({}), std::chrono::seconds(10))
      .status.ok();
}

// The pane's rows that are the live bar: " 41% [====>   ] 1230/3000 | ... ETA 0:07".
std::vector<std::string> BarRows(const std::vector<std::string>& rows) {
  std::vector<std::string> bars;
  for (const std::string& row : rows) {
    if (absl::StrContains(row, "% [") && absl::StrContains(row, " ETA ")) bars.push_back(row);
  }
  return bars;
}

TEST(LocalRunTerminal, LiveBarIsRedrawnInPlaceAndTheSummaryFollows) {
  if (!TmuxInstalled()) GTEST_SKIP() << "tmux is not installed (scripts/setup.sh installs it)";
  const std::string dir = absl::StrCat(::testing::TempDir(), "psflow_terminal_", getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string job = dir + "/job.yaml";
  WriteJob(
      job, "tty", 2,
      {"--model=mnist_mlp", "--compute_threads=1", "--train_steps=3000", "--log_every_steps=100"});
  Tmux tmux;
  const std::string command = absl::StrCat(Binary("psflow"), " run --run_dir=", dir, "/runs ", job,
                                           "; echo PSFLOW_EXIT=$?; sleep 600");
  ASSERT_TRUE(tmux.Run({"new-session", "-d", "-s", "run", "-x", absl::StrCat(kColumns), "-y", "30",
                        command})
                  .status.ok());

  // Poll the pane until the run has ended; every look holds at most one bar row.
  std::set<std::string> bars_seen;
  std::vector<std::string> rows;
  bool ended = false;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (!ended && std::chrono::steady_clock::now() < give_up) {
    rows = tmux.Capture();
    const std::vector<std::string> bars = BarRows(rows);
    ASSERT_LE(bars.size(), 1u) << absl::StrJoin(rows, "\n");
    for (const std::string& bar : bars) {
      bars_seen.insert(bar);
      EXPECT_LT(bar.size(), static_cast<size_t>(kColumns)) << bar;  // never wraps
    }
    ended = absl::c_any_of(
        rows, [](const std::string& row) { return absl::StartsWith(row, "PSFLOW_EXIT="); });
    usleep(100000);
  }
  const std::string pane = absl::StrJoin(rows, "\n");
  ASSERT_TRUE(ended) << pane;
  EXPECT_TRUE(absl::c_linear_search(rows, "PSFLOW_EXIT=0")) << pane;

  // The bar was drawn while training, with a percentage below 100 and an ETA, and redrawn.
  const bool partial = absl::c_any_of(bars_seen, [](const std::string& bar) {
    return !absl::StartsWith(bar, "100% [") && bar.find("% [") == 3;
  });
  EXPECT_TRUE(partial) << absl::StrJoin(bars_seen, "\n");
  EXPECT_GE(bars_seen.size(), 2u) << absl::StrJoin(bars_seen, "\n");
  // At the end, the one bar left is the full one, and the summary is below it.
  const std::vector<std::string> last = BarRows(rows);
  ASSERT_EQ(last.size(), 1u) << pane;
  EXPECT_TRUE(absl::StartsWith(last[0], "100% [=")) << last[0];
  EXPECT_TRUE(absl::StrContains(last[0], "] 6000/6000 | ")) << last[0];
  EXPECT_TRUE(absl::StrContains(pane, "\nreplica   exit ")) << pane;
  EXPECT_TRUE(absl::StrContains(pane, "\nworker-0  exit 0 ")) << pane;
  EXPECT_TRUE(absl::StrContains(pane, "[psflow] job tty Succeeded")) << pane;
  // No replica's own lines in the terminal: they are in the logs.
  EXPECT_FALSE(absl::StrContains(pane, "[worker-0]")) << pane;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace psflow::testing
