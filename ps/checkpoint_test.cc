#include "ps/checkpoint.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace psflow {
namespace {

namespace fs = std::filesystem;

// Gives each test a fresh, empty folder, removed afterwards unless the test failed.
class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = absl::StrCat(::testing::TempDir(), "psflow_checkpoint_", info->name(), "_", ::getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  std::string dir_;
};

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes(fs::file_size(path), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// Names in a folder, sorted.
std::vector<std::string> DirNames(const std::string& dir) {
  std::vector<std::string> names;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

uint32_t Crc32(const std::string& bytes) {
  return static_cast<uint32_t>(::crc32(::crc32(0L, Z_NULL, 0),
                                       reinterpret_cast<const Bytef*>(bytes.data()),
                                       static_cast<uInt>(bytes.size())));
}

template <typename T>
T Load(const std::string& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(value));
  return value;
}

// 229 bytes on disk (see RoundTripIsBitExact).
Checkpoint Sample(int64_t step) {
  Checkpoint c;
  c.global_step = step;
  c.fingerprint = 0xDEADBEEFCAFEF00Dull ^ static_cast<uint64_t>(step);
  c.metadata = std::string("meta\0data\0\xff", 11);
  c.tensors = {
      {"layer0/w", {2, 3}, {1.0f, -2.5f, 3.25e-8f, 0.0f, -0.0f, 1e30f}},
      {"scalar", {}, {static_cast<float>(step)}},
      {"empty", {0, 4}, {}},
      {"layer0/w/adam_m",
       {3},
       {std::bit_cast<float>(0x7fc00123u), std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::denorm_min()}},
  };
  return c;
}

void ExpectSame(const Checkpoint& actual, const Checkpoint& expected) {
  EXPECT_EQ(actual.global_step, expected.global_step);
  EXPECT_EQ(actual.fingerprint, expected.fingerprint);
  EXPECT_EQ(actual.metadata, expected.metadata);
  ASSERT_EQ(actual.tensors.size(), expected.tensors.size());
  for (size_t i = 0; i < expected.tensors.size(); ++i) {
    const CheckpointTensor& a = actual.tensors[i];
    const CheckpointTensor& e = expected.tensors[i];
    EXPECT_EQ(a.name, e.name);
    EXPECT_EQ(a.shape, e.shape) << e.name;
    ASSERT_EQ(a.values.size(), e.values.size()) << e.name;
    // Bit for bit: NaN payloads and -0.0 included.
    if (e.values.empty()) continue;
    EXPECT_EQ(std::memcmp(a.values.data(), e.values.data(), e.values.size() * sizeof(float)), 0)
        << e.name;
  }
}

std::string CkptPath(const CheckpointDir& d, const std::string& digits) {
  return absl::StrCat(d.path(), "/ckpt-", digits, ".psck");
}

// Hand-built files, checksum appended by Finish().
class Bytes {
 public:
  Bytes& Raw(const std::string& s) {
    bytes_ += s;
    return *this;
  }
  template <typename T>
  Bytes& Int(T value) {
    bytes_.append(reinterpret_cast<const char*>(&value), sizeof(value));
    return *this;
  }
  Bytes& U32(uint32_t v) { return Int(v); }
  Bytes& U64(uint64_t v) { return Int(v); }
  Bytes& I64(int64_t v) { return Int(v); }
  Bytes& F32(float v) { return Int(v); }
  // Magic, version 1, step 7, fingerprint 9.
  Bytes& Header() { return Raw("PSFLOWCK").U32(1).U64(7).U64(9); }
  std::string Finish() const {
    std::string out = bytes_;
    const uint32_t crc = Crc32(bytes_);
    out.append(reinterpret_cast<const char*>(&crc), sizeof(crc));
    return out;
  }

 private:
  std::string bytes_;
};

TEST_F(CheckpointDirTest, PathIsDirSlashPsTask) {
  EXPECT_EQ(CheckpointDir("/a/b", 7, 3).path(), "/a/b/ps-7");
  EXPECT_EQ(CheckpointDir("/a/b/", 0, 3).path(), "/a/b/ps-0");
}

TEST_F(CheckpointDirTest, RoundTripIsBitExact) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 3, 2);
  const Checkpoint written = Sample(42);
  ASSERT_TRUE(d.Write(written).ok());

