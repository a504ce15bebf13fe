#include "core/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/read_file.h"

namespace psflow {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// The message as a std::string, which gmock prints readably.
std::string Message(const absl::Status& status) { return std::string(status.message()); }

// --- Bytes -----------------------------------------------------------------------------------

std::string Le64(uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

// Float32 values as the format stores them (little-endian, as this host).
std::string F32Bytes(const std::vector<float>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

// A file: the header's length, the header (as given: no padding added), the data.
std::string File(const std::string& header, const std::string& data) {
  return Le64(header.size()) + header + data;
}

std::vector<uint32_t> Bits(const std::vector<float>& values) {
  std::vector<uint32_t> bits;
  for (float v : values) bits.push_back(std::bit_cast<uint32_t>(v));
  return bits;
}

// --- Files -----------------------------------------------------------------------------------

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/safetensors_test.XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    dir_ = templ;
  }
  void TearDown() override {
    std::error_code ignored;
    fs::permissions(dir_, fs::perms::owner_all, ignored);
    fs::remove_all(dir_, ignored);
  }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string WriteBytes(const std::string& name, const std::string& bytes) const {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  static std::string ReadBytes(const std::string& path) {
    absl::StatusOr<std::string> bytes = ReadFile(path);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return bytes.value_or("");
  }

  // The entries of `dir` (or of the test's folder).
  std::vector<std::string> Entries(const std::string& dir = "") const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.empty() ? dir_ : dir)) {
      names.push_back(e.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

// Tensors of every kind: a scalar, a matrix, an empty tensor, special values (compared by bits).
std::vector<SafetensorsTensor> SomeTensors() {
  return {
      {"dense/kernel", {2, 3}, {1.0f, -2.5f, 0.1f, 1e-45f, -0.0f, 3e38f}},
      {"bias", {}, {0.5f}},
      {"empty", {0, 3}, {}},
      {"special",
       {3},
       {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
        std::bit_cast<float>(0x7fc00123u)}},
      {"caf\xc3\xa9", {1}, {42.0f}},
  };
}

// The tensors sorted by name, as a file written from them holds them.
std::vector<SafetensorsTensor> SortedByName(std::vector<SafetensorsTensor> tensors) {
  std::sort(tensors.begin(), tensors.end(),
            [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.name < b.name; });
  return tensors;
}

void ExpectSameTensors(const std::vector<SafetensorsTensor>& actual,
                       const std::vector<SafetensorsTensor>& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_EQ(actual[i].name, expected[i].name) << "tensor " << i;
    EXPECT_EQ(actual[i].shape, expected[i].shape) << expected[i].name;
    EXPECT_EQ(Bits(actual[i].values), Bits(expected[i].values)) << expected[i].name;
  }
}

// --- Round trip and the exact bytes ----------------------------------------------------------

TEST_F(SafetensorsTest, WhatIsWrittenReadsBackExactlySortedByName) {
  const std::string path = Path("model.safetensors");
  const std::map<std::string, std::string> metadata = {{"global_step", "1200"}, {"format", "pt"}};
  ASSERT_TRUE(WriteSafetensors(path, SomeTensors(), metadata).ok());
  EXPECT_THAT(Entries(), ElementsAre("model.safetensors"));  // no temporary file left

  const absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ExpectSameTensors(file->tensors, SortedByName(SomeTensors()));
  EXPECT_EQ(file->metadata, metadata);

  // The same bytes as SerializeSafetensors, and the same again for the tensors in another order.
  const absl::StatusOr<std::string> bytes = SerializeSafetensors(SomeTensors(), metadata);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(ReadBytes(path), *bytes);
  std::vector<SafetensorsTensor> reversed = SomeTensors();
  std::reverse(reversed.begin(), reversed.end());
  EXPECT_EQ(SerializeSafetensors(reversed, metadata).value(), *bytes);

  const absl::StatusOr<SafetensorsFile> parsed = ParseSafetensors(*bytes, "in memory");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ExpectSameTensors(parsed->tensors, SortedByName(SomeTensors()));
  EXPECT_EQ(parsed->metadata, metadata);
}

TEST_F(SafetensorsTest, NoTensorsAndNoMetadata) {
  const std::string path = Path("none.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {}, {}).ok());
  // "{}" padded to 8 bytes: the reference writer's bytes for an empty set.
  EXPECT_EQ(ReadBytes(path), Le64(8) + "{}      ");
  const absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_THAT(file->tensors, IsEmpty());
  EXPECT_THAT(file->metadata, IsEmpty());
}

TEST_F(SafetensorsTest, WriterBytesAreTheHandComputedOnes) {
  const std::vector<SafetensorsTensor> tensors = {{"w", {2}, {1.0f, -2.0f}}, {"b", {}, {0.5f}}};
  const absl::StatusOr<std::string> bytes = SerializeSafetensors(tensors, {{"step", "7"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  // 135 bytes of JSON, "b" (sorted first) at [0, 4), "w" at [4, 12), one space to 136 = 17 x 8.
  const std::string header = R"({"__metadata__":{"step":"7"},)"
                             R"("b":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                             R"("w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}} )";
  ASSERT_EQ(header.size(), 136u);
  const std::string expected = std::string("\x88\0\0\0\0\0\0\0", 8) + header +
                               std::string("\x00\x00\x00\x3f", 4) +  // 0.5
                               std::string("\x00\x00\x80\x3f", 4) +  // 1.0
                               std::string("\x00\x00\x00\xc0", 4);   // -2.0
  EXPECT_EQ(*bytes, expected);
}

TEST_F(SafetensorsTest, WriterMatchesTheReferenceImplementationsExamples) {
  // The safetensors crate's own serialization tests: a 64-byte header needing no padding, and a
  // 65-byte one padded with 7 spaces so that the data starts 8-byte aligned.
  const std::vector<float> values = {0, 1, 2, 3, 4, 5};
  EXPECT_EQ(SerializeSafetensors({{"attn.0", {1, 2, 3}, values}}, {}).value(),
            File(R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})",
                 F32Bytes(values)));
  EXPECT_EQ(SerializeSafetensors({{"attn0", {1, 1, 2, 3}, values}}, {}).value(),
            File(R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       )",
                 F32Bytes(values)));
  EXPECT_EQ(SerializeSafetensors({}, {{"framework", "pt"}}).value(),
            File(R"({"__metadata__":{"framework":"pt"}}     )", ""));
}

TEST_F(SafetensorsTest, ReadsAFileBuiltByHandFromTheSpecification) {
  // Keys in any order, metadata last, spaces and newlines in the JSON, tensors not in name order
  // in the data, trailing padding.
  const std::string header =
      "{\n"
      "  \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},\n"
      "  \"a\": {\"shape\": [1, 2], \"data_offsets\": [8, 16], \"dtype\": \"F32\"},\n"
      "  \"__metadata__\": {\"format\": \"pt\", \"note\": \"hand made\"}\n"
      "}   ";
  const std::string data = std::string("\x00\x00\x80\x3f", 4) +  // b: 1.0
                           std::string("\x00\x00\x20\xc0", 4) +  // b: -2.5
                           std::string("\x00\x00\x00\x3f", 4) +  // a: 0.5
                           std::string("\x00\x00\x40\x40", 4);   // a: 3.0
  const std::string path = WriteBytes("hand.safetensors", File(header, data));
  const absl::StatusOr<SafetensorsFile> file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ExpectSameTensors(file->tensors, {{"b", {2}, {1.0f, -2.5f}}, {"a", {1, 2}, {0.5f, 3.0f}}});
  EXPECT_EQ(file->metadata,
            (std::map<std::string, std::string>{{"format", "pt"}, {"note", "hand made"}}));
}

TEST_F(SafetensorsTest, OtherFloatDtypesAreConvertedExactly) {
  // F16: 1.0 (3c00), -2.0 (c000), the smallest subnormal 2^-24 (0001), 65504 (7bff), -inf (fc00).
  // BF16: 1.0 (3f80), -3.0 (c040). F64: 0.1 (rounded to float32), 1e300 (beyond float32: inf).
  const std::string f16 = std::string("\x00\x3c\x00\xc0\x01\x00\xff\x7b\x00\xfc", 10);
  const std::string bf16 = std::string("\x80\x3f\x40\xc0", 4);
  const double f64[] = {0.1, 1e300};
  const std::string f64_bytes(reinterpret_cast<const char*>(f64), sizeof(f64));
  const std::string header = R"({"h":{"dtype":"F16","shape":[5],"data_offsets":[0,10]},)"
                             R"("bf":{"dtype":"BF16","shape":[2],"data_offsets":[10,14]},)"
                             R"("d":{"dtype":"F64","shape":[2],"data_offsets":[14,30]}})";
  const absl::StatusOr<SafetensorsFile> file =
      ParseSafetensors(File(header, f16 + bf16 + f64_bytes), "mixed");
  ASSERT_TRUE(file.ok()) << file.status();
  ExpectSameTensors(
      file->tensors,
      {{"h", {5}, {1.0f, -2.0f, 0x1p-24f, 65504.0f, -std::numeric_limits<float>::infinity()}},
       {"bf", {2}, {1.0f, -3.0f}},
       {"d", {2}, {0.1f, std::numeric_limits<float>::infinity()}}});
}

TEST_F(SafetensorsTest, AWellFormedFileOfAnotherDtypeIsUnimplemented) {
  const std::string path = WriteBytes(
      "ints.safetensors",
      File(R"({"n":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})", std::string(4, '\1')));
  const absl::Status status = ReadSafetensors(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnimplemented) << status;
  EXPECT_THAT(Message(status), HasSubstr(path));
  EXPECT_THAT(Message(status), HasSubstr("'n' has the dtype I32"));
}

// --- Malformed files ---------------------------------------------------------------------------

struct Malformed {
  std::string name;
  std::string bytes;
  std::string says;  // a part of the message
};

std::vector<Malformed> MalformedFiles() {
  const std::string f8 = F32Bytes({1, 2});
  const auto entry = [](const std::string& name, const std::string& shape, uint64_t begin,
                        uint64_t end) {
    return absl::StrFormat(R"("%s":{"dtype":"F32","shape":[%s],"data_offsets":[%d,%d]})", name,
                           shape, begin, end);
  };
  const std::string a8 = entry("a", "2", 0, 8);
  return {
      {"empty file", "", "fewer than the 8 of the header length"},
      {"truncated header length", std::string("\x10\0\0\0\0", 5),
       "fewer than the 8 of the header length"},
      {"header length larger than the file", Le64(1000) + "{}", "only 2 follow the length"},
      {"header length over the limit", Le64(100'000'001) + "{}", "over the limit of 100000000"},
      {"header length is huge", Le64(~uint64_t{0}) + "{}", "over the limit"},
      {"header not JSON", File(R"({"a":)", ""), "not valid JSON"},
      {"header not JSON after a valid start", File("{\"a\":{\"dtype\":\"F32\",,}}", ""),
       "not valid JSON (at byte 28 of the file)"},
      {"garbage after the object", File("{} x", ""), "not valid JSON"},
      {"NUL padding", File(std::string("{}\0\0", 4), ""), "not valid JSON"},
      {"header not an object", File("[1,2]", ""), "does not start with '{'"},
      {"header starting with a space", File(" {}", ""), "does not start with '{'"},
      {"empty header", File("", ""), "does not start with '{'"},
      {"tensor entry not an object", File(R"({"a":[1]})", ""),
       "found an array in tensor 'a': its entry must be an object"},
      {"nested object", File(R"({"a":{"dtype":{}}})", ""),
       "found an object in tensor 'a' field dtype"},
      {"bad dtype", File(R"({"a":{"dtype":"F31","shape":[2],"data_offsets":[0,8]}})", f8),
       "unknown dtype 'F31'"},
      {"NUL inside the JSON", File(std::string("{}\0 x", 5), ""), "a NUL byte at byte 10"},
      {"dtype not a string", File(R"({"a":{"dtype":4,"shape":[],"data_offsets":[0,4]}})", ""),
       "tensor 'a' field dtype"},
      {"shape and offsets disagree", File("{" + entry("a", "3", 0, 8) + "}", f8),
       "(8 bytes), but F32 x shape [3] is 12 bytes"},
      {"negative dimension", File("{" + entry("a", "-2", 0, 8) + "}", f8), "negative number -2"},
      {"fractional dimension", File("{" + entry("a", "2.0", 0, 8) + "}", f8), "the number 2.0"},
      {"dimension over int64", File("{" + entry("a", "9223372036854775808", 0, 8) + "}", f8),
       "over 2^63 - 1"},
      {"element count overflows", File("{" + entry("a", "4294967296,4294967296", 0, 8) + "}", f8),
       "overflows 64 bits"},
      {"byte count overflows", File("{" + entry("a", "4611686018427387904", 0, 8) + "}", f8),
       "byte count overflows"},
      {"end before begin", File("{" + entry("a", "0", 8, 0) + "}", f8), "end is before the begin"},
      {"overlapping offsets",
       File("{" + entry("a", "2", 0, 8) + "," + entry("b", "2", 4, 12) + "}", F32Bytes({1, 2, 3})),
       "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a'"},
      {"hole",
       File("{" + entry("a", "1", 0, 4) + "," + entry("b", "1", 8, 12) + "}", F32Bytes({1, 2, 3})),
       "data bytes [4, 8) (file offset"},
      {"data past the end", File("{" + a8 + "}", F32Bytes({1})), "past the end of the data buffer"},
      {"bytes after the last tensor", File("{" + a8 + "}", F32Bytes({1, 2, 3})),
       "data bytes [8, 12)"},
      {"not starting at 0", File("{" + entry("a", "1", 4, 8) + "}", f8), "data bytes [0, 4)"},
      {"duplicate name", File("{" + a8 + "," + a8 + "}", f8), "duplicate key 'a'"},
      {"duplicate metadata", File(R"({"__metadata__":{},"__metadata__":{}})", ""),
       "duplicate key '__metadata__'"},
      {"duplicate metadata key", File(R"({"__metadata__":{"k":"1","k":"2"}})", ""),
       "duplicate key 'k' in __metadata__"},
      {"duplicate field",
       File(R"({"a":{"dtype":"F32","dtype":"F32","shape":[],"data_offsets":[0,4]}})",
            F32Bytes({1})),
       "has the field 'dtype' twice"},
      {"unknown field",
       File(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4],"x":1}})", F32Bytes({1})),
       "unknown field 'x'"},
      {"missing field", File(R"({"a":{"dtype":"F32","shape":[]}})", ""), "lacks a field"},
      {"three offsets", File(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4,4]}})", ""),
       "more than two data_offsets"},
      {"one offset", File(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0]}})", ""),
       "has 1 data_offsets"},
      {"metadata not an object", File(R"({"__metadata__":"pt"})", ""),
       "__metadata__: it must be an object"},
      {"metadata value not a string", File(R"({"__metadata__":{"step":7}})", ""),
       "__metadata__ key 'step': values must be strings"},
      {"name not UTF-8", File("{\"\xff\":1}", ""), "not valid JSON"},
  };
}

