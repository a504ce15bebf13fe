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

TEST(LeaseRecord, FreeWhenUnheldOrUnchangedForLongerThanItsDurationByOurClock) {
  LeaseSighting seen;
  LeaseRecord record;
  EXPECT_TRUE(record.FreeAt(At(0), seen));  // no holder
  record.holder_identity = "op-1";
  EXPECT_TRUE(record.FreeAt(At(0), seen));  // a holder but no renewTime: cannot be trusted
  record.renew_time = At(10000000);
  record.lease_duration_seconds = 15;
  EXPECT_FALSE(record.FreeAt(At(10000000), seen));  // first seen at 10 s
  EXPECT_FALSE(record.FreeAt(At(25000000), seen));  // exactly seen + duration: still held
  EXPECT_TRUE(record.FreeAt(At(25000001), seen));
  // Renewed: timed again from when the new renewTime is seen.
  record.renew_time = At(30000000);
  EXPECT_FALSE(record.FreeAt(At(31000000), seen));
  EXPECT_FALSE(record.FreeAt(At(46000000), seen));
  EXPECT_TRUE(record.FreeAt(At(46000001), seen));
  // Another holder with the same renewTime is a change too.
  record.holder_identity = "op-2";
  EXPECT_FALSE(record.FreeAt(At(50000000), seen));
}

// The holder's clock does not matter: a renewTime far behind ours (a holder whose clock is slow,
// or ours fast) is not taken for an expired lease, nor one far ahead for a long one.
TEST(LeaseRecord, TheHoldersClockDoesNotMatter) {
  LeaseRecord record;
  record.holder_identity = "op-1";
  record.lease_duration_seconds = 15;
  record.renew_time = At(0);
  LeaseSighting behind;
  EXPECT_FALSE(record.FreeAt(At(1000000000), behind));
  EXPECT_FALSE(record.FreeAt(At(1015000000), behind));
  EXPECT_TRUE(record.FreeAt(At(1015000001), behind));
  record.renew_time = At(5000000000);
  LeaseSighting ahead;
  EXPECT_FALSE(record.FreeAt(At(1000000000), ahead));
  EXPECT_TRUE(record.FreeAt(At(1015000001), ahead));
}

}  // namespace
}  // namespace psflow::controller
