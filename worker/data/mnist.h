// MNIST-format datasets (MNIST, Fashion-MNIST): the four idx files of a directory.
#ifndef PSFLOW_WORKER_DATA_MNIST_H_
#define PSFLOW_WORKER_DATA_MNIST_H_

#include <string>

#include "absl/status/statusor.h"
#include "worker/data/dataset.h"

namespace psflow::data {

enum class Split { kTrain, kTest };

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] from `dir` (the .gz file when both
// exist). Images become floats in [0, 1], shape {784}; labels 0..9. NOT_FOUND naming the file
// when it is missing; DATA_LOSS when a file is corrupt, image and label counts differ, images
// are not 28x28 or a label is out of range.
absl::StatusOr<Dataset> LoadMnist(const std::string& dir, Split split);

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_MNIST_H_
