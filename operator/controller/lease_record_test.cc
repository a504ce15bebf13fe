#include "operator/controller/lease_record.h"

#include <gtest/gtest.h>

namespace psflow::controller {
namespace {

absl::Time At(int64_t unix_micros) { return absl::FromUnixMicros(unix_micros); }

TEST(MicroTime, FormatsUtcWithSixFractionalDigitsAndParsesBack) {
  const absl::Time t = At(1714564800123456);  // 2024-05-01T12:00:00.123456Z
  EXPECT_EQ(FormatMicroTime(t), "2024-05-01T12:00:00.123456Z");
  EXPECT_EQ(FormatMicroTime(At(1714564800000000)), "2024-05-01T12:00:00.000000Z");
  absl::StatusOr<absl::Time> parsed = ParseMicroTime("2024-05-01T12:00:00.123456Z");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, t);
}

TEST(MicroTime, ParsesAnyRfc3339AndRejectsTheRest) {
  absl::StatusOr<absl::Time> offset = ParseMicroTime("2024-05-01T14:00:00.5+02:00");
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_EQ(*offset, At(1714564800500000));
  absl::StatusOr<absl::Time> seconds = ParseMicroTime("2024-05-01T12:00:00Z");
  ASSERT_TRUE(seconds.ok()) << seconds.status();
  EXPECT_EQ(*seconds, At(1714564800000000));
  absl::StatusOr<absl::Time> bad = ParseMicroTime("yesterday");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("\"yesterday\""), absl::string_view::npos);
}

TEST(LeaseRecord, ReadsEveryFieldOfALease) {
  const nlohmann::json lease = {{"spec",
                                 {{"holderIdentity", "op-1"},
                                  {"leaseDurationSeconds", 15},
                                  {"acquireTime", "2024-05-01T12:00:00.000000Z"},
                                  {"renewTime", "2024-05-01T12:00:10.000000Z"},
                                  {"leaseTransitions", 3}}}};
  const LeaseRecord record = ReadLeaseRecord(lease);
  EXPECT_EQ(record.holder_identity, "op-1");
  EXPECT_EQ(record.lease_duration_seconds, 15);
  EXPECT_EQ(record.acquire_time, At(1714564800000000));
  EXPECT_EQ(record.renew_time, At(1714564810000000));
  EXPECT_EQ(record.lease_transitions, 3);
}

TEST(LeaseRecord, AMalformedLeaseReadsAsEmpty) {
  for (const nlohmann::json& lease :
       {nlohmann::json(), nlohmann::json(7), nlohmann::json{{"spec", "x"}},
        nlohmann::json{{"spec",
                        {{"holderIdentity", 1},
                         {"leaseDurationSeconds", "15"},
                         {"renewTime", "soon"},
                         {"leaseTransitions", nullptr}}}}}) {
    const LeaseRecord record = ReadLeaseRecord(lease);
    EXPECT_EQ(record.holder_identity, "") << lease;
    EXPECT_EQ(record.lease_duration_seconds, 0) << lease;
    EXPECT_FALSE(record.renew_time.has_value()) << lease;
    EXPECT_FALSE(record.acquire_time.has_value()) << lease;
    EXPECT_EQ(record.lease_transitions, 0) << lease;
  }
}

TEST(LeaseRecord, WriteKeepsOtherFieldsAndRemovesUnsetTimes) {
  nlohmann::json lease = {{"metadata", {{"name", "l"}, {"resourceVersion", "9"}}},
                          {"spec", {{"renewTime", "2024-05-01T12:00:10.000000Z"}, {"x", 1}}}};
  LeaseRecord record;
  record.holder_identity = "op-2";
  record.lease_duration_seconds = 15;
  record.acquire_time = At(1714564800000001);
  record.lease_transitions = 4;
  WriteLeaseRecord(record, lease);
  EXPECT_EQ(lease, (nlohmann::json{{"metadata", {{"name", "l"}, {"resourceVersion", "9"}}},
                                   {"spec",
                                    {{"holderIdentity", "op-2"},
                                     {"leaseDurationSeconds", 15},
                                     {"acquireTime", "2024-05-01T12:00:00.000001Z"},
                                     {"leaseTransitions", 4},
                                     {"x", 1}}}}));
}

TEST(LeaseRecord, FreeWhenUnheldOrExpiredStrictlyAfterRenewPlusDuration) {
  LeaseRecord record;
  EXPECT_TRUE(record.FreeAt(At(0)));  // no holder
  record.holder_identity = "op-1";
  EXPECT_TRUE(record.FreeAt(At(0)));  // a holder but no renewTime: cannot be trusted
  record.renew_time = At(10000000);
  record.lease_duration_seconds = 15;
  EXPECT_FALSE(record.FreeAt(At(10000000)));
  EXPECT_FALSE(record.FreeAt(At(25000000)));  // exactly renewTime + duration: still held
  EXPECT_TRUE(record.FreeAt(At(25000001)));
}

}  // namespace
}  // namespace psflow::controller
