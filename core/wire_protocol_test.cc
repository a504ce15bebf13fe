// The ps wire protocol's pieces together: frames over split byte pieces, the 16-bit wire types,
// chunk planning and shape checks (core/frame.h, byte_source.h, wire_type.h, chunk_plan.h,
// tensor_shape.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/byte_source.h"
#include "core/chunk_plan.h"
#include "core/frame.h"
#include "core/tensor_shape.h"
#include "core/wire_type.h"
#include "proto/ps.pb.h"

namespace psflow {
namespace {

std::vector<std::span<const std::byte>> Split(const std::string& bytes,
                                              const std::vector<size_t>& cuts) {
  std::vector<std::span<const std::byte>> pieces;
  size_t begin = 0;
  for (size_t cut : cuts) {
    pieces.emplace_back(reinterpret_cast<const std::byte*>(bytes.data()) + begin, cut - begin);
    begin = cut;
  }
  pieces.emplace_back(reinterpret_cast<const std::byte*>(bytes.data()) + begin,
                      bytes.size() - begin);
  return pieces;
}

TEST(Transfer, FrameRoundTripsAcrossOddlySplitPieces) {
  proto::TransferHeader h;
  h.set_kind(proto::TK_GRADIENT);
  h.set_step(41);
  h.set_fingerprint(0x0123456789abcdefULL);
  auto* s = h.add_segments();
  s->set_partition(2);
  s->set_offset(5);
  s->set_count(3);
  std::string frame = EncodeFrameHeader(h);
  const size_t header_end = frame.size();
  const float values[3] = {1.5f, -2.25f, 1e-30f};
  frame.append(reinterpret_cast<const char*>(values), sizeof values);
  // Cuts inside the prefix, inside the header and inside a float.
  ByteSource source(Split(frame, {1, 3, 7, header_end + 2, header_end + 2, header_end + 9}));
  proto::TransferHeader got;
  ASSERT_TRUE(DecodeFrameHeader(source, &got).ok());
  EXPECT_EQ(got.step(), 41);
  EXPECT_EQ(got.fingerprint(), 0x0123456789abcdefULL);
  ASSERT_EQ(got.segments_size(), 1);
  EXPECT_EQ(got.segments(0).count(), 3);
  EXPECT_EQ(source.remaining(), sizeof values);
  std::vector<float> out;
  ASSERT_TRUE(ForEachFloatBlock(source, 3, [&](std::span<const float> block) {
    out.insert(out.end(), block.begin(), block.end());
  }));
  EXPECT_EQ(out, (std::vector<float>{1.5f, -2.25f, 1e-30f}));
  EXPECT_EQ(source.remaining(), 0u);
  float extra;
  EXPECT_FALSE(ReadFloats(source, {&extra, 1}));
}

TEST(Transfer, PlannedHeaderAppendsTheFieldsThatVaryPerSend) {
  proto::TransferHeader fixed;
  fixed.set_kind(proto::TK_GRADIENT);
  fixed.set_chunk(3);
  fixed.add_segments()->set_count(7);
  FrameHeaderBuffer buffer(fixed);
  for (int64_t step : {int64_t{0}, int64_t{5}, int64_t{1} << 40, int64_t{2}}) {
    proto::TransferHeader varying;
    varying.set_step(step);
    varying.add_segments()->set_count(9);
    const std::span<const std::byte> bytes = buffer.With(varying);
    // A second source reused the way a planned call reuses its own: cleared, then refilled.
    ByteSource source;
    source.Add({});
    source.Add(bytes.first(2));
    source.Add(bytes.subspan(2));
    proto::TransferHeader got;
    ASSERT_TRUE(DecodeFrameHeader(source, &got).ok());
    EXPECT_EQ(got.kind(), proto::TK_GRADIENT);
    EXPECT_EQ(got.chunk(), 3u);
    EXPECT_EQ(got.step(), step);
    ASSERT_EQ(got.segments_size(), 2);
    EXPECT_EQ(got.segments(0).count(), 7);
    EXPECT_EQ(got.segments(1).count(), 9);
    EXPECT_EQ(source.remaining(), 0u);
    source.Clear();
    EXPECT_EQ(source.remaining(), 0u);
  }
}

TEST(Transfer, FloatBlocksCoverLongRuns) {
  std::vector<float> values(10000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  std::string bytes(reinterpret_cast<const char*>(values.data()), values.size() * 4);
  ByteSource source(Split(bytes, {3, 4097, 30001}));
  std::vector<float> out;
  std::vector<size_t> blocks;
  ASSERT_TRUE(ForEachFloatBlock(source, 10000, [&](std::span<const float> block) {
    blocks.push_back(block.size());
    out.insert(out.end(), block.begin(), block.end());
  }));
  // Through the buffer across the first cuts (no element whole in the 3-byte piece); in place
  // from byte 16384 (aligned, in the third piece) to the last element whole before its cut at
  // 30001; through the buffer again across that cut.
  EXPECT_EQ(blocks, (std::vector<size_t>{4096, 3404, 2500}));
  EXPECT_EQ(out, values);
  ByteSource short_source(Split(bytes, {}));
  EXPECT_FALSE(ForEachFloatBlock(short_source, 10001, [](std::span<const float>) {}));
  EXPECT_EQ(short_source.remaining(), bytes.size());
}

TEST(Transfer, AlignedFloat32RunsArePassedInPlace) {
  std::vector<float> values(10000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * static_cast<float>(i);
  const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
  // Cut at element boundaries: every block is the source's own memory, at most 4096 elements.
  ByteSource source({{bytes, 4 * 100}, {bytes + 4 * 100, 4 * 9900}});
  std::vector<const float*> starts;
  std::vector<size_t> sizes;
  ASSERT_TRUE(ForEachFloatBlock(source, 9999, [&](std::span<const float> block) {
    starts.push_back(block.data());
    sizes.push_back(block.size());
  }));
  const float* v = values.data();
  EXPECT_EQ(starts, (std::vector<const float*>{v, v + 100, v + 4196, v + 8292}));
  EXPECT_EQ(sizes, (std::vector<size_t>{100, 4096, 4096, 1707}));
  EXPECT_EQ(source.remaining(), 4u);
  // The same elements at an odd address are copied, and come out the same.
  std::vector<std::byte> odd(4 * values.size() + 1);
  std::memcpy(odd.data() + 1, bytes, 4 * values.size());
  ByteSource shifted({std::span<const std::byte>(odd).subspan(1)});
  std::vector<float> out;
  ASSERT_TRUE(ForEachFloatBlock(shifted, 10000, [&](std::span<const float> block) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(block.data()) % 64, 0u);  // the aligned buffer
    out.insert(out.end(), block.begin(), block.end());
  }));
  EXPECT_EQ(out, values);
}

TEST(Transfer, MalformedFramesAreRejected) {
  proto::TransferHeader h;
  const std::string cases[] = {
      std::string("\x01\x00", 2),                 // shorter than the prefix
      std::string("\x10\x00\x00\x00\x08", 5),     // header longer than the frame
      std::string("\x00\x00\x00\x7f", 4),         // over the header limit
      std::string("\x02\x00\x00\x00\xff\xff", 6)  // bytes that do not parse
  };
  for (const std::string& frame : cases) {
    ByteSource source(Split(frame, {}));
    EXPECT_EQ(DecodeFrameHeader(source, &h).code(), absl::StatusCode::kInvalidArgument)
        << frame.size();
  }
}

TEST(Transfer, PlanChunksPacksSmallAndSplitsLargePartitions) {
  // 16-byte chunks = 4 elements.
  const std::vector<int64_t> elements = {1, 2, 9, 0, 3};
  const auto chunks = PlanChunks(elements, 16);
  const std::vector<std::vector<SegmentRange>> expected = {
      {{0, 0, 1}, {1, 0, 2}, {2, 0, 1}},
      {{2, 1, 4}},
      {{2, 5, 4}},
      {{3, 0, 0}, {4, 0, 3}},
  };
  EXPECT_EQ(chunks, expected);
}

TEST(Transfer, SixteenBitWireTypesRoundToNearestEven) {
  EXPECT_EQ(ToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(ToBfloat16(-2.0f), 0xc000);
  EXPECT_EQ(ToBfloat16(1.00390625f), 0x3f80);  // halfway, even below
  EXPECT_EQ(ToBfloat16(1.01171875f), 0x3f82);  // halfway, even above
  EXPECT_EQ(FromBfloat16(0x3f81), 1.0078125f);
  EXPECT_TRUE(std::isnan(FromBfloat16(ToBfloat16(std::nanf("")))));
  EXPECT_EQ(ToFloat16(1.0f), 0x3c00);
  EXPECT_EQ(ToFloat16(65504.0f), 0x7bff);
  EXPECT_EQ(FromFloat16(0x3555), 0.333251953125f);
  EXPECT_EQ(ToFloat16(65520.0f), 0x7c00);                // halfway above the largest: infinity
  EXPECT_EQ(ToFloat16(-1.0009765625f), 0xbc01);          // sign, one ulp
  EXPECT_EQ(ToFloat16(1.00048828125f), 0x3c00);          // halfway, even below
  EXPECT_EQ(ToFloat16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(FromFloat16(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(FromFloat16(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(FromFloat16(ToFloat16(std::nanf("")))));
  // Every finite half survives a round trip through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(ToFloat16(FromFloat16(static_cast<uint16_t>(h))), h) << h;
  }
  // A frame's elements read back through blocks, converted.
  const std::vector<float> values = {0.5f, -3.0f, 1024.0f};
  for (WireType type : {WireType::kBfloat16, WireType::kFloat16}) {
    std::string bytes(values.size() * 2, '\0');
    EncodeWire(values, type, reinterpret_cast<std::byte*>(bytes.data()));
    ByteSource source(Split(bytes, {1, 3}));
    std::vector<float> out;
    ASSERT_TRUE(ForEachFloatBlock(
        source, 3, [&](std::span<const float> b) { out.insert(out.end(), b.begin(), b.end()); },
        type));
    EXPECT_EQ(out, values);
  }
  EXPECT_EQ(WireTypeOf(proto::DT_INT32).status().code(), absl::StatusCode::kInvalidArgument);
  for (const WireType type : {WireType::kFloat32, WireType::kBfloat16, WireType::kFloat16}) {
    EXPECT_EQ(*WireTypeOf(ProtoDtypeOf(type)), type);  // the inverse
  }
}

// ReadFloats converts 16-bit elements where they lie in each run, joining an element cut in two.
TEST(Transfer, SixteenBitElementsAreReadAcrossAnySplit) {
  std::vector<float> values(37);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.75f * static_cast<float>(i) - 9.0f;
  for (WireType type : {WireType::kBfloat16, WireType::kFloat16}) {
    std::string bytes(values.size() * 2, '\0');
    EncodeWire(values, type, reinterpret_cast<std::byte*>(bytes.data()));
    for (const std::vector<size_t>& cuts :
         {std::vector<size_t>{}, {1}, {0, 0, 3}, {5, 5, 6, 40}, {73}, {2, 4, 6, 8}}) {
      ByteSource source(Split(bytes, cuts));
      std::vector<float> out(values.size() - 1);
      ASSERT_TRUE(ReadFloats(source, out, type));
      EXPECT_EQ(out, std::vector<float>(values.begin(), values.end() - 1));
      EXPECT_EQ(source.remaining(), 2u);
      float two[2];
      EXPECT_FALSE(ReadFloats(source, two, type));  // one element left: nothing consumed
      EXPECT_EQ(source.remaining(), 2u);
    }
  }
}

TEST(Transfer, CheckShape) {
  EXPECT_EQ(CheckShape(std::vector<int64_t>{}, "s").value(), 1);
  EXPECT_EQ(CheckShape(std::vector<int64_t>{3, 0}, "s").value(), 0);
  EXPECT_EQ(CheckShape(std::vector<int64_t>{2, -1}, "s").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckShape(std::vector<int64_t>{1 << 20, 1 << 20, 2}, "s").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NumElements(std::vector<int64_t>{2, 3, 4}), 24);
}

}  // namespace
}  // namespace psflow
