// `psflow run`'s progress display, as text: a tqdm/Keras-like line with a bar for a terminal and
// a plain one for logs. Pure functions of a snapshot; the runner decides when to draw.
#ifndef PSFLOW_OPERATOR_LOCAL_PROGRESS_BAR_H_
#define PSFLOW_OPERATOR_LOCAL_PROGRESS_BAR_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace psflow::local {

// Where a job stands, summed over its trainers (workers and chief).
struct ProgressSnapshot {
  std::string job;
  int64_t steps = 0;                   // training steps done
  std::optional<int64_t> total_steps;  // steps the trainers will run in all; nullopt: unknown
  double rate = 0;                     // per second, in `rate_unit`
  std::string rate_unit = "examples/s";
  std::optional<double> loss;  // the trainers' mean last loss; nullopt: none reported yet
  double elapsed_s = 0;
  std::optional<double> eta_s;  // nullopt: not known (yet)
};

// "0:07", "12:05", "1:02:03"; "?" for a negative or non-finite number of seconds.
std::string FormatDuration(double seconds);

// `text` cut to at most `width` bytes (the lines are ASCII); width < 0 counts as 0.
std::string FitToWidth(absl::string_view text, int width);

// The live line for a terminal `columns` wide, never wider than columns - 1 (so the cursor never
// wraps to a new row); the job's name is left out for room (the runner prints it at the start):
//    41% [=====>         ] 1230/3000 | 2310 examples/s | loss 0.5123 | 0:05 ETA 0:07
// The bar takes the room the text leaves (at most 40 columns), and is left out when that is
// less than 10; the line is then cut at the width. An unknown total shows the count and says
// so, without a bar:
//   1230 steps (total unknown) | 2310 examples/s | loss 0.5123 | 0:05 elapsed
std::string FormatProgressLine(const ProgressSnapshot& p, int columns);

// The line for a log (stdout not a terminal): the same figures, spelled out, no bar:
//   [psflow] mnist-mlp 1230/3000 steps (41%) | 2310 examples/s | loss 0.5123 | elapsed 0:05 |
//   ETA 0:07
std::string FormatProgressPlain(const ProgressSnapshot& p);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_PROGRESS_BAR_H_
