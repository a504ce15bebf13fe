#include "core/wire.h"

#include <gtest/gtest.h>

#include <cstring>

namespace psflow {
namespace {

TEST(Wire, Float32RoundTripsBitExact) {
  const std::vector<float> values = {1.0f, -2.5f, 3.25e-8f, 0.0f, -0.0f, 1e30f};
  const std::vector<int64_t> shape = {2, 3};
  proto::TensorProto t;
  EncodeFloat32(values, shape, &t);
  EXPECT_EQ(t.dtype(), proto::DT_FLOAT32);
  EXPECT_EQ(t.data().size(), 24u);
  // Little-endian IEEE-754: 1.0f is 00 00 80 3f.
  EXPECT_EQ(t.data().substr(0, 4), std::string("\x00\x00\x80\x3f", 4));
  std::vector<float> out(6);
  ASSERT_TRUE(DecodeFloat32(t, shape, out, "v").ok());
  EXPECT_EQ(std::memcmp(out.data(), values.data(), 24), 0);
}

TEST(Wire, DecodeRejectsMismatches) {
  proto::TensorProto t;
  const std::vector<float> values(6, 1.0f);
  EncodeFloat32(values, std::vector<int64_t>{2, 3}, &t);
  std::vector<float> out(6);
  auto bad_shape = DecodeFloat32(t, std::vector<int64_t>{3, 2}, out, "layer0/w");
  EXPECT_EQ(bad_shape.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad_shape.message().find("layer0/w"), std::string::npos);
  t.mutable_data()->pop_back();
  EXPECT_FALSE(DecodeFloat32(t, std::vector<int64_t>{2, 3}, out, "v").ok());
  t.set_dtype(proto::DT_INT32);
  EXPECT_FALSE(DecodeFloat32(t, std::vector<int64_t>{2, 3}, out, "v").ok());
}

TEST(Wire, NumElements) {
  EXPECT_EQ(NumElements(std::vector<int64_t>{}), 1);
  EXPECT_EQ(NumElements(std::vector<int64_t>{784, 100}), 78400);
}

}  // namespace
}  // namespace psflow