  const std::string path = dir + "/ps-3/ckpt-000000000042.psck";
  EXPECT_EQ(d.List(), std::vector<std::string>{path});
  EXPECT_EQ(DirNames(dir + "/ps-3"), std::vector<std::string>{"ckpt-000000000042.psck"});

  // The layout of the header comment, byte for byte.
  const std::string bytes = ReadBytes(path);
  // header 8+4+8+8 + metadata 4+11 + count 4 = 47; tensors (4+name+4+8*rank+8+4*n):
  // 64 + 26 + 37 + 51; checksum 4.
  ASSERT_EQ(bytes.size(), 229u);
  EXPECT_EQ(bytes.substr(0, 8), "PSFLOWCK");
  EXPECT_EQ(Load<uint32_t>(bytes, 8), 1u);
  EXPECT_EQ(Load<uint64_t>(bytes, 12), 42u);
  EXPECT_EQ(Load<uint64_t>(bytes, 20), 0xDEADBEEFCAFEF00Dull ^ 42u);
  EXPECT_EQ(Load<uint32_t>(bytes, 28), 11u);
  EXPECT_EQ(bytes.substr(32, 11), std::string("meta\0data\0\xff", 11));
  EXPECT_EQ(Load<uint32_t>(bytes, 43), 4u);
  EXPECT_EQ(Load<uint32_t>(bytes, 47), 8u);
  EXPECT_EQ(bytes.substr(51, 8), "layer0/w");
  EXPECT_EQ(Load<uint32_t>(bytes, 59), 2u);
  EXPECT_EQ(Load<int64_t>(bytes, 63), 2);
  EXPECT_EQ(Load<int64_t>(bytes, 71), 3);
  EXPECT_EQ(Load<uint64_t>(bytes, 79), 6u);
  EXPECT_EQ(bytes.substr(87, 4), std::string("\x00\x00\x80\x3f", 4));  // 1.0f
  EXPECT_EQ(Load<uint32_t>(bytes, 225), Crc32(bytes.substr(0, 225)));

  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSame(*read, written);

  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, written);
}

TEST_F(CheckpointDirTest, LargeTensorsRoundTrip) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 1);
  Checkpoint c;
  c.global_step = 5;
  // Around the 1 MiB write buffer: below, exactly, above; and 20 MiB.
  for (const int64_t n : {262143, 262144, 262145, 5 * 1024 * 1024 + 3}) {
    CheckpointTensor t{absl::StrCat("t", n), {n}, std::vector<float>(static_cast<size_t>(n))};
    for (int64_t i = 0; i < n; ++i) t.values[static_cast<size_t>(i)] = static_cast<float>(i) * 0.5f;
    c.tensors.push_back(std::move(t));
  }
  ASSERT_TRUE(d.Write(c).ok());
  EXPECT_EQ(fs::file_size(CkptPath(d, "000000000005")),
            36u + 3 * (4 + 7 + 4 + 8 + 8) + (4 + 8 + 4 + 8 + 8) +
                4 * (262143u + 262144u + 262145u + 5242883u) + 4);
  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, c);
}

TEST_F(CheckpointDirTest, KeepsTheNewestAndNoTemporaryFiles) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 1, 3);
  for (int64_t step = 1; step <= 5; ++step) ASSERT_TRUE(d.Write(Sample(step)).ok()) << step;
  EXPECT_EQ(d.List(),
            (std::vector<std::string>{CkptPath(d, "000000000003"), CkptPath(d, "000000000004"),
                                      CkptPath(d, "000000000005")}));
  EXPECT_EQ(DirNames(d.path()),
            (std::vector<std::string>{"ckpt-000000000003.psck", "ckpt-000000000004.psck",
                                      "ckpt-000000000005.psck"}));
  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(5));
}

TEST_F(CheckpointDirTest, RewritingAStepReplacesIt) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  ASSERT_TRUE(d.Write(Sample(5)).ok());
  Checkpoint again = Sample(5);
  again.fingerprint = 1;
  again.tensors.pop_back();
  ASSERT_TRUE(d.Write(again).ok());
  EXPECT_EQ(DirNames(d.path()), std::vector<std::string>{"ckpt-000000000005.psck"});
  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(CkptPath(d, "000000000005"));
  ASSERT_TRUE(read.ok()) << read.status();
  ExpectSame(*read, again);
}

