#include "operator/local/run_summary.h"

#include <algorithm>
#include <csignal>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow::local {
namespace {

std::string Figure(const std::optional<double>& v, int decimals) {
  return v ? absl::StrFormat("%.*f", decimals, *v) : std::string("-");
}

std::string Evaluation(const ReplicaReport& r) {
  std::string out;
  if (r.test_accuracy) {
    out = absl::StrFormat("accuracy %.4f", *r.test_accuracy);
  } else if (r.test_perplexity) {
    out = absl::StrFormat("perplexity %.3f", *r.test_perplexity);
  } else if (r.train_perplexity) {
    out = absl::StrFormat("train perplexity %.3f", *r.train_perplexity);
  } else if (r.ps_global_step) {
    return absl::StrFormat("global step %.0f", *r.ps_global_step);
  } else {
    return "-";
  }
  if (r.evaluated_step) absl::StrAppendFormat(&out, " at step %.0f", *r.evaluated_step);
  return out;
}

}  // namespace

std::string StoppedExit(int exit_code, int signal) {
  if (signal == SIGTERM || (signal == 0 && (exit_code == 0 || exit_code == 128 + SIGTERM))) {
    return "stopped";
  }
  return signal != 0 ? absl::StrCat("stopped, signal ", signal)
                     : absl::StrCat("stopped, exit ", exit_code);
}

std::optional<double> LineField(absl::string_view line, absl::string_view key) {
  const std::string needle = absl::StrCat(key, "=");
  for (size_t at = line.find(needle); at != absl::string_view::npos;
       at = line.find(needle, at + 1)) {
    if (at > 0 && line[at - 1] != ' ') continue;  // "test_loss=" is not "loss="
    absl::string_view value = line.substr(at + needle.size());
    value = value.substr(0, value.find(' '));
    double v;
    if (absl::SimpleAtod(value, &v)) return v;
    return std::nullopt;
  }
  return std::nullopt;
}

bool ObserveLogLine(absl::string_view line, ReplicaReport& report) {
  auto take = [&](std::optional<double>& into, absl::string_view key) {
    if (auto v = LineField(line, key)) into = v;
  };
  if (line.find(" done: steps=") != absl::string_view::npos) {
    take(report.steps, "steps");
    take(report.examples_per_sec, "examples_per_sec");
    take(report.words_per_sec, "words_per_sec");
    take(report.compute_ms, "compute_ms");
    take(report.push_ms, "push_ms");
    take(report.pull_ms, "pull_ms");
    take(report.wait_ms, "input_wait_ms");
    take(report.test_accuracy, "test_accuracy");
    take(report.test_perplexity, "test_perplexity");
    take(report.train_perplexity, "train_perplexity");
    take(report.global_step, "global_step");
    return true;
  }
  if (line.find("evaluator ") != absl::string_view::npos &&
      line.find(": global_step=") != absl::string_view::npos) {
    take(report.evaluated_step, "global_step");
    take(report.test_accuracy, "test_accuracy");
    take(report.test_perplexity, "test_perplexity");
  } else if (line.find(" stopped: global_step=") != absl::string_view::npos) {
    take(report.ps_global_step, "global_step");
  }
  return false;
}

std::string FormatSummaryTable(const std::vector<ReplicaReport>& reports, bool ansi) {
  const bool words = std::any_of(reports.begin(), reports.end(), [](const ReplicaReport& r) {
    return r.words_per_sec.has_value();
  });
  std::vector<std::vector<std::string>> rows;
  rows.push_back({"replica", "exit", "steps", words ? "words/s" : "examples/s", "compute ms",
                  "push ms", "pull ms", "wait ms", "evaluation"});
  for (const ReplicaReport& r : reports) {
    std::string exit = r.exit;
    if (r.restarts > 0) {
      absl::StrAppend(&exit, " (", r.restarts, r.restarts == 1 ? " restart)" : " restarts)");
    }
    rows.push_back({r.name, exit, Figure(r.steps, 0),
                    Figure(words ? r.words_per_sec : r.examples_per_sec, 1),
                    Figure(r.compute_ms, 3), Figure(r.push_ms, 3), Figure(r.pull_ms, 3),
                    Figure(r.wait_ms, 3), Evaluation(r)});
  }
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (size_t i = 0; i < rows.size(); ++i) {
    std::string line;
    for (size_t c = 0; c < rows[i].size(); ++c) {
      // Names and words left-aligned, numbers right-aligned; the last column is not padded.
      const bool left = c <= 1 || c + 1 == rows[i].size();
      const std::string& cell = rows[i][c];
      const std::string pad(width[c] - cell.size(), ' ');
      if (c > 0) line += "  ";
      line += c + 1 == rows[i].size() ? cell : left ? cell + pad : pad + cell;
    }
    if (i == 0 && ansi) line = absl::StrCat("\033[1m", line, "\033[0m");
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

}  // namespace psflow::local
