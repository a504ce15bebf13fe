#include "operator/api/quantity.h"

#include <gtest/gtest.h>

namespace psflow::api {
namespace {

TEST(Quantity, ParsesWhatTheApiServerAcceptsInThousandths) {
  const std::pair<const char*, int64_t> cases[] = {
      {"0", 0},
      {"2", 2000},
      {"500m", 500},
      {"0.5", 500},
      {"1.5", 1500},
      {".5", 500},
      {"1Ki", 1024'000},
      {"1.5Gi", 1610612736'000},
      {"64Mi", 67108864'000},
      {"1k", 1'000'000},
      {"2M", 2'000'000'000},
      {"1G", 1'000'000'000'000},
      {"1e3", 1'000'000},
      {"1E-3", 1},
      {"2.5e2", 250'000},
      {"100u", 1},  // finer than a thousandth: rounded up
      {"1n", 1},
      {"+3", 3000},
      {"-1", -1000},
  };
  for (const auto& [text, milli] : cases) {
    const absl::StatusOr<int64_t> got = ParseMilliQuantity(text);
    ASSERT_TRUE(got.ok()) << text << ": " << got.status();
    EXPECT_EQ(*got, milli) << text;
  }
}

TEST(Quantity, RefusesWhatIsNoQuantityInOneLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "\"\" is not a quantity (no digits)"},
      {"m", "\"m\" is not a quantity (no digits)"},
      {"1Gb", "\"1Gb\" is not a quantity (unknown suffix \"Gb\")"},
      {"1 Gi", "\"1 Gi\" is not a quantity (unknown suffix \" Gi\")"},
      {"1e", "\"1e\" is not a quantity (unknown suffix \"e\")"},
      {"1e+", "\"1e+\" is not a quantity (an exponent without digits)"},
      {"1e99", "\"1e99\" is not a quantity (exponent too large)"},
      {"10E", "\"10E\" is not a quantity (too large)"},
  };
  for (const auto& [text, message] : cases) {
    const absl::StatusOr<int64_t> got = ParseMilliQuantity(text);
    ASSERT_FALSE(got.ok()) << text;
    EXPECT_EQ(got.status().message(), message) << text;
  }
}

TEST(Quantity, FormatsWholeUnitsPlainAndTheRestInMilli) {
  EXPECT_EQ(FormatMilliQuantity(0), "0");
  EXPECT_EQ(FormatMilliQuantity(2000), "2");
  EXPECT_EQ(FormatMilliQuantity(1500), "1500m");
  EXPECT_EQ(FormatMilliQuantity(1024'000), "1024");
  EXPECT_EQ(ParseMilliQuantity(FormatMilliQuantity(1500)).value(), 1500);
}

}  // namespace
}  // namespace psflow::api