TEST_F(CheckpointDirTest, FlippedByteFallsBackToThePreviousCheckpoint) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  ASSERT_TRUE(d.Write(Sample(1)).ok());
  ASSERT_TRUE(d.Write(Sample(2)).ok());
  const std::string newest = CkptPath(d, "000000000002");
  std::string bytes = ReadBytes(newest);
  ASSERT_EQ(bytes.size(), 229u);
  // Near the middle, inside layer0/w's values (offsets 87..110): only the checksum can tell.
  bytes[100] ^= 0x01;
  WriteBytes(newest, bytes);

  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(newest);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(read.status().message().find(newest), std::string::npos) << read.status();
  EXPECT_NE(read.status().message().find("bad checksum"), std::string::npos) << read.status();

  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  const std::vector<std::string> log = Lines(::testing::internal::GetCapturedStderr());
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(1));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0][0], 'W') << log[0];
  EXPECT_NE(log[0].find(newest), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("bad checksum"), std::string::npos) << log[0];
}

TEST_F(CheckpointDirTest, EveryFlippedByteIsDetected) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  ASSERT_TRUE(d.Write(Sample(1)).ok());
  const std::string good = ReadBytes(CkptPath(d, "000000000001"));
  ASSERT_EQ(good.size(), 229u);
  const std::string path = dir + "/flipped.psck";
  for (size_t i = 0; i < good.size(); ++i) {
    for (const char mask : {'\x01', '\x80', '\xff'}) {
      std::string bytes = good;
      bytes[i] ^= mask;
      WriteBytes(path, bytes);
      EXPECT_EQ(ReadCheckpointFile(path).status().code(), absl::StatusCode::kDataLoss)
          << "byte " << i << " mask " << int{mask};
    }
  }
}

TEST_F(CheckpointDirTest, TruncatedFilesFallBackToThePreviousCheckpoint) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  ASSERT_TRUE(d.Write(Sample(1)).ok());
  ASSERT_TRUE(d.Write(Sample(2)).ok());
  const std::string newest = CkptPath(d, "000000000002");
  const std::string whole = ReadBytes(newest);
  ASSERT_EQ(whole.size(), 229u);
  for (const size_t size : {size_t{0}, size_t{7}, size_t{39}, size_t{40}, whole.size() / 2,
                            whole.size() - 4, whole.size() - 1}) {
    WriteBytes(newest, whole.substr(0, size));
    absl::StatusOr<Checkpoint> read = ReadCheckpointFile(newest);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << size;
    EXPECT_NE(read.status().message().find(newest), std::string::npos) << read.status();

    ::testing::internal::CaptureStderr();
    absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
    const std::vector<std::string> log = Lines(::testing::internal::GetCapturedStderr());
    ASSERT_TRUE(restored.ok()) << restored.status();
    ASSERT_TRUE(restored->has_value()) << size;
    ExpectSame(**restored, Sample(1));
    EXPECT_EQ(log.size(), 1u) << size;
  }
  WriteBytes(newest, whole.substr(0, 7));
  EXPECT_NE(ReadCheckpointFile(newest).status().message().find("truncated"), std::string::npos);
  // A file that lost only its checksum's last byte: every length still fits, nothing is read
  // past the end.
  WriteBytes(newest, whole.substr(0, whole.size() - 1));
  EXPECT_EQ(ReadCheckpointFile(newest).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointDirTest, HandBuiltFileMatchesTheFormat) {
  const std::string& dir = dir_;
  const std::string path = dir + "/hand.psck";
  const std::string bytes = Bytes()
                                .Header()
                                .U32(2)
                                .Raw(std::string("m\0", 2))
                                .U32(1)
                                .U32(1)
                                .Raw("v")
                                .U32(1)
                                .I64(2)
                                .U64(2)
                                .F32(0.5f)
                                .F32(-4.0f)
                                .Finish();
  WriteBytes(path, bytes);
  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  Checkpoint expected;
  expected.global_step = 7;
  expected.fingerprint = 9;
  expected.metadata = std::string("m\0", 2);
  expected.tensors = {{"v", {2}, {0.5f, -4.0f}}};
  ExpectSame(*read, expected);

  // The smallest valid file: no metadata, no tensors, 40 bytes.
  const std::string smallest = Bytes().Header().U32(0).U32(0).Finish();
  ASSERT_EQ(smallest.size(), 40u);
  WriteBytes(path, smallest);
  read = ReadCheckpointFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->global_step, 7);
  EXPECT_EQ(read->fingerprint, 9u);
  EXPECT_EQ(read->metadata, "");
  EXPECT_TRUE(read->tensors.empty());
}

