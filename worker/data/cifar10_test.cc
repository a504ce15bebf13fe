#include "worker/data/cifar10.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

namespace psflow::data {
namespace {

constexpr int kSide = kCifar10Side;
constexpr int kCrop = kCifar10CropSide;
constexpr int kCh = kCifar10Channels;

// ---- The binary format, written by hand ----

// A pattern that tells images, rows, columns and channels apart.
uint8_t Pixel(int id, int y, int x, int c) {
  return static_cast<uint8_t>((id * 131 + y * 29 + x * 7 + c * 101) % 256);
}

// One record as the binary files hold it: the label, then the red, green and blue planes.
std::string Record(int label, int id) {
  std::string r(static_cast<size_t>(1 + kCifar10ImageBytes), '\0');
  r[0] = static_cast<char>(label);
  for (int c = 0; c < kCh; ++c) {
    for (int y = 0; y < kSide; ++y) {
      for (int x = 0; x < kSide; ++x) {
        r[static_cast<size_t>(1 + c * kSide * kSide + y * kSide + x)] =
            static_cast<char>(Pixel(id, y, x, c));
      }
    }
  }
  return r;
}

class Cifar10Load : public ::testing::Test {
 protected:
  // Five training files of three records (ids 0..14, label id % 10) and a test file of two.
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("psflow_cifar10_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    for (int f = 1; f <= 5; ++f) {
      std::string bytes;
      for (int r = 0; r < 3; ++r) bytes += Record(Label(3 * (f - 1) + r), 3 * (f - 1) + r);
      Write("data_batch_" + std::to_string(f) + ".bin", bytes);
    }
    Write("test_batch.bin", Record(7, 100) + Record(2, 101));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static int Label(int id) { return id % 10; }
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }

  std::filesystem::path dir_;
};

void ExpectImage(const Cifar10Images& images, int64_t i, int id) {
  const uint8_t* image = images.image(i);
  for (int y = 0; y < kSide; ++y) {
    for (int x = 0; x < kSide; ++x) {
      for (int c = 0; c < kCh; ++c) {
        ASSERT_EQ(image[(y * kSide + x) * kCh + c], Pixel(id, y, x, c))
            << "image " << i << " y " << y << " x " << x << " c " << c;
      }
    }
  }
}

TEST_F(Cifar10Load, TrainConcatenatesTheFiveFilesInOrderAsHwc) {
  auto images = LoadCifar10(dir_.string(), Split::kTrain);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 15);
  EXPECT_EQ(images->pixels.size(), 15u * kCifar10ImageBytes);
  for (int id = 0; id < 15; ++id) {
    EXPECT_EQ(images->labels[static_cast<size_t>(id)], Label(id));
    ExpectImage(*images, id, id);
  }
}

TEST_F(Cifar10Load, TestReadsTheTestBatch) {
  auto images = LoadCifar10(dir_.string(), Split::kTest);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 2);
  EXPECT_EQ(images->labels, (std::vector<int32_t>{7, 2}));
  ExpectImage(*images, 0, 100);
  ExpectImage(*images, 1, 101);
}

TEST_F(Cifar10Load, MissingFileIsNotFoundNamingIt) {
  const std::string path = (dir_ / "data_batch_3.bin").string();
  std::filesystem::remove(path);
  auto missing = LoadCifar10(dir_.string(), Split::kTrain);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_NE(missing.status().message().find(path), std::string::npos) << missing.status();
  EXPECT_NE(missing.status().message().find("binary version"), std::string::npos);

  // The python version's file of the same name earns a hint.
  Write("data_batch_3", "\x80\x02}q\x00");
  auto python = LoadCifar10(dir_.string(), Split::kTrain);
  ASSERT_EQ(python.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(python.status().message().find("python version"), std::string::npos) << python.status();

  std::filesystem::remove(dir_ / "test_batch.bin");
  auto test = LoadCifar10(dir_.string(), Split::kTest);
  ASSERT_EQ(test.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(test.status().message().find("test_batch.bin"), std::string::npos);
}

TEST_F(Cifar10Load, CorruptFilesAreDataLossNamingThem) {
  const std::string good = Record(1, 6) + Record(2, 7) + Record(3, 8);
  std::string bad_label = good;
  bad_label[2 * good.size() / 3] = static_cast<char>(200);  // the third record's label
  const std::string pickle = std::string("\x80\x02}q\x00(X\x06\x00\x00\x00labelsq", 18);
  struct Case {
    std::string name, bytes, reason;
  };
  const std::vector<Case> cases = {
      {"truncated", good.substr(0, good.size() - 1), "not a multiple of 3073"},
      {"empty", "", "empty file"},
      {"bad_label", bad_label, "label byte 200 at record 2"},
      {"pickle", pickle, "python version"},
      {"pickle_whole_records", pickle + std::string(3 * 3073 - pickle.size(), 'x'), "pickle"},
      {"gzip", std::string("\x1f\x8b\x08\x00", 4) + std::string(3069, '\0'), "gzip"},
  };
  for (const Case& c : cases) {
    const std::string path = Write("data_batch_3.bin", c.bytes);
    auto images = LoadCifar10(dir_.string(), Split::kTrain);
    ASSERT_EQ(images.status().code(), absl::StatusCode::kDataLoss) << c.name << images.status();
    const std::string message(images.status().message());
    EXPECT_NE(message.find(c.reason), std::string::npos) << c.name << ": " << message;
    EXPECT_NE(message.find(path), std::string::npos) << c.name << ": " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << c.name << ": " << message;
  }
}

}  // namespace
}  // namespace psflow::data
