#include "worker/data/npy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "worker/data/file_test_fixture.h"
#include "worker/data/npy_test_files.h"

namespace psflow::data {
namespace {

using testing::Bytes;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::NpyBytes;

// A version 1.0 .npy file whose header is `header` exactly, then `data`.
std::string RawNpy(const std::string& header, const std::string& data = "") {
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes.push_back(static_cast<char>(header.size() & 0xff));
  bytes.push_back(static_cast<char>(header.size() >> 8));
  return bytes + header + data;
}

// The bytes of `a`'s elements as T, in order.
template <class T>
std::vector<T> Values(const NpyArray& a) {
  std::vector<T> out(a.data.size() / sizeof(T));
  std::memcpy(out.data(), a.data.data(), out.size() * sizeof(T));
  return out;
}

TEST(ParseNpy, ReadsEveryDtypeExactly) {
  {
    auto a = ParseNpy(NpyBytes("|b1", "(3,)", std::string("\x01\x00\x01", 3)), "b.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kBool);
    EXPECT_THAT(a->ToFloats(), ElementsAre(1.f, 0.f, 1.f));
    EXPECT_THAT(*a->ToIntegers("b"), ElementsAre(1, 0, 1));
  }
  {
    auto a = ParseNpy(NpyBytes("|i1", "(3,)", Bytes<int8_t>({-128, 0, 127})), "i1.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kInt8);
    EXPECT_THAT(*a->ToIntegers("i1"), ElementsAre(-128, 0, 127));
    EXPECT_THAT(a->ToFloats(), ElementsAre(-128.f, 0.f, 127.f));
  }
  {
    auto a = ParseNpy(NpyBytes("<i2", "(3,)", Bytes<int16_t>({-32768, 1, 32767})), "i2.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kInt16);
    EXPECT_THAT(*a->ToIntegers("i2"), ElementsAre(-32768, 1, 32767));
  }
  {
    auto a = ParseNpy(NpyBytes("<i4", "(3,)", Bytes<int32_t>({INT32_MIN, -1, 7})), "i4.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kInt32);
    EXPECT_THAT(*a->ToIntegers("i4"), ElementsAre(INT32_MIN, -1, 7));
  }
  {
    const int64_t big = (int64_t{1} << 40) + 1;
    auto a = ParseNpy(NpyBytes("<i8", "(3,)", Bytes<int64_t>({INT64_MIN, big, 3})), "i8.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kInt64);
    EXPECT_THAT(*a->ToIntegers("i8"), ElementsAre(INT64_MIN, big, 3));
    // Rounded to the nearest float: 2^40 + 1 is not a float.
    EXPECT_THAT(a->ToFloats(), ElementsAre(-9223372036854775808.f, 1099511627776.f, 3.f));
  }
  {
    auto a = ParseNpy(NpyBytes("|u1", "(3,)", Bytes<uint8_t>({0, 128, 255})), "u1.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kUint8);
    EXPECT_THAT(a->ToFloats(), ElementsAre(0.f, 128.f, 255.f));
  }
  {
    auto a = ParseNpy(NpyBytes("<u2", "(2,)", Bytes<uint16_t>({0, 65535})), "u2.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kUint16);
    EXPECT_THAT(*a->ToIntegers("u2"), ElementsAre(0, 65535));
  }
  {
    auto a = ParseNpy(NpyBytes("<u4", "(2,)", Bytes<uint32_t>({0, 4000000000u})), "u4.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kUint32);
    EXPECT_THAT(*a->ToIntegers("u4"), ElementsAre(0, 4000000000));
  }
  {
    const uint64_t big = uint64_t{1} << 62;
    auto a = ParseNpy(NpyBytes("<u8", "(2,)", Bytes<uint64_t>({5, big})), "u8.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kUint64);
    EXPECT_THAT(*a->ToIntegers("u8"), ElementsAre(5, static_cast<int64_t>(big)));
  }
  {
    // float16: 1.5, -2, 65504 (the largest), 2^-24 (the smallest subnormal), inf.
    auto a =
        ParseNpy(NpyBytes("<f2", "(5,)", Bytes<uint16_t>({0x3e00, 0xc000, 0x7bff, 0x0001, 0x7c00})),
                 "f2.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kFloat16);
    EXPECT_EQ(NpyTypeName(a->type), "float16");
    EXPECT_FALSE(NpyTypeIsInteger(a->type));
    EXPECT_THAT(a->ToFloats(), ElementsAre(1.5f, -2.f, 65504.f, std::ldexp(1.f, -24),
                                           std::numeric_limits<float>::infinity()));
    EXPECT_EQ(a->ToIntegers("f2").status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    auto a = ParseNpy(NpyBytes("<f4", "(3,)", Bytes<float>({-1.5f, 0.f, 3.25f})), "f4.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kFloat32);
    EXPECT_THAT(a->ToFloats(), ElementsAre(-1.5f, 0.f, 3.25f));
  }
  {
    auto a = ParseNpy(NpyBytes("<f8", "(3,)", Bytes<double>({0.1, -2.0, 1e300})), "f8.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->type, NpyType::kFloat64);
    EXPECT_THAT(a->ToFloats(), ElementsAre(0.1f, -2.f, std::numeric_limits<float>::infinity()));
    EXPECT_THAT(Values<double>(*a), ElementsAre(0.1, -2.0, 1e300));
  }
}

TEST(ParseNpy, NativeAndUnmarkedByteOrdersAreLittleEndian) {
  for (const char* descr : {"=i4", "|i4", "i4"}) {
    auto a = ParseNpy(NpyBytes(descr, "(2,)", Bytes<int32_t>({1, -2})), "x.npy");
    ASSERT_TRUE(a.ok()) << descr << ": " << a.status();
    EXPECT_THAT(Values<int32_t>(*a), ElementsAre(1, -2)) << descr;
  }
}

TEST(ParseNpy, SwapsBigEndianData) {
  auto i4 = ParseNpy(NpyBytes(">i4", "(2,)", std::string("\0\0\0\x01\xff\xff\xff\xfe", 8)), "x");
  ASSERT_TRUE(i4.ok()) << i4.status();
  EXPECT_THAT(Values<int32_t>(*i4), ElementsAre(1, -2));
  auto u2 = ParseNpy(NpyBytes(">u2", "(2,)", std::string("\x01\x02\xff\x00", 4)), "x");
  ASSERT_TRUE(u2.ok()) << u2.status();
  EXPECT_THAT(Values<uint16_t>(*u2), ElementsAre(0x0102, 0xff00));
  // 1.5 as a big-endian double: 3F F8 00 .. 00.
  auto f8 = ParseNpy(NpyBytes(">f8", "()", std::string("\x3f\xf8\0\0\0\0\0\0", 8)), "x");
  ASSERT_TRUE(f8.ok()) << f8.status();
  EXPECT_THAT(Values<double>(*f8), ElementsAre(1.5));
  // 1.5 as a big-endian float16: 3E 00.
  auto f2 = ParseNpy(NpyBytes(">f2", "(1,)", std::string("\x3e\x00", 2)), "x");
  ASSERT_TRUE(f2.ok()) << f2.status();
  EXPECT_THAT(f2->ToFloats(), ElementsAre(1.5f));
  auto u1 = ParseNpy(NpyBytes(">u1", "(2,)", std::string("\x01\x02", 2)), "x");
  ASSERT_TRUE(u1.ok()) << u1.status();
  EXPECT_THAT(Values<uint8_t>(*u1), ElementsAre(1, 2));
}

TEST(ParseNpy, EveryFormatVersionReadsTheSame) {
  const std::string data = Bytes<float>({1, 2, 3, 4, 5, 6});
  for (int major : {1, 2, 3}) {
    auto a = ParseNpy(NpyBytes("<f4", "(2, 3)", data, major), "x.npy");
    ASSERT_TRUE(a.ok()) << "version " << major << ": " << a.status();
    EXPECT_THAT(a->shape, ElementsAre(2, 3));
    EXPECT_EQ(a->size(), 6);
    EXPECT_EQ(a->data, data);
  }
}

TEST(ParseNpy, ReadsHandWrittenHeaders) {
  // Double quotes, keys in another order, no trailing comma, Python 2's long integers, tabs.
  auto a = ParseNpy(RawNpy("{\"shape\": (2L,\t3L), \"descr\": \"<i2\", \"fortran_order\": False}\n",
                           Bytes<int16_t>({1, 2, 3, 4, 5, 6})),
                    "x.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(2, 3));
  EXPECT_THAT(Values<int16_t>(*a), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(ParseNpy, ZeroDimensionalAndEmptyArrays) {
  auto scalar = ParseNpy(NpyBytes("<f4", "()", Bytes<float>({7.5f})), "x");
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->size(), 1);
  EXPECT_THAT(scalar->ToFloats(), ElementsAre(7.5f));
  for (const char* shape : {"(0,)", "(2, 0, 3)"}) {
    auto empty = ParseNpy(NpyBytes("<f8", shape, ""), "x");
    ASSERT_TRUE(empty.ok()) << shape << ": " << empty.status();
    EXPECT_EQ(empty->size(), 0);
    EXPECT_TRUE(empty->ToFloats().empty());
  }
}

TEST(ParseNpy, TransposesFortranOrderToCOrder) {
  // [[0, 1, 2], [3, 4, 5]] stored column by column.
  auto a = ParseNpy(NpyBytes("<i4", "(2, 3)", Bytes<int32_t>({0, 3, 1, 4, 2, 5}), 1, true), "x");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->shape, ElementsAre(2, 3));
  EXPECT_THAT(Values<int32_t>(*a), ElementsAre(0, 1, 2, 3, 4, 5));

  // Three dimensions, big-endian too: element [i][j][k] = 100i + 10j + k, stored with i fastest.
  std::string fortran;
  for (int k = 0; k < 4; ++k) {
    for (int j = 0; j < 3; ++j) {
      for (int i = 0; i < 2; ++i) {
        const int v = 100 * i + 10 * j + k;
        fortran += std::string{0, 0, static_cast<char>(v >> 8), static_cast<char>(v & 0xff)};
      }
    }
  }
  auto b = ParseNpy(NpyBytes(">i4", "(2, 3, 4)", fortran, 1, true), "x");
  ASSERT_TRUE(b.ok()) << b.status();
  std::vector<int32_t> expected;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 4; ++k) expected.push_back(100 * i + 10 * j + k);
    }
  }
  EXPECT_THAT(Values<int32_t>(*b), ElementsAreArray(expected));

  // One dimension: the same in either order.
  auto c = ParseNpy(NpyBytes("<i4", "(3,)", Bytes<int32_t>({1, 2, 3}), 1, true), "x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(Values<int32_t>(*c), ElementsAre(1, 2, 3));
}

TEST(ParseNpy, RejectsMalformedBytesAsDataLossNamingTheFileAndOffset) {
  const std::string good = NpyBytes("<f4", "(2,)", Bytes<float>({1, 2}));
  std::string bad_version = good;
  bad_version[6] = 4;
  std::string long_header = good;
  long_header[8] = '\x7f';  // the header would end past the file
  struct Case {
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"", "no \\x93NUMPY magic"},
      {"PK\x03\x04 not npy", "no \\x93NUMPY magic"},
      {good.substr(0, 9), "truncated .npy preamble"},
      {bad_version, "version 4.0 is not supported"},
      {long_header, "truncated: the header ends at byte"},
      {good.substr(0, good.size() - 1), "needs 8 data bytes, the file has 7"},
      {good + "x", "is followed by 1 unexpected byte"},
      {NpyBytes("<f4", "(2,)", ""), "needs 8 data bytes, the file has 0"},
      {NpyBytes("<f4", "(-1,)", ""), "expected a non-negative integer in 'shape'"},
      {NpyBytes("<f4", "[2]", ""), "expected a tuple as 'shape'"},
      {NpyBytes("<f4", "(4611686018427387904, 4611686018427387904)", ""), "over 2^64"},
      {NpyBytes("<f4", "(99999999999999999999,)", ""), "dimension too large"},
      {NpyBytes("<f4", "(2 3)", ""), "expected ',' or ')'"},
      {RawNpy("[1, 2] \n"), "expected '{'"},
      {RawNpy("{'descr': }"), "a dtype string"},
      {RawNpy("{'descr: 1}\n"), "unterminated string"},
      {RawNpy("{'descr': '<f4', 'x': 1}"), "unexpected key 'x'"},
      {RawNpy("{'descr': '<f4', }      \n"), "lacks 'fortran_order'"},
      {RawNpy("{'descr': '<f4', 'descr': '<f4'}"), "key 'descr' appears twice"},
      {RawNpy("{'fortran_order': Maybe}     \n"), "expected True or False"},
      {RawNpy("{'descr': '<f4' 'shape': ()}"), "expected ',' or '}'"},
      {RawNpy("{}x"), "unexpected text after"},
  };
  for (const Case& c : cases) {
    auto a = ParseNpy(c.bytes, "dir/bad.npy");
    ASSERT_FALSE(a.ok()) << c.message;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr("dir/bad.npy: ")) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr(c.message)) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr("(at byte ")) << a.status();
  }
}

TEST(ParseNpy, RejectsDtypesItDoesNotReadAsInvalidArgument) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"|O", "object arrays"},  {"<c8", "not supported"},    {"<U5", "not supported"},
      {"|S3", "not supported"}, {"<M8[s]", "not supported"}, {"<i3", "not supported"},
      {"", "not supported"},
  };
  for (const auto& [descr, message] : cases) {
    auto a = ParseNpy(NpyBytes(descr, "(1,)", "12345678"), "x.npy");
    ASSERT_FALSE(a.ok()) << descr;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr("x.npy: dtype '" + descr + "'")) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr(message)) << a.status();
  }
  auto a = ParseNpy(RawNpy("{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, "
                           "'shape': (1,), }\n",
                           "12345678"),
                    "s.npy");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("s.npy: structured dtypes"));
}

TEST(NpyArray, ToIntegersRejectsWhatIsNotAWholeNumber) {
  auto half = ParseNpy(NpyBytes("<f4", "(3,)", Bytes<float>({2.f, 1.5f, 3.f})), "y.npy");
  ASSERT_TRUE(half.ok()) << half.status();
  auto ints = half->ToIntegers("y.npy");
  ASSERT_FALSE(ints.ok());
  EXPECT_EQ(ints.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ints.status().message(), HasSubstr("y.npy: element 1 is 1.5, not an integer"));

  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (double v : {nan, 1e19, -1e19, std::numeric_limits<double>::infinity()}) {
    auto a = ParseNpy(NpyBytes("<f8", "(1,)", Bytes<double>({v})), "y.npy");
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->ToIntegers("y.npy").status().code(), absl::StatusCode::kInvalidArgument) << v;
  }
  auto whole = ParseNpy(NpyBytes("<f8", "(3,)", Bytes<double>({0, -4, 9007199254740992.0})), "y");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_THAT(*whole->ToIntegers("y"), ElementsAre(0, -4, 9007199254740992));

  auto huge = ParseNpy(NpyBytes("<u8", "(1,)", Bytes<uint64_t>({uint64_t{1} << 63})), "y.npy");
  ASSERT_TRUE(huge.ok()) << huge.status();
  EXPECT_THAT(huge->ToIntegers("y.npy").status().message(), HasSubstr("beyond int64's range"));
}

TEST(ParseOwnedNpy, MovesTheDataIn) {
  auto a = ParseOwnedNpy(NpyBytes("<i2", "(2,)", Bytes<int16_t>({-3, 4})), "x.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(Values<int16_t>(*a), ElementsAre(-3, 4));
  EXPECT_FALSE(ParseOwnedNpy("junk", "x.npy").ok());
}

class ReadNpyTest : public testing::FileTest {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    return WriteFile(name, bytes);
  }
};

TEST_F(ReadNpyTest, ReadsAFileAsParseNpyReadsItsBytes) {
  for (int major : {1, 2, 3}) {
    const std::string bytes = NpyBytes(">f4", "(3, 2)",
                                       std::string("\x3f\x80\0\0\x40\0\0\0\x40\x40\0\0"
                                                   "\x40\x80\0\0\x40\xa0\0\0\x40\xc0\0\0",
                                                   24),
                                       major, true);
    auto a = ReadNpy(Write("x.npy", bytes));
    ASSERT_TRUE(a.ok()) << a.status();
    auto b = ParseNpy(bytes, "x.npy");
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_EQ(a->shape, b->shape);
    EXPECT_EQ(a->data, b->data);
    // Fortran order [[1, 4], [2, 5], [3, 6]]... read back row by row.
    EXPECT_THAT(a->ToFloats(), ElementsAre(1, 4, 2, 5, 3, 6));
  }
}

TEST_F(ReadNpyTest, MissingFileIsNotFoundNamingIt) {
  const std::string path = (dir_ / "absent.npy").string();
  auto a = ReadNpy(path);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(a.status().message(), HasSubstr(path + ": no such file"));
  auto d = ReadNpy(dir_.string());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(d.status().message(), HasSubstr("not a regular file"));
}

TEST_F(ReadNpyTest, CorruptFilesAreDataLossNamingThem) {
  const std::string good = NpyBytes("<f8", "(4,)", Bytes<double>({1, 2, 3, 4}));
  for (const std::string& bytes :
       {std::string(), good.substr(0, 5), good.substr(0, 70), good.substr(0, good.size() - 3),
        good + "\n", NpyBytes("<f8", "(1000000000000, 1000000000000)", "tiny")}) {
    const std::string path = Write("bad.npy", bytes);
    auto a = ReadNpy(path);
    ASSERT_FALSE(a.ok()) << bytes.size();
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr(path + ": ")) << a.status();
  }
}

}  // namespace
}  // namespace psflow::data
