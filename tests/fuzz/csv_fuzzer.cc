// libFuzzer target: a numeric CSV file, read as the worker reads one (data::LoadCsv, over
// data::ReadCsv) for a model of input [2] and 10 classes. Byte 0 picks the options, the rest is
// the file: bit 0 set, no header; bit 1 set, ';' delimits (else ','); bits 2-3, the label column
// "-1", "0", "label" or "7". ('@' is the defaults, 'A' no header, 'H' the column "label".) Any
// input must end in a dataset, NOT_FOUND, DATA_LOSS or INVALID_ARGUMENT, never a crash; a table
// it reads has columns - 1 finite features and a non-negative label per row, and a dataset it
// accepts has 2 values and a label in 0..9 per example, and at least one example.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "tests/fuzz/fuzz_support.h"
#include "worker/data/array_dataset.h"
#include "worker/data/csv.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  if (size == 0) return 0;
  data::CsvOptions options;
  options.header = (data[0] & 1) == 0;
  options.delimiter = (data[0] & 2) ? ';' : ',';
  static const char* const kLabelColumns[] = {"-1", "0", "label", "7"};
  options.label_column = kLabelColumns[(data[0] >> 2) & 3];
  const std::string path = fuzz::WriteScratchFile("data.csv", fuzz::AsText(data + 1, size - 1));

  const absl::StatusOr<data::CsvTable> table = data::ReadCsv(path, options);
  if (table.ok()) {
    PSFLOW_FUZZ_CHECK(table->rows() >= 1);
    PSFLOW_FUZZ_CHECK(table->columns >= 2);
    PSFLOW_FUZZ_CHECK(table->label_column >= 0 && table->label_column < table->columns);
    PSFLOW_FUZZ_CHECK(table->features.size() ==
                      static_cast<size_t>(table->rows() * table->features_per_row()));
    PSFLOW_FUZZ_CHECK(table->column_names.size() ==
                      (options.header ? static_cast<size_t>(table->columns) : 0));
    for (float v : table->features) PSFLOW_FUZZ_CHECK(std::isfinite(v));
    for (int64_t label : table->labels) PSFLOW_FUZZ_CHECK(label >= 0);
  } else {
    PSFLOW_FUZZ_CHECK(fuzz::IsDataFileError(table.status()));
  }

  const data::ArrayDataOptions model{{2}, 10, 1.f};
  const absl::StatusOr<data::Dataset> set = data::LoadCsv(path, options, model);
  fuzz::RecordOutcome(set.ok());
  if (!set.ok()) {
    PSFLOW_FUZZ_CHECK(fuzz::IsDataFileError(set.status()));
    return 0;
  }
  PSFLOW_FUZZ_CHECK(table.ok());
  PSFLOW_FUZZ_CHECK(set->size() == table->rows());
  PSFLOW_FUZZ_CHECK(set->inputs.size() == set->labels.size() * 2);
  PSFLOW_FUZZ_CHECK(set->inputs == table->features);
  for (int32_t label : set->labels) PSFLOW_FUZZ_CHECK(label >= 0 && label < 10);
  return 0;
}