TEST_F(SafetensorsTest, EveryMalformedFileIsDataLossNamingTheFile) {
  int i = 0;
  for (const Malformed& m : MalformedFiles()) {
    SCOPED_TRACE(m.name);
    const std::string path = WriteBytes(absl::StrCat("bad-", i++, ".safetensors"), m.bytes);
    const absl::Status status = ReadSafetensors(path).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_THAT(Message(status), HasSubstr(path + ": "));
    EXPECT_THAT(Message(status), HasSubstr(m.says));
    EXPECT_EQ(status.message().find('\n'), absl::string_view::npos) << "one line: " << status;
    // The same verdict from memory.
    const absl::Status parsed = ParseSafetensors(m.bytes, "the bytes").status();
    EXPECT_EQ(parsed.code(), absl::StatusCode::kDataLoss) << parsed;
    EXPECT_THAT(Message(parsed), HasSubstr("the bytes: "));
  }
}

TEST_F(SafetensorsTest, MissingFileIsNotFoundAndAFolderIsDataLoss) {
  const absl::Status missing = ReadSafetensors(Path("none.safetensors")).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(Message(missing), HasSubstr(Path("none.safetensors")));
  const absl::Status folder = ReadSafetensors(dir_).status();
  EXPECT_EQ(folder.code(), absl::StatusCode::kDataLoss) << folder;
  EXPECT_THAT(Message(folder), HasSubstr("not a regular file"));
}

