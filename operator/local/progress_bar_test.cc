#include "operator/local/progress_bar.h"

#include <gtest/gtest.h>

#include <cmath>

namespace psflow::local {
namespace {

ProgressSnapshot Example() {
  ProgressSnapshot p;
  p.job = "mnist-mlp";
  p.steps = 1230;
  p.total_steps = 3000;
  p.rate = 2310.4;
  p.loss = 0.51234;
  p.elapsed_s = 5.2;
  p.eta_s = 7.9;
  return p;
}

TEST(FormatDuration, MinutesSecondsAndHours) {
  EXPECT_EQ(FormatDuration(0), "0:00");
  EXPECT_EQ(FormatDuration(7.9), "0:07");
  EXPECT_EQ(FormatDuration(725), "12:05");
  EXPECT_EQ(FormatDuration(3723), "1:02:03");
  EXPECT_EQ(FormatDuration(-1), "?");
  EXPECT_EQ(FormatDuration(NAN), "?");
}

TEST(FormatProgressLine, BarFillsTheRoomOfAnEightyColumnTerminal) {
  const std::string line = FormatProgressLine(Example(), 80);
  EXPECT_EQ(line,
            " 41% [=====>        ] 1230/3000 | 2310 examples/s | loss 0.5123 | 0:05 ETA 0:07");
  EXPECT_EQ(line.size(), 79u);  // one short of the width: the cursor never wraps
}

TEST(FormatProgressLine, BarIsAtMostFortyColumns) {
  EXPECT_EQ(FormatProgressLine(Example(), 200),
            " 41% [===============>                      ] 1230/3000 | 2310 examples/s | "
            "loss 0.5123 | 0:05 ETA 0:07");
}

TEST(FormatProgressLine, NarrowTerminalDropsTheBarAndCutsTheLine) {
  EXPECT_EQ(FormatProgressLine(Example(), 40), " 41% 1230/3000 | 2310 examples/s | loss");
  EXPECT_EQ(FormatProgressLine(Example(), 1), "");
}

TEST(FormatProgressLine, DoneFillsTheBar) {
  ProgressSnapshot p = Example();
  p.steps = 3000;
  p.eta_s = 0;
  p.loss.reset();
  p.rate = 10234.6;
  p.rate_unit = "words/s";
  EXPECT_EQ(FormatProgressLine(p, 80),
            "100% [" + std::string(30, '=') + "] 3000/3000 | 10235 words/s | 0:05 ETA 0:00");
}

TEST(FormatProgressLine, UnknownTotalShowsTheCountWithoutABar) {
  ProgressSnapshot p = Example();
  p.total_steps.reset();
  EXPECT_EQ(FormatProgressLine(p, 80),
            "1230 steps (total unknown) | 2310 examples/s | loss 0.5123 | 0:05 elapsed");
}

TEST(FormatProgressPlain, SpellsOutEveryFigure) {
  EXPECT_EQ(FormatProgressPlain(Example()),
            "[psflow] mnist-mlp 1230/3000 steps (41%) | 2310 examples/s | loss 0.5123 | "
            "elapsed 0:05 | ETA 0:07");
  ProgressSnapshot p = Example();
  p.eta_s.reset();
  EXPECT_EQ(FormatProgressPlain(p),
            "[psflow] mnist-mlp 1230/3000 steps (41%) | 2310 examples/s | loss 0.5123 | "
            "elapsed 0:05 | ETA ?");
  p.total_steps.reset();
  EXPECT_EQ(FormatProgressPlain(p),
            "[psflow] mnist-mlp 1230 steps (total unknown) | 2310 examples/s | loss 0.5123 | "
            "elapsed 0:05");
}

}  // namespace
}  // namespace psflow::local
