// CIFAR-10 (https://www.cs.toronto.edu/~kriz/cifar.html), binary version. Images are HWC
// everywhere: height, width, channels (red, green, blue), row-major; a batch of them is NHWC.
#ifndef PSFLOW_WORKER_DATA_CIFAR10_H_
#define PSFLOW_WORKER_DATA_CIFAR10_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
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

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_CIFAR10_H_
