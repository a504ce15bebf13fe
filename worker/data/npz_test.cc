#include "worker/data/npz.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "worker/data/file_test_fixture.h"
#include "worker/data/npy_test_files.h"

namespace psflow::data {
namespace {

using testing::Bytes;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::NpyBytes;
using testing::ZipBytes;
using testing::ZipLayout;
using testing::ZipMember;

const std::string& XNpy() {
  static const std::string* x =
      new std::string(NpyBytes("<f4", "(2, 2)", Bytes<float>({0.5f, -1.f, 2.f, 1e-3f})));
  return *x;
}
const std::string& YNpy() {
  static const std::string* y = new std::string(NpyBytes("<i8", "(2,)", Bytes<int64_t>({1, 0})));
  return *y;
}

class NpzTest : public testing::FileTest {
 protected:
  std::string Write(const std::string& bytes, const std::string& name = "data.npz") {
    return WriteFile(name, bytes);
  }

  // Reads x and y from `archive`, expecting XNpy's and YNpy's arrays.
  void ExpectXAndY(const std::string& archive, const std::string& label) {
    const std::string path = Write(archive);
    auto names = ListNpzMembers(path);
    ASSERT_TRUE(names.ok()) << label << ": " << names.status();
    EXPECT_THAT(*names, ElementsAre("x", "y")) << label;
    auto x = ReadNpzMember(path, "x");
    ASSERT_TRUE(x.ok()) << label << ": " << x.status();
    EXPECT_THAT(x->shape, ElementsAre(2, 2)) << label;
    EXPECT_THAT(x->ToFloats(), ElementsAre(0.5f, -1.f, 2.f, 1e-3f)) << label;
    auto y = ReadNpzMember(path, "y.npy");  // the member's full name works too
    ASSERT_TRUE(y.ok()) << label << ": " << y.status();
    EXPECT_EQ(y->type, NpyType::kInt64);
    EXPECT_THAT(*y->ToIntegers("y"), ElementsAre(1, 0)) << label;
  }
};

TEST_F(NpzTest, ReadsStoredAndDeflatedMembersInEveryZipLayout) {
  for (bool deflate : {false, true}) {
    for (bool zip64_local : {false, true}) {
      for (bool zip64_central : {false, true}) {
        for (bool zip64_end : {false, true}) {
          for (const std::string comment : {"", "a comment PK\x05\x06 that looks like a record"}) {
            const std::string label =
                absl::StrCat("deflate ", deflate, " zip64 local ", zip64_local, " central ",
                             zip64_central, " end ", zip64_end, " comment ", comment.size());
            ExpectXAndY(ZipBytes({{"x.npy", XNpy(), deflate}, {"y.npy", YNpy(), deflate}},
                                 ZipLayout{zip64_local, zip64_central, zip64_end, comment}),
                        label);
          }
        }
      }
    }
  }
}

TEST_F(NpzTest, ReadsAMemberNamedWithoutNpy) {
  const std::string path = Write(ZipBytes({{"weights", YNpy()}}));
  auto a = ReadNpzMember(path, "weights");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(*a->ToIntegers("w"), ElementsAre(1, 0));
}

TEST_F(NpzTest, ReadsALargeDeflatedMember) {
  // Inflates to much more than its compressed size: the output buffer grows several times.
  std::vector<float> values(300000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 1000);
  const std::string path =
      Write(ZipBytes({{"big.npy", NpyBytes("<f4", "(300000,)", Bytes<float>(values)), true}}));
  auto a = ReadNpzMember(path, "big");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->ToFloats(), values);
}

TEST_F(NpzTest, MissingArchiveOrMemberIsNotFound) {
  const std::string absent = (dir_ / "absent.npz").string();
  EXPECT_EQ(ReadNpzMember(absent, "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ListNpzMembers(absent).status().message(), HasSubstr(absent));

  const std::string path = Write(ZipBytes({{"x.npy", XNpy()}, {"y.npy", YNpy()}}));
  auto a = ReadNpzMember(path, "x_train");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(a.status().message(),
              HasSubstr(path + ": no array 'x_train' in the archive (it holds x, y)"));
  auto empty = ReadNpzMember(Write(ZipBytes({}), "empty.npz"), "x");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(empty.status().message(), HasSubstr("(it holds none)"));
}

// Replaces the 4 bytes at `at` with `value`, little-endian.
std::string Patch32(std::string bytes, size_t at, uint32_t value) {
  std::memcpy(&bytes[at], &value, 4);
  return bytes;
}

TEST_F(NpzTest, CorruptArchivesAreDataLossNamingTheFile) {
  const std::string stored = ZipBytes({{"x.npy", XNpy()}}, ZipLayout{false, false, false, ""});
  const std::string deflated =
      ZipBytes({{"x.npy", XNpy(), true}}, ZipLayout{false, false, false, ""});
  const size_t cd = stored.size() - 22 - 46 - 5;  // where the central directory begins
  const size_t data_at = 30 + 5;                  // the stored member's data
  std::string flipped = stored;
  flipped[data_at + XNpy().size() - 1] ^= 1;  // a data byte: the CRC no longer matches
  std::string bad_deflate = deflated;
  bad_deflate[data_at] = '\xff';  // reserved block type 3
  std::string bad_local = stored;
  bad_local[0] = 'Q';
  std::string renamed_local = stored;
  renamed_local[30] = 'z';  // the local header names "z.npy"
  struct Case {
    std::string name;
    std::string bytes;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"empty", "", "too short for an end-of-central-directory record"},
      {"truncated", stored.substr(0, stored.size() / 2), "no end-of-central-directory record"},
      {"cut end record", stored.substr(0, stored.size() - 1), "no end-of-central-directory"},
      {"npy, not npz", XNpy(), "a .npy file, not an .npz archive"},
      {"crc", flipped, "CRC-32 mismatch"},
      {"deflate", bad_deflate, "corrupt deflate stream"},
      {"deflate truncated",
       Patch32(deflated, deflated.size() - 22 - 46 - 5 + 20, 10),  // compressed size 10
       "truncated deflate stream"},
      {"inflates to more", Patch32(deflated, deflated.size() - 22 - 46 - 5 + 24, 100),
       "inflates to more than the 100 bytes"},
      {"inflates to less", Patch32(deflated, deflated.size() - 22 - 46 - 5 + 24, 1 << 30),
       absl::StrCat("inflates to ", XNpy().size(), " bytes, its entry states 1073741824")},
      {"stored sizes differ", Patch32(stored, cd + 24, 7), "stored member's sizes differ"},
      {"member runs into the directory", Patch32(Patch32(stored, cd + 20, 4000), cd + 24, 4000),
       "run into the central directory"},
      {"local header", bad_local, "no local file header"},
      {"local name", renamed_local, "local header names 'z.npy'"},
      {"local offset", Patch32(stored, cd + 42, 1000), "local header lies outside"},
      {"directory offset", Patch32(stored, stored.size() - 6, 3), "does not end where"},
      {"directory entry", Patch32(stored, cd, 0), "central directory entry 0 of 1 is missing"},
      {"entry count", Patch32(stored, stored.size() - 14, 2 | (2 << 16)),
       "central directory entry 1 of 2 is missing"},
      {"zip64 extra missing", Patch32(stored, cd + 24, 0xFFFFFFFF),
       "needs a ZIP64 extra field and has none"},
      {"bad npy member", ZipBytes({{"x.npy", "not an npy"}}), "no \\x93NUMPY magic"},
  };
  for (const Case& c : cases) {
    const std::string path = Write(c.bytes, "bad.npz");
    auto a = ReadNpzMember(path, "x");
    ASSERT_FALSE(a.ok()) << c.name;
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << c.name << ": " << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr(path)) << c.name;
    EXPECT_THAT(a.status().message(), HasSubstr(c.message)) << c.name << ": " << a.status();
  }
}

TEST_F(NpzTest, ErrorsInsideAMemberNameIt) {
  const std::string path = Write(ZipBytes({{"x.npy", XNpy().substr(0, XNpy().size() - 1)}}));
  auto a = ReadNpzMember(path, "x");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(a.status().message(), HasSubstr(path + ":x.npy: truncated"));
}

TEST_F(NpzTest, SmallArchivesClaimingHugeMembersAreRejectedCheaply) {
  // A ZIP64 extra field claiming an exabyte: the stored size disagrees, the deflated member
  // inflates to its real size, and neither allocates what it claims.
  const std::string stored = ZipBytes({{"x.npy", XNpy()}}, ZipLayout{false, true, false, ""});
  const std::string deflated =
      ZipBytes({{"x.npy", XNpy(), true}}, ZipLayout{false, true, false, ""});
  const size_t extra = stored.size() - 22 - 24;  // the uncompressed size in the ZIP64 field
  for (const std::string& bytes : {Patch32(stored, extra + 4, 0x10000000),
                                   Patch32(deflated, deflated.size() - 22 - 24 + 4, 0x10000000)}) {
    auto a = ReadNpzMember(Write(bytes), "x");
    EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
  }
}

TEST_F(NpzTest, UnsupportedArchivesAreInvalidArgument) {
  const std::string stored = ZipBytes({{"x.npy", XNpy()}}, ZipLayout{false, false, false, ""});
  const size_t cd = stored.size() - 22 - 46 - 5;
  std::string bzip2 = stored;
  bzip2[cd + 10] = 12;
  std::string encrypted = stored;
  encrypted[cd + 8] = 1;
  std::string split = stored;
  split[stored.size() - 18] = 1;  // the end record's disk number
  for (const auto& [bytes, message] : std::vector<std::pair<std::string, std::string>>{
           {bzip2, "compression method 12 is not supported"},
           {encrypted, "encrypted"},
           {split, "split over several disks"},
           {ZipBytes({{"x.npy", NpyBytes("|O", "(1,)", "")}}), "object arrays"}}) {
    auto a = ReadNpzMember(Write(bytes), "x");
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument) << a.status();
    EXPECT_THAT(a.status().message(), HasSubstr(message)) << a.status();
  }
}

}  // namespace
}  // namespace psflow::data