// --- Writer errors -------------------------------------------------------------------------------

TEST_F(SafetensorsTest, InvalidTensorsAreRejectedBeforeAnythingIsWritten) {
  const std::string path = Path("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {{"old", {1}, {7.0f}}}, {}).ok());
  const std::string before = ReadBytes(path);
  const struct {
    std::string why;
    std::vector<SafetensorsTensor> tensors;
    std::map<std::string, std::string> metadata;
    std::string says;
  } cases[] = {
      {"empty name", {{"", {1}, {1.0f}}}, {}, "empty name"},
      {"duplicate", {{"a", {1}, {1.0f}}, {"a", {1}, {2.0f}}}, {}, "two tensors are named 'a'"},
      {"reserved", {{"__metadata__", {1}, {1.0f}}}, {}, "__metadata__"},
      {"negative dimension", {{"a", {-1}, {}}}, {}, "negative dimension"},
      {"too few values", {{"a", {2, 2}, {1, 2, 3}}}, {}, "3 values, which does not match"},
      {"too many values", {{"a", {0, 2}, {1}}}, {}, "1 values, which does not match"},
      {"overflowing shape", {{"a", {1ll << 32, 1ll << 32}, {}}}, {}, "0 values"},
      {"name not UTF-8", {{"a\xff", {1}, {1.0f}}}, {}, "not valid UTF-8"},
      {"metadata not UTF-8", {}, {{"k", "\xc3"}}, "metadata entry 'k' is not valid UTF-8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.why);
    const absl::Status status = WriteSafetensors(path, c.tensors, c.metadata);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(Message(status), HasSubstr(path));
    EXPECT_THAT(Message(status), HasSubstr(c.says));
    EXPECT_EQ(SerializeSafetensors(c.tensors, c.metadata).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(ReadBytes(path), before);
  EXPECT_THAT(Entries(), ElementsAre("model.safetensors"));
}

TEST_F(SafetensorsTest, WriteIntoAMissingFolderFailsLeavingNothing) {
  const std::string path = Path("missing/model.safetensors");
  const absl::Status status = WriteSafetensors(path, SomeTensors(), {});
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_THAT(Message(status), HasSubstr(Path("missing/")));
  EXPECT_THAT(Entries(), IsEmpty());
}

TEST_F(SafetensorsTest, FailedRenameRemovesTheTemporaryFileAndKeepsWhatWasThere) {
  // The path is a folder with a file in it: everything is written, then rename(2) refuses.
  const std::string path = Path("model.safetensors");
  fs::create_directory(path);
  WriteBytes("model.safetensors/keep", "x");
  const absl::Status status = WriteSafetensors(path, SomeTensors(), {});
  EXPECT_FALSE(status.ok());
  EXPECT_THAT(Message(status), HasSubstr("rename"));
  EXPECT_THAT(Message(status), HasSubstr(path));
  EXPECT_THAT(Entries(), ElementsAre("model.safetensors"));
  EXPECT_THAT(Entries(path), ElementsAre("keep"));
}

TEST_F(SafetensorsTest, WriteIntoAReadOnlyFolderFailsLeavingNothing) {
  const std::string folder = Path("read-only");
  fs::create_directory(folder);
  const std::string path = folder + "/model.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {{"old", {1}, {7.0f}}}, {}).ok());
  const std::string before = ReadBytes(path);
  fs::permissions(folder, fs::perms::owner_read | fs::perms::owner_exec);
  if (::access(folder.c_str(), W_OK) == 0) {
    GTEST_SKIP() << "this user (root?) may write into a folder without write permission";
  }
  const absl::Status status = WriteSafetensors(path, SomeTensors(), {});
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_THAT(Message(status), HasSubstr(folder));
  EXPECT_EQ(ReadBytes(path), before);
  EXPECT_THAT(Entries(folder), ElementsAre("model.safetensors"));
}

// --- Other readers -------------------------------------------------------------------------------

struct ShellRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

// Runs `command` with /bin/sh.
ShellRun Shell(const std::string& command) {
  ShellRun run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, n);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

constexpr char kPython[] = "/usr/bin/python3";

bool PythonHas(const std::string& modules) {
  return ::access(kPython, X_OK) == 0 &&
         Shell(absl::StrCat(kPython, " -c 'import ", modules, "'")).exit_code == 0;
}

// What the Python scripts below print for `tensors` (sorted by name) and `metadata`: per tensor
// its name, dtype, shape and values as float32 bit patterns in hex, then the metadata.
std::string ExpectedListing(const std::vector<SafetensorsTensor>& tensors,
                            const std::map<std::string, std::string>& metadata) {
  std::string out;
  for (const SafetensorsTensor& t : SortedByName(tensors)) {
    std::vector<std::string> hex;
    for (uint32_t b : Bits(t.values)) hex.push_back(absl::StrFormat("%08x", b));
    absl::StrAppend(&out, "tensor ", t.name, " F32 [", absl::StrJoin(t.shape, ", "), "] ",
                    absl::StrJoin(hex, " "), "\n");
  }
  for (const auto& [key, value] : metadata) absl::StrAppend(&out, "meta ", key, " ", value, "\n");
  return out;
}

// Prints a listing (ExpectedListing) of name -> float32 numpy array `tensors` and `metadata`.
constexpr char kPrintListing[] = R"(
def print_listing(tensors, metadata):
    import numpy as np
    for name in sorted(tensors):
        a = np.asarray(tensors[name])
        assert a.dtype == np.float32, a.dtype
        bits = ' '.join('%08x' % v for v in a.reshape(-1).view('<u4'))
        print('tensor', name, 'F32', list(a.shape), bits)
    for key in sorted(metadata):
        print('meta', key, metadata[key])
)";

// The same file as the only tensors a model's user has to read: ASCII names.
std::vector<SafetensorsTensor> InteropTensors() {
  std::vector<SafetensorsTensor> tensors = SomeTensors();
  tensors.pop_back();  // the non-ASCII name: the scripts print to a pipe whatever its encoding
  return tensors;
}
const std::map<std::string, std::string> kInteropMetadata = {{"format", "pt"},
                                                             {"global_step", "42"}};

TEST_F(SafetensorsTest, PythonWithOnlyJsonAndNumpyReadsTheFile) {
  if (!PythonHas("numpy")) GTEST_SKIP() << kPython << " with numpy is not installed";
  const std::string path = Path("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, InteropTensors(), kInteropMetadata).ok());
  const std::string script = WriteBytes("read.py", absl::StrCat(kPrintListing, R"(
import json, struct, sys
import numpy as np
data = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', data[:8])
assert n % 8 == 0, n
header = json.loads(data[8:8 + n].decode('utf-8'))
buffer = data[8 + n:]
tensors = {}
for name, info in header.items():
    if name == '__metadata__':
        continue
    assert info['dtype'] == 'F32', info
    begin, end = info['data_offsets']
    tensors[name] = np.frombuffer(buffer[begin:end], dtype='<f4').reshape(info['shape'])
print_listing(tensors, header.get('__metadata__', {}))
)"));
  const ShellRun run = Shell(absl::StrCat(kPython, " ", script, " ", path));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, ExpectedListing(InteropTensors(), kInteropMetadata));
}

TEST_F(SafetensorsTest, HuggingFaceSafetensorsLoadsTheFileWithNumpy) {
  if (!PythonHas("numpy, safetensors.numpy")) {
    GTEST_SKIP() << kPython << " with numpy and safetensors (pip install safetensors) is not "
                 << "installed";
  }
  const std::string path = Path("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, InteropTensors(), kInteropMetadata).ok());
  const std::string script = WriteBytes("load_numpy.py", absl::StrCat(kPrintListing, R"(
import sys
from safetensors import safe_open
from safetensors.numpy import load_file
with safe_open(sys.argv[1], framework='np') as f:
    metadata = f.metadata() or {}
print_listing(load_file(sys.argv[1]), metadata)
)"));
  const ShellRun run = Shell(absl::StrCat(kPython, " ", script, " ", path));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, ExpectedListing(InteropTensors(), kInteropMetadata));
}

TEST_F(SafetensorsTest, PyTorchLoadsTheFile) {
  if (!PythonHas("numpy, torch, safetensors.torch")) {
    GTEST_SKIP() << kPython << " with numpy, torch and safetensors is not installed";
  }
  const std::string path = Path("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, InteropTensors(), kInteropMetadata).ok());
  const std::string script = WriteBytes("load_torch.py", absl::StrCat(kPrintListing, R"(
import sys
import torch
from safetensors import safe_open
from safetensors.torch import load_file
tensors = load_file(sys.argv[1])
assert all(t.dtype == torch.float32 for t in tensors.values())
with safe_open(sys.argv[1], framework='pt') as f:
    metadata = f.metadata() or {}
print_listing({name: t.numpy() for name, t in tensors.items()}, metadata)
)"));
  const ShellRun run = Shell(absl::StrCat(kPython, " ", script, " ", path));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output, ExpectedListing(InteropTensors(), kInteropMetadata));
}

}  // namespace
}  // namespace psflow
