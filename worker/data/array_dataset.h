// Users' own data in standard formats, as the worker's Dataset (dataset.h) or a language model's
// token stream: NumPy arrays (.npy files, or members of an .npz archive) and numeric CSV tables
// for classifiers; a text file of ids or a 1-D integer .npy for language models.
//
// The data must fit the model, and each load checks that it does: features hold the model's
// input element count per example (only the count: a [n, 28, 28] array feeds an input of
// [28, 28, 1] or [784] alike), one label per example, each a class index below num_classes,
// every feature finite after scaling. Errors are one line naming the file (the archive and member
// for an .npz), what it holds and what the model expects:
//   NOT_FOUND         a file or an .npz member is missing (the members present listed);
//   DATA_LOSS         malformed bytes or text (npy.h, npz.h, csv.h), with the byte offset or
//                     line; an NpyArray whose data does not hold what its shape and dtype need;
//   INVALID_ARGUMENT  well-formed data that does not fit the model: shapes or counts, labels out
//                     of range or not integers, non-finite features, no examples; and options
//                     that make no sense (an empty input shape, num_classes below 1).
// Nothing here keeps state: every function may be called from several threads at once.
#ifndef PSFLOW_WORKER_DATA_ARRAY_DATASET_H_
#define PSFLOW_WORKER_DATA_ARRAY_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/data/csv.h"
#include "worker/data/dataset.h"
#include "worker/data/npy.h"
#include "worker/nn/tensor.h"

namespace psflow::data {

// What the model takes: checked against the data, and copied into the Dataset.
struct ArrayDataOptions {
  nn::Shape example_shape;  // the model's input per example; every dimension >= 1
  int num_classes = 0;      // labels must lie in [0, num_classes); >= 1
  float scale = 1;          // multiplies every feature (1/255 for uint8 pixels); finite
  // > 0: the features are token ids an embedding of this vocab_size reads, each (after scaling)
  // a whole number in [0, token_vocabulary).
  int64_t token_vocabulary = 0;
};

// A Dataset from a features array of shape [n, ...] (n >= 1; a 1-D [n] array is one value per
// example) and a labels array of shape [n] or [n, 1]. Any NpyType: features are converted to
// float (bool 0/1) and multiplied by options.scale; labels must be integral (an integer dtype,
// bool, or floats holding whole numbers). `features_name` and `labels_name` name the arrays in
// errors ("x.npy", "data.npz:x_train").
absl::StatusOr<Dataset> DatasetFromArrays(const NpyArray& features, absl::string_view features_name,
                                          const NpyArray& labels, absl::string_view labels_name,
                                          const ArrayDataOptions& options);

// DatasetFromArrays over two members of one .npz archive, named as np.savez's keywords were
// ("x_train", "y_train"; see ReadNpzMember). Only those two members are read.
absl::StatusOr<Dataset> LoadNpzSplit(const std::string& npz_path, const std::string& features_name,
                                     const std::string& labels_name,
                                     const ArrayDataOptions& options);

// DatasetFromArrays over two .npy files.
absl::StatusOr<Dataset> LoadNpySplit(const std::string& features_path,
                                     const std::string& labels_path,
                                     const ArrayDataOptions& options);

// A Dataset from a numeric CSV table (csv.h): its feature columns, in file order, are an example's
// values; its label column the example's label. Errors give the line of the offending row.
absl::StatusOr<Dataset> LoadCsv(const std::string& path, const CsvOptions& csv_options,
                                const ArrayDataOptions& options);

// A language model's token stream, every id in [0, vocab_size) (vocab_size >= 1: the model's
// classes, since a language model's ids are its labels too; an error says so). A path ending
// in ".npy" (any case) is a 1-D .npy of an integer dtype; any other is text: ids written as
// non-negative decimal integers separated by ASCII whitespace (line breaks are whitespace, not
// tokens: unlike ptb.h's files, the ids are the stream as it is). At least one id.
absl::StatusOr<std::vector<int32_t>> LoadTokenIds(const std::string& path, int vocab_size);

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_ARRAY_DATASET_H_
