#include "core/bulk_wire.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/frame.h"

namespace psflow {
namespace {

std::array<std::byte, kBulkPrefixBytes> Raw(uint32_t kind, uint32_t id, uint64_t length) {
  std::array<std::byte, kBulkPrefixBytes> out{};
  for (int i = 0; i < 4; ++i) out[i] = static_cast<std::byte>(kind >> (8 * i));
  for (int i = 0; i < 4; ++i) out[4 + i] = static_cast<std::byte>(id >> (8 * i));
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<std::byte>(length >> (8 * i));
  return out;
}

TEST(BulkWire, PrefixIsLittleEndianKindIdLength) {
  EXPECT_EQ(EncodeBulkPrefix({BulkKind::kPull, 0x01020304, 0x1122334455667788}),
            Raw(2, 0x01020304, 0x1122334455667788));
}

TEST(BulkWire, PrefixRules) {
  struct Row {
    const char* name;
    uint32_t kind;
    uint64_t length;
    BulkReader reader;
    bool ok;
    std::string error;  // a part of the message
  };
  const uint64_t max = 1000;
  const std::vector<Row> rows = {
      {"push to the ps", 1, 1000, BulkReader::kPs, true, ""},
      {"pull to the ps", 2, 0, BulkReader::kPs, true, ""},
      {"reply to a worker", 3, 17, BulkReader::kWorker, true, ""},
      {"error to a worker", 4, 4, BulkReader::kWorker, true, ""},
      {"error of the longest message", 4, 4 + kMaxBulkErrorBytes, BulkReader::kWorker, true, ""},
      {"a reply sent to the ps", 3, 10, BulkReader::kPs, false, "kind 3 where a request"},
      {"a request sent to a worker", 1, 10, BulkReader::kWorker, false, "kind 1 where a reply"},
      {"kind 0", 0, 10, BulkReader::kPs, false, "kind 0"},
      {"unknown kind", 77, 10, BulkReader::kWorker, false, "kind 77"},
      {"a body over the limit", 1, 1001, BulkReader::kPs, false, "1001 bytes, more than the 1000"},
      {"a huge body", 3, ~uint64_t{0}, BulkReader::kWorker, false, "more than the 1000"},
      {"an error without its code", 4, 3, BulkReader::kWorker, false, "error reply of 3 bytes"},
      {"an error too long", 4, 5 + kMaxBulkErrorBytes, BulkReader::kWorker, false, "error reply"},
  };
  for (const Row& r : rows) {
    const auto raw = Raw(r.kind, 9, r.length);
    absl::StatusOr<BulkPrefix> p = DecodeBulkPrefix(raw, r.reader, max);
    EXPECT_EQ(p.ok(), r.ok) << r.name << ": " << p.status();
    if (p.ok()) {
      EXPECT_EQ(static_cast<uint32_t>(p->kind), r.kind) << r.name;
      EXPECT_EQ(p->call_id, 9u) << r.name;
      EXPECT_EQ(p->length, r.length) << r.name;
    } else {
      EXPECT_TRUE(absl::IsInvalidArgument(p.status())) << r.name;
      EXPECT_NE(p.status().message().find(r.error), std::string::npos)
          << r.name << ": " << p.status();
    }
  }
}

TEST(BulkWire, ErrorsRoundTripWithTheirCodeAndAreCut) {
  const std::string body = EncodeBulkError(absl::InvalidArgumentError("bad partition 7"));
  const absl::Status back =
      DecodeBulkError({reinterpret_cast<const std::byte*>(body.data()), body.size()});
  EXPECT_EQ(back, absl::InvalidArgumentError("bad partition 7"));
  const std::string long_body = EncodeBulkError(absl::UnavailableError(std::string(10000, 'x')));
  EXPECT_EQ(long_body.size(), 4 + kMaxBulkErrorBytes);
}

TEST(BulkWire, AnErrorBodyThatIsNotOneIsNeverOk) {
  for (uint32_t code : {0u, 17u, 1000u}) {
    std::vector<std::byte> body(6, std::byte{'m'});
    for (int i = 0; i < 4; ++i)
      body[static_cast<size_t>(i)] = static_cast<std::byte>(code >> (8 * i));
    const absl::Status s = DecodeBulkError(body);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << code << ": " << s;
  }
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeBulkError({})));
}

TEST(BulkWire, FrameHeaderMustFitTheBody) {
  const auto le = [](uint32_t n) {
    std::array<std::byte, 4> b{};
    for (int i = 0; i < 4; ++i) b[static_cast<size_t>(i)] = static_cast<std::byte>(n >> (8 * i));
    return b;
  };
  EXPECT_EQ(FrameHeaderBytes(le(10), 14).value(), 10u);  // no payload
  EXPECT_EQ(FrameHeaderBytes(le(0), 4).value(), 0u);
  EXPECT_EQ(FrameHeaderBytes(le(10), 1 << 20).value(), 10u);
  EXPECT_TRUE(absl::IsInvalidArgument(FrameHeaderBytes(le(11), 14).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(FrameHeaderBytes(le(0), 3).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      FrameHeaderBytes(le(kMaxFrameHeaderBytes + 1), uint64_t{1} << 40).status()));
}

}  // namespace
}  // namespace psflow
