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

// ---- Preprocessing ----

// The tutorial's steps in double, written apart from the library: crop at (row, col), flip,
// add delta, adjust contrast per channel, standardize.
std::vector<double> Reference(const uint8_t* image, int row, int col, bool flip, double delta,
                              double factor) {
  constexpr int n = kCrop * kCrop * kCh;
  std::vector<double> v(n);
  for (int y = 0; y < kCrop; ++y) {
    for (int x = 0; x < kCrop; ++x) {
      const int sx = col + (flip ? kCrop - 1 - x : x);
      for (int c = 0; c < kCh; ++c) {
        v[(y * kCrop + x) * kCh + c] = image[((row + y) * kSide + sx) * kCh + c] + delta;
      }
    }
  }
  for (int c = 0; c < kCh; ++c) {
    double mean = 0;
    for (int p = 0; p < kCrop * kCrop; ++p) mean += v[p * kCh + c] / (kCrop * kCrop);
    for (int p = 0; p < kCrop * kCrop; ++p) {
      v[p * kCh + c] = (v[p * kCh + c] - mean) * factor + mean;
    }
  }
  double mean = 0, var = 0;
  for (double x : v) mean += x / n;
  for (double x : v) var += (x - mean) * (x - mean) / n;
  const double sd = std::max(std::sqrt(var), 1 / std::sqrt(double{n}));
  for (double& x : v) x = (x - mean) / sd;
  return v;
}

double MaxAbsDiff(const float* a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < b.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  return worst;
}

// n random images; gray ones have R = G = B.
Cifar10Images RandomImages(int n, uint64_t seed, bool gray) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  Cifar10Images images;
  for (int i = 0; i < n; ++i) {
    for (int p = 0; p < kSide * kSide; ++p) {
      const int v = byte(rng);
      for (int c = 0; c < kCh; ++c)
        images.pixels.push_back(static_cast<uint8_t>(gray ? v : byte(rng)));
    }
    images.labels.push_back(i % 10);
  }
  return images;
}

TEST(Cifar10Preprocess, CenterCropStandardizesTheCentralCrop) {
  // A 0/200 checkerboard inside the central crop (mean 100, stddev 100), 77 around it: any other
  // crop would take in the border and change the mean.
  std::vector<uint8_t> image(kCifar10ImageBytes, 77);
  for (int y = 4; y < 28; ++y) {
    for (int x = 4; x < 28; ++x) {
      for (int c = 0; c < kCh; ++c) image[(y * kSide + x) * kCh + c] = (x + y) % 2 ? 200 : 0;
    }
  }
  std::vector<float> out(kCifar10CropElements);
  CenterCropImage(image.data(), out.data());
  for (int y = 0; y < kCrop; ++y) {
    for (int x = 0; x < kCrop; ++x) {
      for (int c = 0; c < kCh; ++c) {
        EXPECT_NEAR(out[(y * kCrop + x) * kCh + c], (x + y) % 2 ? 1.0 : -1.0, 1e-6);
      }
    }
  }
}

