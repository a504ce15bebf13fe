// Numeric CSV tables: one example a line, every column a number, one of them an integer label
// (a class index), the others float features. What pandas' to_csv(index=False) and
// np.savetxt(delimiter=",") write.
//
// The format read: lines end in "\n" or "\r\n"; a UTF-8 byte order mark at the start is skipped;
// fields are separated by `delimiter` (each occurrence separates two fields); a field may be
// quoted ("1.5", a "" inside a quoted field being one quote) and have spaces around it; blank
// lines at the end of the file are ignored, anywhere else they are an error. Numbers are what
// strtod reads in the C locale (no hexadecimal).
//
// Errors are one line naming the file, the line (counted from 1 as an editor counts them, the
// header being line 1) and the column (counted from 1, with its header name when there is one):
//   NOT_FOUND         the file does not exist or cannot be opened;
//   DATA_LOSS         not a numeric CSV: a field that is not a number, a row with a different
//                     number of fields, an unterminated quote, a blank line between rows, no
//                     data row, fewer than two columns;
//   INVALID_ARGUMENT  numbers that cannot be used: a NaN or infinite feature, a label that is
//                     not a non-negative integer (1.5, -1), options that make no sense (a
//                     delimiter of '"' or a line break, a label column that does not exist).
#ifndef PSFLOW_WORKER_DATA_CSV_H_
#define PSFLOW_WORKER_DATA_CSV_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::data {

struct CsvOptions {
  // Whether the first line names the columns. Never guessed: a header line of numbers would be
  // read as an example, and an example with a typo as a header.
  bool header = true;
  char delimiter = ',';
  // The label's column: an integer is a 0-based index, negative ones counting from the end (-1
  // is the last column); anything else is the name of a header column (needs `header`).
  std::string label_column = "-1";
};

struct CsvTable {
  std::vector<std::string> column_names;  // the header's names, unquoted; empty without a header
  int64_t columns = 0;                    // fields in every row, the label's included
  int64_t label_column = 0;               // its index, in [0, columns)
  int64_t first_row_line = 1;             // the line row 0 is on: row i is on line first + i
  // rows() * (columns - 1) features, row-major; a row's features are its columns in file order
  // with the label's left out.
  std::vector<float> features;
  std::vector<int64_t> labels;  // rows() labels, each >= 0

  int64_t rows() const { return static_cast<int64_t>(labels.size()); }
  int64_t features_per_row() const { return columns - 1; }
};

// Parses CSV text; `what` names it in errors (the file's path).
absl::StatusOr<CsvTable> ParseCsv(absl::string_view text, absl::string_view what,
                                  const CsvOptions& options);

// Reads the file `path` and parses it.
absl::StatusOr<CsvTable> ReadCsv(const std::string& path, const CsvOptions& options);

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_CSV_H_
