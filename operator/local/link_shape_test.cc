#include "operator/local/link_shape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace psflow::local {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(LinkShape, ParsesRatesInDecimalBitsPerSecond) {
  const std::vector<std::pair<std::string, int64_t>> cases = {
      {"100mbit", 100'000'000},   {"1gbit", 1'000'000'000},    {"10gbit", 10'000'000'000},
      {"25gbit", 25'000'000'000}, {"2.5gbit", 2'500'000'000},  {"1500kbit", 1'500'000},
      {"1Gbit", 1'000'000'000},   {"0.4tbit", 400'000'000'000}};
  for (const auto& [spec, bits] : cases) {
    auto shape = ParseLinkShape(spec);
    ASSERT_TRUE(shape.ok()) << spec << ": " << shape.status();
    EXPECT_EQ(shape->rate_bits_per_second, bits) << spec;
    EXPECT_EQ(shape->delay, absl::ZeroDuration()) << spec;
    EXPECT_EQ(shape->loss_percent, 0) << spec;
  }
}

TEST(LinkShape, ParsesDelaysAndLoss) {
  auto shape = ParseLinkShape("10gbit,0.2ms");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->delay, absl::Microseconds(200));
  EXPECT_EQ(DescribeLinkShape(*shape), "10gbit, 0.2ms delay");

  shape = ParseLinkShape("25gbit,1ms,0.1%");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->rate_bits_per_second, 25'000'000'000);
  EXPECT_EQ(shape->delay, absl::Milliseconds(1));
  EXPECT_DOUBLE_EQ(shape->loss_percent, 0.1);
  EXPECT_EQ(DescribeLinkShape(*shape), "25gbit, 1ms delay, 0.1% loss");

  shape = ParseLinkShape("1gbit,50us");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->delay, absl::Microseconds(50));

  shape = ParseLinkShape("1gbit,2s,5%");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->delay, absl::Seconds(2));
  EXPECT_DOUBLE_EQ(shape->loss_percent, 5);

  shape = ParseLinkShape("1gbit");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(DescribeLinkShape(*shape), "1gbit");
}

TEST(LinkShape, RefusesBadSpecsNamingThePart) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "RATE is missing"},
      {"fast", "RATE \"fast\" is not a number of kbit, mbit, gbit or tbit"},
      {"1gbps", "RATE \"1gbps\""},      // bytes per second in tc's words: refused, not guessed
      {"1000", "RATE \"1000\""},        // no unit
      {"-1gbit", "RATE \"-1gbit\""},    // no sign
      {"1e3mbit", "RATE \"1e3mbit\""},  // no exponent
      {"infgbit", "RATE \"infgbit\""},
      {"1.2.3gbit", "RATE \"1.2.3gbit\""},
      {"500kbit", "outside 1mbit..400gbit"},
      {"1tbit", "outside 1mbit..400gbit"},
      {"0gbit", "outside 1mbit..400gbit"},
      {"1gbit,", "DELAY \"\" is not a number of us, ms or s"},
      {"1gbit,5", "DELAY \"5\""},
      {"1gbit,5min", "DELAY \"5min\""},
      {"1gbit,11s", "DELAY \"11s\" is over 10s"},
      {"1gbit,1ms,", "LOSS \"\" is not a percentage"},
      {"1gbit,1ms,0.1", "LOSS \"0.1\""},
      {"1gbit,1ms,100%", "LOSS \"100%\" is not below 100%"},
      {"1gbit,1ms,1%,x", "more than three parts"},
      {" 1gbit", "RATE \" 1gbit\""},
  };
  for (const auto& [spec, message] : cases) {
    auto shape = ParseLinkShape(spec);
    ASSERT_FALSE(shape.ok()) << spec;
    EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument) << spec;
    EXPECT_THAT(shape.status().message(), HasSubstr(message)) << spec;
    EXPECT_THAT(shape.status().message(), HasSubstr("--emulate_network=\"" + spec + "\": "));
  }
}

TEST(LinkShape, ARateAloneIsOneTokenBucket) {
  auto shape = ParseLinkShape("200mbit");
  ASSERT_TRUE(shape.ok());
  // 1 ms at 200mbit is 25000 bytes: the 64 KiB floor holds a whole offloaded packet.
  EXPECT_THAT(QdiscCommands(*shape, "eth0"),
              ElementsAre(ElementsAre("qdisc", "add", "dev", "eth0", "root", "tbf", "rate",
                                      "200000000bit", "burst", "65536", "latency", "50ms")));
  shape = ParseLinkShape("25gbit");
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ(QdiscCommands(*shape, "r3")[0][9], "3125000");  // 1 ms at 25gbit
}

TEST(LinkShape, DelayOrLossPutsNetemAboveTheTokenBucket) {
  auto shape = ParseLinkShape("25gbit,1ms,0.1%");
  ASSERT_TRUE(shape.ok());
  EXPECT_THAT(
      QdiscCommands(*shape, "eth0"),
      ElementsAre(
          ElementsAre("qdisc", "add", "dev", "eth0", "root", "handle", "1:", "netem", "limit",
                      "1000000", "delay", "1000us", "loss", "0.1%"),
          ElementsAre("qdisc", "add", "dev", "eth0", "parent", "1:1", "handle", "10:", "tbf",
                      "rate", "25000000000bit", "burst", "3125000", "latency", "50ms")));
  shape = ParseLinkShape("1gbit,0ms,1%");
  ASSERT_TRUE(shape.ok());
  EXPECT_THAT(QdiscCommands(*shape, "eth0")[0],
              ElementsAre("qdisc", "add", "dev", "eth0", "root", "handle", "1:", "netem", "limit",
                          "1000000", "loss", "1%"));
}

}  // namespace
}  // namespace psflow::local
