#include "worker/data/cifar10.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace psflow::data {
namespace {

constexpr int64_t kRecordBytes = 1 + kCifar10ImageBytes;  // a label byte, then the pixels
constexpr int64_t kPlane = kCifar10Side * kCifar10Side;   // values per channel in a record
constexpr int kCropPixels = kCifar10CropSide * kCifar10CropSide;
constexpr int kMaxCropOffset = kCifar10Side - kCifar10CropSide;  // 8
// cifar10_input.py: random_brightness(max_delta=63), random_contrast(lower=0.2, upper=1.8).
constexpr float kMaxBrightnessDelta = 63.f;
constexpr float kMinContrast = 0.2f;
constexpr float kMaxContrast = 1.8f;

constexpr char kGetBinary[] =
    "download the binary version of CIFAR-10 (cifar-10-binary.tar.gz) and pass its extracted "
    "cifar-10-batches-bin directory";

std::vector<std::string> BatchFileStems(Split split) {
  if (split == Split::kTest) return {"test_batch"};
  std::vector<std::string> stems;
  for (int i = 1; i <= 5; ++i) stems.push_back(absl::StrCat("data_batch_", i));
  return stems;
}

absl::Status MissingFile(const std::string& dir, const std::string& stem, const std::string& path) {
  std::error_code ec;
  // The python version names its files the same, without ".bin".
  const std::string python = absl::StrCat(dir, "/", stem);
  if (std::filesystem::exists(python, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file; ", python,
                                            " is the python version of CIFAR-10: ", kGetBinary));
  }
  return absl::NotFoundError(absl::StrCat(path, ": no such file; ", kGetBinary));
}

// Appends the `size`-byte batch file's records to `images`, transposing each image to HWC.
absl::Status ReadBatchFile(const std::string& path, int64_t size, Cifar10Images& images) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  auto wrong = [&path](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  unsigned char head[2] = {0, 0};
  in.read(reinterpret_cast<char*>(head), 2);
  in.clear();
  in.seekg(0);
  // A valid file starts with a label byte (0..9), so these cannot be mistaken.
  if (size >= 1 && head[0] == 0x80) {
    return wrong(
        absl::StrCat("wrong format: a Python pickle (first byte 0x80), so the python "
                     "version of CIFAR-10; ",
                     kGetBinary));
  }
  if (size >= 2 && head[0] == 0x1f && head[1] == 0x8b) {
    return wrong(absl::StrCat("wrong format: gzip-compressed; ", kGetBinary));
  }
  if (size == 0) return wrong(absl::StrCat("empty file; ", kGetBinary));
  if (size % kRecordBytes != 0) {
    return wrong(absl::StrCat("size ", size, " bytes is not a multiple of ", kRecordBytes,
                              " (a label byte and 3072 pixel bytes per image): truncated, or not "
                              "the binary version of CIFAR-10"));
  }
  const int64_t records = size / kRecordBytes;
  const int64_t first = images.size();
  images.pixels.resize(static_cast<size_t>((first + records) * kCifar10ImageBytes));
  std::array<uint8_t, kRecordBytes> record;
  for (int64_t r = 0; r < records; ++r) {
    if (!in.read(reinterpret_cast<char*>(record.data()), kRecordBytes)) {
      return wrong(absl::StrCat("read error at record ", r, " of ", records));
    }
    if (record[0] >= kCifar10Classes) {
      return wrong(absl::StrCat("wrong format: label byte ", record[0], " at record ", r,
                                " (byte offset ", r * kRecordBytes,
                                "); is this the binary version of CIFAR-10?"));
    }
    images.labels.push_back(record[0]);
    // The record holds channel planes (CHW); the model reads HWC.
    uint8_t* dst = images.pixels.data() + (first + r) * kCifar10ImageBytes;
    const uint8_t* planes = record.data() + 1;
    for (int64_t p = 0; p < kPlane; ++p) {
      for (int c = 0; c < kCifar10Channels; ++c) {
        dst[p * kCifar10Channels + c] = planes[c * kPlane + p];
      }
    }
  }
  return absl::OkStatus();
}

// Copies the 24x24 crop at (row, col), mirrored when `flip`, to floats.
void CropToFloat(const uint8_t* image, int row, int col, bool flip, float* out) {
  for (int y = 0; y < kCifar10CropSide; ++y) {
    const uint8_t* src_row = image + ((row + y) * kCifar10Side + col) * kCifar10Channels;
    float* dst = out + y * kCifar10CropSide * kCifar10Channels;
    for (int x = 0; x < kCifar10CropSide; ++x) {
      const uint8_t* src = src_row + (flip ? kCifar10CropSide - 1 - x : x) * kCifar10Channels;
      for (int c = 0; c < kCifar10Channels; ++c) dst[x * kCifar10Channels + c] = src[c];
    }
  }
}