TEST(Cifar10Preprocess, StandardizationClampsATinyStddev) {
  // One value of 1728 is 101, the rest 100: stddev sqrt(p (1 - p)), p = 1/1728, is below the
  // floor 1/sqrt(1728) = sqrt(p), so the outlier becomes (1 - p) / sqrt(p).
  std::vector<uint8_t> image(kCifar10ImageBytes, 100);
  image[(10 * kSide + 10) * kCh + 1] = 101;  // crop position (6, 6), green
  std::vector<float> out(kCifar10CropElements);
  CenterCropImage(image.data(), out.data());
  const double p = 1.0 / 1728;
  EXPECT_NEAR(out[(6 * kCrop + 6) * kCh + 1], (1 - p) / std::sqrt(p), 1e-4);
  EXPECT_NEAR(out[0], -p / std::sqrt(p), 1e-6);

  // A constant image has stddev 0: all zeros, no division by zero.
  std::fill(image.begin(), image.end(), 42);
  CenterCropImage(image.data(), out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

TEST(Cifar10Preprocess, CenterCropMatchesTheReference) {
  const Cifar10Images images = RandomImages(3, /*seed=*/5, /*gray=*/false);
  std::vector<float> out(kCifar10CropElements);
  for (int64_t i = 0; i < images.size(); ++i) {
    CenterCropImage(images.image(i), out.data());
    EXPECT_LT(MaxAbsDiff(out.data(), Reference(images.image(i), 4, 4, false, 0, 1)), 1e-5);
  }
}

TEST(Cifar10Preprocess, ApplyDistortionMatchesTheReference) {
  const Cifar10Images images = RandomImages(1, /*seed=*/9, /*gray=*/false);
  const std::vector<Cifar10Distortion> distortions = {
      {0, 0, false, 0.f, 1.f},   {8, 8, true, 63.f, 1.8f},  {0, 8, true, -63.f, 0.2f},
      {8, 0, false, 10.f, 0.5f}, {3, 5, true, -20.f, 1.3f},
  };
  std::vector<float> out(kCifar10CropElements);
  for (const Cifar10Distortion& d : distortions) {
    ApplyCifar10Distortion(images.image(0), d, out.data());
    const auto expected = Reference(images.image(0), d.crop_row, d.crop_col, d.flip,
                                    d.brightness_delta, d.contrast_factor);
    EXPECT_LT(MaxAbsDiff(out.data(), expected), 1e-4)
        << d.crop_row << "," << d.crop_col << " flip " << d.flip << " delta " << d.brightness_delta
        << " factor " << d.contrast_factor;
  }
}

TEST(Cifar10Preprocess, DrawDistortionCoversTheTutorialRanges) {
  std::mt19937_64 rng(1);
  constexpr int kDraws = 20000;
  int rows[9] = {}, cols[9] = {}, flips = 0;
  float min_delta = 100, max_delta = -100, min_factor = 100, max_factor = -100;
  double delta_sum = 0, factor_sum = 0;
  for (int i = 0; i < kDraws; ++i) {
    const Cifar10Distortion d = DrawCifar10Distortion(rng);
    ASSERT_TRUE(d.crop_row >= 0 && d.crop_row <= 8 && d.crop_col >= 0 && d.crop_col <= 8);
    ++rows[d.crop_row];
    ++cols[d.crop_col];
    flips += d.flip;
    min_delta = std::min(min_delta, d.brightness_delta);
    max_delta = std::max(max_delta, d.brightness_delta);
    min_factor = std::min(min_factor, d.contrast_factor);
    max_factor = std::max(max_factor, d.contrast_factor);
    delta_sum += d.brightness_delta;
    factor_sum += d.contrast_factor;
  }
  for (int o = 0; o < 9; ++o) {
    EXPECT_NEAR(rows[o], kDraws / 9.0, kDraws * 0.02) << o;
    EXPECT_NEAR(cols[o], kDraws / 9.0, kDraws * 0.02) << o;
  }
  EXPECT_NEAR(flips, kDraws / 2.0, kDraws * 0.03);
  EXPECT_GE(min_delta, -63.f);
  EXPECT_LE(max_delta, 63.f);
  EXPECT_LT(min_delta, -62.f);
  EXPECT_GT(max_delta, 62.f);
  EXPECT_GE(min_factor, 0.2f);
  EXPECT_LE(max_factor, 1.8f);
  EXPECT_LT(min_factor, 0.21f);
  EXPECT_GT(max_factor, 1.79f);
  EXPECT_NEAR(delta_sum / kDraws, 0.0, 1.5);
  EXPECT_NEAR(factor_sum / kDraws, 1.0, 0.02);
}

TEST(Cifar10Preprocess, DistortImageIsStandardized) {
  const Cifar10Images images = RandomImages(4, /*seed=*/2, /*gray=*/false);
  std::mt19937_64 rng(3);
  std::vector<float> out(kCifar10CropElements);
  for (int draw = 0; draw < 200; ++draw) {
    DistortImage(images.image(draw % 4), out.data(), rng);
    double mean = 0, var = 0;
    for (float v : out) mean += v / kCifar10CropElements;
    for (float v : out) var += (v - mean) * (v - mean) / kCifar10CropElements;
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(std::sqrt(var), 1.0, 1e-4);
  }
}

// The 162 training crops (81 offsets, flipped or not) of a gray image, standardized. For R = G =
// B every channel has the same mean, so contrast is an affine map of the whole image and, like
// brightness, standardization undoes it: DistortImage must produce one of these.
std::vector<std::vector<double>> GrayCrops(const uint8_t* image) {
  std::vector<std::vector<double>> crops;
  for (int row = 0; row <= 8; ++row) {
    for (int col = 0; col <= 8; ++col) {
      for (bool flip : {false, true}) crops.push_back(Reference(image, row, col, flip, 0, 1));
    }
  }
  return crops;
}

// Index of the crop `out` equals (within tolerance), or -1.
int FindCrop(const float* out, const std::vector<std::vector<double>>& crops) {
  for (size_t k = 0; k < crops.size(); ++k) {
    size_t i = 0;
    while (i < crops[k].size() && std::abs(out[i] - crops[k][i]) < 1e-3) ++i;
    if (i == crops[k].size()) return static_cast<int>(k);
  }
  return -1;
}

TEST(Cifar10Preprocess, DistortImageIsOneOfTheCropsAndFlips) {
  const Cifar10Images images = RandomImages(1, /*seed=*/4, /*gray=*/true);
  const auto crops = GrayCrops(images.image(0));
  std::mt19937_64 rng(5);
  std::vector<float> out(kCifar10CropElements);
  std::set<int> seen;
  for (int draw = 0; draw < 1000; ++draw) {
    DistortImage(images.image(0), out.data(), rng);
    const int k = FindCrop(out.data(), crops);
    ASSERT_GE(k, 0) << "draw " << draw << " is none of the 162 crops";
    seen.insert(k);
  }
  // 1000 uniform draws over 162 crops miss a given one with probability e^-6.2: expect nearly
  // all, flipped (odd k) and unflipped alike.
  EXPECT_GT(seen.size(), 140u);
  const auto flipped = std::count_if(seen.begin(), seen.end(), [](int k) { return k % 2 == 1; });
  EXPECT_GT(flipped, 70);
  EXPECT_GT(static_cast<int64_t>(seen.size()) - flipped, 70);
}

TEST(Cifar10Preprocess, DistortImageIsDeterministicForASeed) {
  const Cifar10Images images = RandomImages(1, /*seed=*/6, /*gray=*/false);
  std::mt19937_64 a(11), b(11), c(12);
  std::vector<float> out_a(kCifar10CropElements), out_b(kCifar10CropElements),
      out_c(kCifar10CropElements);
  bool any_differs = false;
  for (int draw = 0; draw < 10; ++draw) {
    DistortImage(images.image(0), out_a.data(), a);
    DistortImage(images.image(0), out_b.data(), b);
    DistortImage(images.image(0), out_c.data(), c);
    EXPECT_EQ(out_a, out_b);
    any_differs = any_differs || out_a != out_c;
  }
  EXPECT_TRUE(any_differs);
}

TEST(Cifar10Preprocess, EvalSetIsTheCenterCrops) {
  const Cifar10Images images = RandomImages(3, /*seed=*/8, /*gray=*/false);
  const Dataset eval = MakeCifar10EvalSet(images);
  EXPECT_EQ(eval.example_shape, (nn::Shape{24, 24, 3}));
  EXPECT_EQ(eval.num_classes, 10);
  EXPECT_EQ(eval.labels, images.labels);
  ASSERT_EQ(eval.inputs.size(), 3u * kCifar10CropElements);
  std::vector<float> out(kCifar10CropElements);
  for (int64_t i = 0; i < 3; ++i) {
    CenterCropImage(images.image(i), out.data());
    EXPECT_TRUE(std::equal(out.begin(), out.end(), eval.inputs.begin() + i * kCifar10CropElements));
  }
}

// ---- The training source ----

TEST(Cifar10TrainSource, SameSeedSameBatches) {
  const Cifar10Images images = RandomImages(10, /*seed=*/1, /*gray=*/false);
  Cifar10TrainSource a(images, Range{0, 10}, /*batch_size=*/3, /*seed=*/42);
  Cifar10TrainSource b(images, Range{0, 10}, /*batch_size=*/3, /*seed=*/42);
  Cifar10TrainSource c(images, Range{0, 10}, /*batch_size=*/3, /*seed=*/43);
  BatchBuffer ba, bb, bc;
  bool any_differs = false;
  for (int step = 0; step < 7; ++step) {
    a.Fill(ba);
    b.Fill(bb);
    c.Fill(bc);
    ASSERT_EQ(ba.size, 3);
    ASSERT_EQ(ba.inputs.size(), 3u * kCifar10CropElements);
    ASSERT_EQ(ba.labels.size(), 3u);
    EXPECT_EQ(ba.inputs, bb.inputs);
    EXPECT_EQ(ba.labels, bb.labels);
    any_differs = any_differs || ba.inputs != bc.inputs;
  }
  EXPECT_TRUE(any_differs);
}

TEST(Cifar10TrainSource, EachEpochSeesTheShardOnceWithLabelsAligned) {
  // Gray images, so each distorted example can be traced back to its image (GrayCrops).
  const Cifar10Images images = RandomImages(16, /*seed=*/7, /*gray=*/true);
  std::vector<std::vector<std::vector<double>>> crops;
  for (int64_t i = 0; i < images.size(); ++i) crops.push_back(GrayCrops(images.image(i)));
  auto identify = [&](const float* example) {
    for (size_t i = 0; i < crops.size(); ++i) {
      if (FindCrop(example, crops[i]) >= 0) return static_cast<int64_t>(i);
    }
    return int64_t{-1};
  };
  const Range range{3, 15};
  for (int64_t batch_size : {4, 5}) {
    SCOPED_TRACE(batch_size);
    Cifar10TrainSource source(images, range, batch_size, /*seed=*/9);
    ASSERT_EQ(source.batches_per_epoch(), 12 / batch_size);
    BatchBuffer batch;
    std::set<int64_t> ever;
    std::vector<std::vector<int64_t>> epochs;
    for (int epoch = 0; epoch < 6; ++epoch) {
      std::vector<int64_t> rows;
      for (int64_t b = 0; b < source.batches_per_epoch(); ++b) {
        source.Fill(batch);
        ASSERT_EQ(batch.size, batch_size);
        for (int64_t i = 0; i < batch_size; ++i) {
          const int64_t row = identify(batch.inputs.data() + i * kCifar10CropElements);
          ASSERT_TRUE(row >= range.begin && row < range.end) << row;
          EXPECT_EQ(batch.labels[static_cast<size_t>(i)], images.labels[static_cast<size_t>(row)]);
          rows.push_back(row);
        }
      }
      const std::set<int64_t> distinct(rows.begin(), rows.end());
      EXPECT_EQ(distinct.size(), rows.size()) << "epoch " << epoch << " repeats an example";
      if (batch_size == 4) {
        EXPECT_EQ(distinct.size(), 12u);
      }
      ever.insert(rows.begin(), rows.end());
      epochs.push_back(rows);
    }
    EXPECT_EQ(ever.size(), 12u);  // with batch 5 the two left over rotate into later epochs
    EXPECT_NE(epochs[0], epochs[1]);
  }
}

TEST(Cifar10TrainSource, AllocatesOnlyOnTheFirstFill) {
  const Cifar10Images images = RandomImages(8, /*seed=*/3, /*gray=*/false);
  Cifar10TrainSource source(images, Range{0, 8}, /*batch_size=*/3, /*seed=*/1);
  BatchBuffer batch;
  source.Fill(batch);
  const float* inputs = batch.inputs.data();
  const int32_t* labels = batch.labels.data();
  for (int step = 0; step < 10; ++step) {
    source.Fill(batch);
    EXPECT_EQ(batch.inputs.data(), inputs);
    EXPECT_EQ(batch.labels.data(), labels);
  }
}

}  // namespace
}  // namespace psflow::data
