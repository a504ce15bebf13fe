// CIFAR-10 (https://www.cs.toronto.edu/~kriz/cifar.html), binary version, and the input pipeline
// of the TensorFlow CIFAR-10 tutorial (tensorflow/models tutorials/image/cifar10,
// cifar10_input.py): the model trains on randomly distorted 24x24 crops of the 32x32 images and
// is evaluated on their central 24x24 crops. Images are HWC everywhere: height, width, channels
// (red, green, blue), row-major; a batch of them is NHWC.
#ifndef PSFLOW_WORKER_DATA_CIFAR10_H_
#define PSFLOW_WORKER_DATA_CIFAR10_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/batch_source.h"
#include "worker/data/dataset.h"
#include "worker/data/mnist.h"

namespace psflow::data {

inline constexpr int kCifar10Side = 32;      // image height = width
inline constexpr int kCifar10Channels = 3;   // red, green, blue
inline constexpr int kCifar10CropSide = 24;  // the model's input height = width
inline constexpr int64_t kCifar10ImageBytes = kCifar10Side * kCifar10Side * kCifar10Channels;
inline constexpr int64_t kCifar10CropElements =
    kCifar10CropSide * kCifar10CropSide * kCifar10Channels;
inline constexpr int kCifar10Classes = 10;

// Decoded images, kept as bytes (50000 training images take 150 MB).
struct Cifar10Images {
  std::vector<uint8_t> pixels;  // size() * kCifar10ImageBytes; each image HWC, values 0..255
  std::vector<int32_t> labels;  // size(), each 0..9

  int64_t size() const { return static_cast<int64_t>(labels.size()); }
  // Image i, 0 <= i < size(): kCifar10ImageBytes bytes.
  const uint8_t* image(int64_t i) const { return pixels.data() + i * kCifar10ImageBytes; }
};

// Reads the binary version of CIFAR-10 (cifar-10-binary.tar.gz, extracted: the
// cifar-10-batches-bin directory) from `dir`. kTrain reads data_batch_1.bin .. data_batch_5.bin,
// concatenated in that order; kTest reads test_batch.bin. A file is records of 1 label byte
// (0..9) and 3072 pixel bytes: 1024 red, 1024 green, 1024 blue, each 32x32 row-major (CHW);
// the pixels are transposed to HWC. Errors are one line naming the file: NOT_FOUND when it is
// missing or cannot be opened; DATA_LOSS when it is empty, its size is not a multiple of 3073
// bytes, a label byte is above 9, or it cannot be read (with a hint when the file is the python
// version of CIFAR-10, a pickle, or is still gzip-compressed).
absl::StatusOr<Cifar10Images> LoadCifar10(const std::string& dir, Split split);

// The random choices of one training distortion (cifar10_input.py's distorted_inputs).
struct Cifar10Distortion {
  int crop_row = 0;              // top row of the 24x24 crop, 0..8
  int crop_col = 0;              // left column of the crop, 0..8
  bool flip = false;             // mirror the crop left-right
  float brightness_delta = 0.f;  // added to every value (0..255 scale), in [-63, 63]
  float contrast_factor = 1.f;   // in [0.2, 1.8]
};

// Draws a distortion in the tutorial's ranges: uniform crop offsets, a flip with probability
// 0.5, brightness_delta ~ U[-63, 63], contrast_factor ~ U[0.2, 1.8]. Consumes `rng` in a fixed
// way, so a seed fixes the sequence (with one standard library).
Cifar10Distortion DrawCifar10Distortion(std::mt19937_64& rng);

// Writes kCifar10CropElements floats (24x24x3, HWC) to `out` from a 32x32x3 HWC `image`, in
// the tutorial's order: the crop, the flip, brightness (add the delta; no clipping, as for
// float images in TensorFlow), contrast (tf.image.adjust_contrast: per channel c,
// (x - mean_c) * factor + mean_c, mean_c over the crop's 576 values of channel c), then
// per-image standardization (tf.image.per_image_standardization: (x - mean) / max(stddev,
// 1/sqrt(1728)), mean and population stddev over all 1728 values). Note the standardization
// cancels the brightness delta exactly (up to rounding): it shifts the mean by the same amount;
// the tutorial applies it all the same. `image` and `out` must not overlap.
void ApplyCifar10Distortion(const uint8_t* image, const Cifar10Distortion& distortion, float* out);

// The tutorial's training distortion: ApplyCifar10Distortion(image, DrawCifar10Distortion(rng),
// out). Allocates nothing.
void DistortImage(const uint8_t* image, float* out, std::mt19937_64& rng);

// Evaluation input: the central 24x24 crop (offset 4, 4) of a 32x32x3 HWC `image`, per-image
// standardized as above; kCifar10CropElements floats HWC to `out`.
void CenterCropImage(const uint8_t* image, float* out);

// The evaluation set: every image center-cropped and standardized (CenterCropImage), in order;
// example_shape {24, 24, 3}, num_classes 10.
Dataset MakeCifar10EvalSet(const Cifar10Images& images);

// Training batches from rows [range.begin, range.end) of `images` (a worker's shard): each epoch
// a fresh seeded shuffle of the rows, cut into range.size() / batch_size batches (rows left over
// take part in the next epoch's shuffle, as in BatchSampler), each image distorted by
// DistortImage. Fill writes inputs [batch_size, 24*24*3] floats (NHWC) and labels [batch_size].
// Deterministic for a seed.
class Cifar10TrainSource final : public BatchSource {
 public:
  // `images` must outlive the source and not change; 0 <= range.begin < range.end <=
  // images.size(); batch_size in [1, range.size()].
  Cifar10TrainSource(const Cifar10Images& images, Range range, int64_t batch_size, uint64_t seed);

  int64_t batches_per_epoch() const override { return order_.batches_per_epoch(); }
  void Fill(BatchBuffer& out) override;

 private:
  const Cifar10Images& images_;
  EpochOrder order_;  // its generator also draws the distortions
};

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_CIFAR10_H_
