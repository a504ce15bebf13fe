#include "worker/data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "worker/data/mnist.h"

namespace psflow::data {
namespace {

std::string Header(uint8_t type, std::vector<uint32_t> dims) {
  std::string h = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) h.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  return h;
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("psflow_idx_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string WritePlain(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::string WriteGz(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
    gzclose(f);
    return path;
  }

  std::filesystem::path dir_;
};

TEST_F(IdxTest, ReadsPlainAndGzipWithIdenticalResults) {
  std::string bytes = Header(0x08, {2, 3});
  for (int i = 0; i < 6; ++i) bytes.push_back(static_cast<char>(i * 40));
  for (const std::string& path : {WritePlain("a", bytes), WriteGz("a.gz", bytes)}) {
    auto a = ReadIdx(path);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->dims, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a->values, (std::vector<uint8_t>{0, 40, 80, 120, 160, 200}));
  }
}

TEST_F(IdxTest, RejectsCorruptFilesNamingThem) {
  const std::string full = Header(0x08, {4}) + std::string("\x01\x02\x03\x04", 4);
  struct Case {
    std::string name, bytes, reason;
  };
  const std::vector<Case> cases = {
      {"truncated_data", full.substr(0, full.size() - 1), "truncated"},
      {"truncated_header", full.substr(0, 6), "truncated idx header"},
      {"bad_magic", std::string("\x01") + full.substr(1), "bad magic"},
      {"float_type", Header(0x0D, {1}) + std::string(4, '\0'), "not supported"},
      {"trailing", full + "x", "after the idx data"},
      {"zero_dim", Header(0x08, {0}), "size 0"},
      // Claims 4 GiB of images: refused after reading what is there, without allocating it.
      {"huge_claim", Header(0x08, {65536, 256, 256}) + std::string(10, '\1'), "truncated"},
      {"empty", "", "truncated idx header"},
  };
  for (const Case& c : cases) {
    for (bool gz : {false, true}) {
      const std::string path = gz ? WriteGz(c.name + ".gz", c.bytes) : WritePlain(c.name, c.bytes);
      auto a = ReadIdx(path);
      ASSERT_FALSE(a.ok()) << path;
      EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << path;
      EXPECT_NE(a.status().message().find(c.reason), std::string::npos) << a.status();
      EXPECT_NE(a.status().message().find(path), std::string::npos) << a.status();
    }
  }
}

TEST_F(IdxTest, TruncatedGzipStreamIsDataLoss) {
  std::string bytes = Header(0x08, {1000});
  bytes.append(1000, '\x07');
  const std::string path = WriteGz("cut.gz", bytes);
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  auto a = ReadIdx(path);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss) << a.status();
}

TEST_F(IdxTest, MissingFileIsNotFound) {
  auto a = ReadIdx((dir_ / "nope.gz").string());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(IdxTest, LoadMnistNormalisesAndChecksLabels) {
  std::string images = Header(0x08, {2, 28, 28});
  images.append(784, '\0');
  images.append(784, '\xff');
  WriteGz("train-images-idx3-ubyte.gz", images);
  WritePlain("train-labels-idx1-ubyte", Header(0x08, {2}) + std::string("\x03\x09", 2));
  auto d = LoadMnist(dir_.string(), Split::kTrain);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->size(), 2);
  EXPECT_EQ(d->example_shape, (nn::Shape{784}));
  EXPECT_EQ(d->inputs[0], 0.0f);
  EXPECT_EQ(d->inputs[784], 1.0f);
  EXPECT_EQ(d->labels, (std::vector<int32_t>{3, 9}));

  WritePlain("train-labels-idx1-ubyte", Header(0x08, {2}) + std::string("\x03\x0a", 2));
  auto bad_label = LoadMnist(dir_.string(), Split::kTrain);
  EXPECT_EQ(bad_label.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(bad_label.status().message().find("label 10"), std::string::npos);

  WritePlain("train-labels-idx1-ubyte", Header(0x08, {3}) + std::string("\x01\x02\x03", 3));
  EXPECT_EQ(LoadMnist(dir_.string(), Split::kTrain).status().code(), absl::StatusCode::kDataLoss);

  auto missing = LoadMnist(dir_.string(), Split::kTest);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("t10k-images-idx3-ubyte.gz"), std::string::npos);
}

}  // namespace
}  // namespace psflow::data