// Files whose checksum is right but whose lengths lie: each is rejected before anything of that
// length is allocated or read (allocating 2^32 tensors or 2^62 floats would abort the test).
TEST_F(CheckpointDirTest, LyingLengthsAreRejectedWithoutAllocating) {
  const std::string& dir = dir_;
  const std::string path = dir + "/bogus.psck";
  struct Case {
    std::string name;
    std::string bytes;
    std::string why;
  };
  const uint32_t kHuge32 = 0xFFFFFFFFu;
  const std::vector<Case> cases = {
      {"huge tensor count", Bytes().Header().U32(0).U32(kHuge32).Finish(), "tensor count"},
      {"huge metadata", Bytes().Header().U32(kHuge32).Raw("abc").U32(0).Finish(), "metadata"},
      {"huge name", Bytes().Header().U32(0).U32(1).U32(kHuge32).Raw("n").U64(0).U64(0).Finish(),
       "tensor 0 name needs 4294967295 bytes"},
      {"huge rank", Bytes().Header().U32(0).U32(1).U32(1).Raw("n").U32(kHuge32).U64(0).Finish(),
       "rank"},
      {"huge element count",
       Bytes()
           .Header()
           .U32(0)
           .U32(1)
           .U32(1)
           .Raw("n")
           .U32(2)
           .I64(int64_t{1} << 31)
           .I64(int64_t{1} << 31)
           .U64(uint64_t{1} << 62)
           .F32(1.0f)
           .Finish(),
       "needs"},
      {"overflowing shape",
       Bytes()
           .Header()
           .U32(0)
           .U32(1)
           .U32(1)
           .Raw("n")
           .U32(2)
           .I64(int64_t{1} << 40)
           .I64(int64_t{1} << 40)
           .U64(0)
           .Finish(),
       "shape"},
      {"count does not match shape",
       Bytes().Header().U32(0).U32(1).U32(1).Raw("n").U32(1).I64(3).U64(2).F32(1).F32(2).Finish(),
       "shape [3] but 2 elements"},
      {"negative dimension",
       Bytes().Header().U32(0).U32(1).U32(1).Raw("n").U32(1).I64(-1).U64(0).Finish(), "shape [-1]"},
      {"trailing bytes", Bytes().Header().U32(0).U32(0).U32(0).Finish(), "4 unexpected bytes"},
      {"bad magic", Bytes().Raw("NOTACKPT").U32(1).U64(7).U64(9).U32(0).U32(0).Finish(),
       "bad magic"},
      {"newer version", Bytes().Raw("PSFLOWCK").U32(2).U64(7).U64(9).U32(0).U32(0).Finish(),
       "unsupported version 2"},
      {"negative step",
       Bytes().Raw("PSFLOWCK").U32(1).U64(~uint64_t{0}).U64(9).U32(0).U32(0).Finish(),
       "global step"},
      {"text file", "notes about the run, nothing else\n", "bad magic"},
  };
  for (const Case& c : cases) {
    WriteBytes(path, c.bytes);
    absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path);
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << c.name << ": " << read.status();
    EXPECT_NE(read.status().message().find(path), std::string::npos) << c.name;
    EXPECT_NE(read.status().message().find(c.why), std::string::npos)
        << c.name << ": " << read.status();
  }
}