// tf.image.adjust_contrast on a 24x24x3 image.
void AdjustContrast(float factor, float* image) {
  double sum[kCifar10Channels] = {};
  for (int p = 0; p < kCropPixels; ++p) {
    for (int c = 0; c < kCifar10Channels; ++c) sum[c] += image[p * kCifar10Channels + c];
  }
  double mean[kCifar10Channels];
  for (int c = 0; c < kCifar10Channels; ++c) mean[c] = sum[c] / kCropPixels;
  for (int p = 0; p < kCropPixels; ++p) {
    for (int c = 0; c < kCifar10Channels; ++c) {
      float& v = image[p * kCifar10Channels + c];
      v = static_cast<float>((v - mean[c]) * factor + mean[c]);
    }
  }
}

// tf.image.per_image_standardization on a 24x24x3 image. In double: a float mean near 100 is off
// by up to 4e-6, which a nearly constant image's tiny stddev would magnify.
void Standardize(float* image) {
  constexpr int64_t n = kCifar10CropElements;
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += image[i];
  const double mean = sum / n;
  double squares = 0;
  for (int64_t i = 0; i < n; ++i) squares += (image[i] - mean) * (image[i] - mean);
  const double stddev = std::max(std::sqrt(squares / n), 1.0 / std::sqrt(static_cast<double>(n)));
  const double scale = 1.0 / stddev;
  for (int64_t i = 0; i < n; ++i) image[i] = static_cast<float>((image[i] - mean) * scale);
}

}  // namespace

absl::StatusOr<Cifar10Images> LoadCifar10(const std::string& dir, Split split) {
  const std::vector<std::string> stems = BatchFileStems(split);
  std::vector<std::string> paths;
  std::vector<int64_t> sizes;
  for (const std::string& stem : stems) {
    paths.push_back(absl::StrCat(dir, "/", stem, ".bin"));
    std::error_code ec;
    const auto size = std::filesystem::file_size(paths.back(), ec);
    if (ec) return MissingFile(dir, stem, paths.back());
    sizes.push_back(static_cast<int64_t>(size));
  }
  // Reserve it all up front: 150 MB of training images, not twice that while a vector grows.
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) / kRecordBytes;
  Cifar10Images images;
  images.pixels.reserve(static_cast<size_t>(total * kCifar10ImageBytes));
  images.labels.reserve(static_cast<size_t>(total));
  for (size_t i = 0; i < paths.size(); ++i) {
    RETURN_IF_ERROR(ReadBatchFile(paths[i], sizes[i], images));
  }
  return images;
}

Cifar10Distortion DrawCifar10Distortion(std::mt19937_64& rng) {
  // One statement per draw: the order the generator is consumed in is fixed.
  std::uniform_int_distribution<int> offset(0, kMaxCropOffset);
  Cifar10Distortion d;
  d.crop_row = offset(rng);
  d.crop_col = offset(rng);
  d.flip = std::bernoulli_distribution(0.5)(rng);
  d.brightness_delta =
      std::uniform_real_distribution<float>(-kMaxBrightnessDelta, kMaxBrightnessDelta)(rng);
  d.contrast_factor = std::uniform_real_distribution<float>(kMinContrast, kMaxContrast)(rng);
  return d;
}

void ApplyCifar10Distortion(const uint8_t* image, const Cifar10Distortion& distortion, float* out) {
  CropToFloat(image, distortion.crop_row, distortion.crop_col, distortion.flip, out);
  for (int64_t i = 0; i < kCifar10CropElements; ++i) out[i] += distortion.brightness_delta;
  AdjustContrast(distortion.contrast_factor, out);
  Standardize(out);
}

void DistortImage(const uint8_t* image, float* out, std::mt19937_64& rng) {
  ApplyCifar10Distortion(image, DrawCifar10Distortion(rng), out);
}

void CenterCropImage(const uint8_t* image, float* out) {
  CropToFloat(image, kMaxCropOffset / 2, kMaxCropOffset / 2, /*flip=*/false, out);
  Standardize(out);
}

Dataset MakeCifar10EvalSet(const Cifar10Images& images) {
  Dataset d;
  d.example_shape = {kCifar10CropSide, kCifar10CropSide, kCifar10Channels};
  d.num_classes = kCifar10Classes;
  d.inputs.resize(static_cast<size_t>(images.size() * kCifar10CropElements));
  for (int64_t i = 0; i < images.size(); ++i) {
    CenterCropImage(images.image(i), d.inputs.data() + i * kCifar10CropElements);
  }
  d.labels = images.labels;
  return d;
}

Cifar10TrainSource::Cifar10TrainSource(const Cifar10Images& images, Range range, int64_t batch_size,
                                       uint64_t seed)
    : images_(images), order_(range, batch_size, seed) {
  assert(range.begin >= 0 && range.begin < range.end && range.end <= images.size());
  assert(batch_size >= 1 && batch_size <= range.size());
}

void Cifar10TrainSource::Fill(BatchBuffer& out) {
  const int64_t n = order_.batch_size();
  // No-ops after the first call with this buffer.
  out.inputs.resize(static_cast<size_t>(n * kCifar10CropElements));
  out.labels.resize(static_cast<size_t>(n));
  out.size = n;
  const std::span<const int64_t> rows = order_.Next();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t row = rows[static_cast<size_t>(i)];
    DistortImage(images_.image(row), out.inputs.data() + i * kCifar10CropElements, order_.rng());
    out.labels[static_cast<size_t>(i)] = images_.labels[static_cast<size_t>(row)];
  }
}

}  // namespace psflow::data
