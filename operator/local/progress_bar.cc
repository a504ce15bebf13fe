#include "operator/local/progress_bar.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace psflow::local {
namespace {

constexpr int kMaxBarWidth = 40;
constexpr int kMinBarWidth = 10;

// Whole percent, rounded down so 100% means done.
int64_t Percent(const ProgressSnapshot& p) {
  if (!p.total_steps || *p.total_steps <= 0) return 0;
  return std::clamp<int64_t>(p.steps * 100 / *p.total_steps, 0, 100);
}

// " | 2310 examples/s | loss 0.5123"
std::string RateAndLoss(const ProgressSnapshot& p) {
  std::string out = absl::StrFormat(" | %.0f %s", p.rate, p.rate_unit);
  if (p.loss) absl::StrAppendFormat(&out, " | loss %.4f", *p.loss);
  return out;
}

std::string Eta(const ProgressSnapshot& p) {
  return p.eta_s ? FormatDuration(*p.eta_s) : std::string("?");
}

// "[=====>      ]" `width` columns wide, brackets included.
std::string Bar(const ProgressSnapshot& p, int width) {
  const int inner = width - 2;
  const int64_t total = std::max<int64_t>(*p.total_steps, 1);
  const int filled = static_cast<int>(
      std::clamp<int64_t>(p.steps * inner / total, 0, static_cast<int64_t>(inner)));
  std::string bar = "[";
  bar.append(static_cast<size_t>(filled), '=');
  if (filled < inner) {
    bar += filled > 0 ? ">" : " ";
    bar.append(static_cast<size_t>(inner - filled - 1), ' ');
  }
  return bar + "]";
}

}  // namespace

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(seconds);
  if (s >= 3600) return absl::StrFormat("%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60);
  return absl::StrFormat("%d:%02d", s / 60, s % 60);
}

std::string FitToWidth(absl::string_view text, int width) {
  return std::string(text.substr(0, static_cast<size_t>(std::max(width, 0))));
}

std::string FormatProgressLine(const ProgressSnapshot& p, int columns) {
  const int width = columns - 1;
  if (!p.total_steps) {
    return FitToWidth(absl::StrCat(p.steps, " steps (total unknown)", RateAndLoss(p), " | ",
                                   FormatDuration(p.elapsed_s), " elapsed"),
                      width);
  }
  const std::string head = absl::StrFormat("%3d%% ", Percent(p));
  const std::string tail = absl::StrCat(" ", p.steps, "/", *p.total_steps, RateAndLoss(p), " | ",
                                        FormatDuration(p.elapsed_s), " ETA ", Eta(p));
  const int room = width - static_cast<int>(head.size() + tail.size());
  if (room < kMinBarWidth) return FitToWidth(absl::StrCat(head, tail.substr(1)), width);
  return absl::StrCat(head, Bar(p, std::min(room, kMaxBarWidth)), tail);
}

std::string FormatProgressPlain(const ProgressSnapshot& p) {
  std::string out = absl::StrCat("[psflow] ", p.job, " ", p.steps);
  if (p.total_steps) {
    absl::StrAppend(&out, "/", *p.total_steps, " steps (", Percent(p), "%)");
  } else {
    absl::StrAppend(&out, " steps (total unknown)");
  }
  absl::StrAppend(&out, RateAndLoss(p), " | elapsed ", FormatDuration(p.elapsed_s));
  if (p.total_steps) absl::StrAppend(&out, " | ETA ", Eta(p));
  return out;
}

}  // namespace psflow::local