TEST_F(CheckpointDirTest, MissingFileIsNotFound) {
  const std::string path = dir_ + "/ckpt-000000000001.psck";
  absl::StatusOr<Checkpoint> read = ReadCheckpointFile(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(read.status().message().find(path), std::string::npos) << read.status();
}

TEST_F(CheckpointDirTest, NoFolderOrNoFilesRestoresNothing) {
  const std::string& dir = dir_;
  CheckpointDir missing(dir + "/never/created", 0, 3);
  absl::StatusOr<std::optional<Checkpoint>> restored = missing.RestoreNewest();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_FALSE(restored->has_value());
  EXPECT_TRUE(missing.List().empty());
  EXPECT_FALSE(fs::exists(dir + "/never"));

  CheckpointDir empty(dir, 0, 3);
  fs::create_directories(empty.path());
  restored = empty.RestoreNewest();
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_FALSE(restored->has_value());
}

TEST_F(CheckpointDirTest, CreatesMissingFolders) {
  const std::string dir = dir_ + "/a/b";
  CheckpointDir d(dir, 2, 3);
  ASSERT_TRUE(d.Write(Sample(1)).ok());
  EXPECT_EQ(d.List(), std::vector<std::string>{dir + "/ps-2/ckpt-000000000001.psck"});
}

TEST_F(CheckpointDirTest, UnwritablePathFailsNamingItAndLeavesNothing) {
  const std::string& dir = dir_;
  const std::string file = dir + "/not-a-folder";
  WriteBytes(file, "hello");
  CheckpointDir d(file, 0, 3);
  const absl::Status status = d.Write(Sample(1));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(file), std::string::npos) << status;
  EXPECT_EQ(ReadBytes(file), "hello");
  EXPECT_EQ(DirNames(dir), std::vector<std::string>{"not-a-folder"});
  // A folder that cannot be read is an error, not "no checkpoint".
  EXPECT_FALSE(d.RestoreNewest().ok());
}

TEST_F(CheckpointDirTest, InvalidCheckpointIsRejectedBeforeTouchingTheDisk) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  Checkpoint wrong_count = Sample(1);
  wrong_count.tensors[0].values.pop_back();
  absl::Status status = d.Write(wrong_count);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("layer0/w"), std::string::npos) << status;
  EXPECT_EQ(d.Write(Sample(-1)).code(), absl::StatusCode::kInvalidArgument);
  Checkpoint negative_dim = Sample(1);
  negative_dim.tensors[2].shape = {-1, 0};
  EXPECT_EQ(d.Write(negative_dim).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(fs::exists(d.path()));
}

// Restores the file size limit (and SIGXFSZ) when the test ends, however it ends.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &limit) == 0;
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  sighandler_t old_handler_ = SIG_DFL;
  bool ok_ = false;
};

TEST_F(CheckpointDirTest, FailedWriteLeavesThePreviousCheckpointsAndNoTemporaryFile) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 1);
  ASSERT_TRUE(d.Write(Sample(1)).ok());
  Checkpoint big = Sample(2);
  big.tensors.push_back({"big", {1 << 20}, std::vector<float>(1 << 20, 1.5f)});
  absl::Status status;
  {
    // Like a full disk: writes past 64 KiB fail (EFBIG).
    FileSizeLimit limit(64 * 1024);
    ASSERT_TRUE(limit.ok());
    status = d.Write(big);
  }
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find(d.path()), std::string::npos) << status;
  EXPECT_EQ(DirNames(d.path()), std::vector<std::string>{"ckpt-000000000001.psck"});
  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(1));
}

TEST_F(CheckpointDirTest, NewestIsByParsedStep) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 2);
  // As strings "1000000000000" < "200000000000": the order must come from the numbers.
  ASSERT_TRUE(d.Write(Sample(999)).ok());
  ASSERT_TRUE(d.Write(Sample(200000000000)).ok());
  ASSERT_TRUE(d.Write(Sample(1000000000000)).ok());
  EXPECT_EQ(d.List(),
            (std::vector<std::string>{CkptPath(d, "200000000000"), CkptPath(d, "1000000000000")}));
  ASSERT_TRUE(d.Write(Sample(1000000000001)).ok());
  EXPECT_EQ(d.List(),
            (std::vector<std::string>{CkptPath(d, "1000000000000"), CkptPath(d, "1000000000001")}));

  CheckpointDir d3(dir, 1, 3);
  ASSERT_TRUE(d3.Write(Sample(999)).ok());
  ASSERT_TRUE(d3.Write(Sample(1000000000000)).ok());
  EXPECT_EQ(d3.List(), (std::vector<std::string>{CkptPath(d3, "000000000999"),
                                                 CkptPath(d3, "1000000000000")}));
  absl::StatusOr<std::optional<Checkpoint>> restored = d3.RestoreNewest();
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(1000000000000));
}

TEST_F(CheckpointDirTest, OtherFilesAreIgnored) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  ASSERT_TRUE(d.Write(Sample(3)).ok());
  ASSERT_TRUE(d.Write(Sample(4)).ok());
  const std::string garbage = "not a checkpoint";
  for (const char* name :
       {"notes.txt", ".ckpt-000000000009.psck.tmp.123", "ckpt-9.psck", "ckpt-000000000009.psck.bak",
        "ckpt-0000000000009.psck", "ckpt-00000000000x.psck", "ckpt--00000000009.psck",
        "ckpt-99999999999999999999.psck", "xckpt-000000000009.psck"}) {
    WriteBytes(absl::StrCat(d.path(), "/", name), garbage);
  }
  EXPECT_EQ(d.List(),
            (std::vector<std::string>{CkptPath(d, "000000000003"), CkptPath(d, "000000000004")}));
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(4));
}

TEST_F(CheckpointDirTest, WriteRemovesStaleTemporaryFilesOnly) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  fs::create_directories(d.path());
  WriteBytes(d.path() + "/.ckpt-000000000003.psck.tmp.999999", "half a checkpoint");
  WriteBytes(d.path() + "/notes.txt", "keep me");
  ASSERT_TRUE(d.Write(Sample(4)).ok());
  EXPECT_EQ(DirNames(d.path()), (std::vector<std::string>{"ckpt-000000000004.psck", "notes.txt"}));
}

TEST_F(CheckpointDirTest, FileWhoseStepDiffersFromItsNameIsSkipped) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  ASSERT_TRUE(d.Write(Sample(2)).ok());
  fs::copy_file(CkptPath(d, "000000000002"), CkptPath(d, "000000000003"));
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  const std::vector<std::string> log = Lines(::testing::internal::GetCapturedStderr());
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(2));
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find(CkptPath(d, "000000000003")), std::string::npos) << log[0];
}

// Invalid files of later steps (damaged, or a newer psflow's) take no place among the ones kept:
// the run that fell back past them keeps its `keep` newest checkpoints, and they stay.
TEST_F(CheckpointDirTest, RetentionKeepsKeepCheckpointsBesideInvalidLaterFiles) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 3);
  fs::create_directories(d.path());
  const std::string junk = "not a checkpoint at all";
  WriteBytes(CkptPath(d, "000000000900"), junk);
  WriteBytes(CkptPath(d, "000000000950"), junk);
  for (int64_t step : {20, 40, 60, 80, 100}) ASSERT_TRUE(d.Write(Sample(step)).ok()) << step;
  EXPECT_EQ(d.List(),
            (std::vector<std::string>{CkptPath(d, "000000000060"), CkptPath(d, "000000000080"),
                                      CkptPath(d, "000000000100"), CkptPath(d, "000000000900"),
                                      CkptPath(d, "000000000950")}));
  // A write of their step replaces one; from then on it counts as any other.
  ASSERT_TRUE(d.Write(Sample(900)).ok());
  EXPECT_EQ(d.List(),
            (std::vector<std::string>{CkptPath(d, "000000000080"), CkptPath(d, "000000000100"),
                                      CkptPath(d, "000000000900"), CkptPath(d, "000000000950")}));
  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(900));
}

// After a restore fell back past invalid newer files, the next write must survive retention.
TEST_F(CheckpointDirTest, RetentionNeverRemovesTheCheckpointJustWritten) {
  const std::string& dir = dir_;
  CheckpointDir d(dir, 0, 1);
  ASSERT_TRUE(d.Write(Sample(8)).ok());
  ASSERT_TRUE(d.Write(Sample(10)).ok());
  EXPECT_EQ(d.List(), std::vector<std::string>{CkptPath(d, "000000000010")});
  const std::string ten = CkptPath(d, "000000000010");
  WriteBytes(ten, ReadBytes(ten).substr(0, 100));

  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::optional<Checkpoint>> restored = d.RestoreNewest();
  EXPECT_EQ(Lines(::testing::internal::GetCapturedStderr()).size(), 1u);
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_FALSE(restored->has_value());

  ASSERT_TRUE(d.Write(Sample(9)).ok());
  EXPECT_EQ(d.List(), (std::vector<std::string>{CkptPath(d, "000000000009"), ten}));
  ::testing::internal::CaptureStderr();
  restored = d.RestoreNewest();
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(9));

  ASSERT_TRUE(d.Write(Sample(10)).ok());
  EXPECT_EQ(d.List(), std::vector<std::string>{ten});
  restored = d.RestoreNewest();
  ASSERT_TRUE(restored.ok()) << restored.status();
  ASSERT_TRUE(restored->has_value());
  ExpectSame(**restored, Sample(10));
}

}  // namespace
}  // namespace psflow
