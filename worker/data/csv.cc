#include "worker/data/csv.h"

#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "worker/data/input_file.h"

namespace psflow::data {
namespace {

constexpr absl::string_view kByteOrderMark = "\xEF\xBB\xBF";

// A field as it appears in a message: escaped, and cut short.
std::string Quote(absl::string_view field) {
  constexpr size_t kShown = 40;
  return absl::StrCat("\"", absl::CHexEscape(field.substr(0, kShown)),
                      field.size() > kShown ? "...\"" : "\"");
}

// The first names of `names`, escaped, for a message.
std::string NameList(const std::vector<std::string>& names) {
  constexpr size_t kListed = 20;
  std::string out;
  for (size_t i = 0; i < names.size() && i < kListed; ++i) {
    absl::StrAppend(&out, i == 0 ? "" : ", ", absl::CHexEscape(names[i]));
  }
  if (names.size() > kListed) absl::StrAppend(&out, ", ... (", names.size(), " columns)");
  return out;
}

bool IsBlank(char c, char delimiter) { return (c == ' ' || c == '\t') && c != delimiter; }

// Splits `line` (no line break) into `fields`: views into `line`, a quoted field's without its
// quotes (a "" inside it left as two characters). On an unterminated quote or text after a
// closing quote, returns false with `error` saying which.
bool SplitLine(absl::string_view line, char delimiter, std::vector<absl::string_view>& fields,
               std::string& error) {
  fields.clear();
  size_t pos = 0;
  while (true) {
    size_t start = pos;
    while (start < line.size() && IsBlank(line[start], delimiter)) ++start;
    if (start < line.size() && line[start] == '"') {
      size_t close = start + 1;
      while (true) {
        close = line.find('"', close);
        if (close == absl::string_view::npos) {
          error = absl::StrCat("column ", fields.size() + 1, ": unterminated quote");
          return false;
        }
        if (close + 1 < line.size() && line[close + 1] == '"') {
          close += 2;  // "" is a quote inside the field
          continue;
        }
        break;
      }
      fields.push_back(line.substr(start + 1, close - start - 1));
      pos = close + 1;
      while (pos < line.size() && IsBlank(line[pos], delimiter)) ++pos;
      if (pos < line.size() && line[pos] != delimiter) {
        error = absl::StrCat("column ", fields.size(), ": text after the closing quote");
        return false;
      }
    } else {
      const size_t end = std::min(line.find(delimiter, pos), line.size());
      fields.push_back(line.substr(pos, end - pos));
      pos = end;
    }
    if (pos >= line.size()) return true;
    ++pos;  // the delimiter; one at the very end leaves an empty last field
    if (pos == line.size()) {
      fields.push_back(absl::string_view());
      return true;
    }
  }
}

class CsvParser {
 public:
  CsvParser(absl::string_view what, const CsvOptions& options) : what_(what), options_(options) {}

  absl::StatusOr<CsvTable> Parse(absl::string_view text) {
    if (options_.delimiter == '"' || options_.delimiter == '\n' || options_.delimiter == '\r') {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": the delimiter cannot be ",
                       absl::CHexEscape(std::string(1, options_.delimiter))));
    }
    if (absl::StartsWith(text, kByteOrderMark)) text.remove_prefix(kByteOrderMark.size());
    int64_t line_number = 0;
    int64_t blank_line = 0;  // the first blank line seen, 0 while none
    bool have_columns = false;
    while (!text.empty()) {
      const size_t newline = text.find('\n');
      absl::string_view line = text.substr(0, newline);
      text.remove_prefix(newline == absl::string_view::npos ? text.size() : newline + 1);
      ++line_number;
      absl::ConsumeSuffix(&line, "\r");
      if (absl::StripAsciiWhitespace(line).empty()) {
        if (blank_line == 0) blank_line = line_number;
        continue;
      }
      if (blank_line != 0) {
        return absl::DataLossError(
            absl::StrCat(what_, ":", blank_line,
                         ": blank line between rows (only blank lines at the end are ignored)"));
      }
      std::string error;
      if (!SplitLine(line, options_.delimiter, fields_, error)) {
        return absl::DataLossError(absl::StrCat(what_, ":", line_number, ": ", error));
      }
      if (!have_columns) {
        RETURN_IF_ERROR(SetColumns(line_number));
        have_columns = true;
        if (options_.header) continue;
      }
      RETURN_IF_ERROR(AddRow(line_number));
    }
    if (table_.labels.empty()) {
      return absl::DataLossError(
          absl::StrCat(what_, ": no data rows", options_.header ? " after the header" : ""));
    }
    return std::move(table_);
  }

 private:
  // From the first line (the header, or the first row): the column count and the label's index.
  absl::Status SetColumns(int64_t line_number) {
    table_.columns = static_cast<int64_t>(fields_.size());
    table_.first_row_line = line_number + (options_.header ? 1 : 0);
    if (table_.columns < 2) {
      return absl::DataLossError(absl::StrCat(
          what_, ":", line_number, ": 1 column; a row needs a label and at least one feature (is ",
          Quote(std::string(1, options_.delimiter)), " the delimiter?)"));
    }
    if (options_.header) {
      for (absl::string_view f : fields_) {
        table_.column_names.push_back(
            absl::StrReplaceAll(absl::StripAsciiWhitespace(f), {{"\"\"", "\""}}));
      }
    }
    const std::string& wanted = options_.label_column;
    int64_t index = 0;
    if (absl::SimpleAtoi(wanted, &index)) {
      if (index < -table_.columns || index >= table_.columns) {
        return absl::InvalidArgumentError(absl::StrCat(what_, ": label column ", index,
                                                       " does not exist (the file has ",
                                                       table_.columns, " columns)"));
      }
      table_.label_column = index < 0 ? index + table_.columns : index;
      return absl::OkStatus();
    }
    if (!options_.header) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": label column \"", absl::CHexEscape(wanted),
                       "\" is a name, but the file is read without a header: give an index"));
    }
    int64_t found = -1;
    for (int64_t i = 0; i < table_.columns; ++i) {
      if (table_.column_names[i] != wanted) continue;
      if (found >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(what_, ": several columns are named \"",
                                                       absl::CHexEscape(wanted),
                                                       "\": give the label's index"));
      }
      found = i;
    }
    if (found < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what_, ": no column named \"", absl::CHexEscape(wanted),
                       "\" (the header has ", NameList(table_.column_names), ")"));
    }
    table_.label_column = found;
    return absl::OkStatus();
  }

  std::string Column(size_t i) const {
    if (table_.column_names.empty()) return absl::StrCat("column ", i + 1);
    return absl::StrCat("column ", i + 1, " (", Quote(table_.column_names[i]), ")");
  }

  absl::Status AddRow(int64_t line_number) {
    if (static_cast<int64_t>(fields_.size()) != table_.columns) {
      return absl::DataLossError(absl::StrCat(
          what_, ":", line_number, ": ", fields_.size(), " fields, expected ", table_.columns,
          options_.header ? " (as the header has)" : " (as the first line has)"));
    }
    for (size_t i = 0; i < fields_.size(); ++i) {
      const absl::string_view field = absl::StripAsciiWhitespace(fields_[i]);
      const auto where = [&] { return absl::StrCat(what_, ":", line_number, ": ", Column(i)); };
      if (field.empty()) {
        return absl::DataLossError(absl::StrCat(where(), ": empty field, expected a number"));
      }
      if (static_cast<int64_t>(i) == table_.label_column) {
        double label;
        if (!absl::SimpleAtod(field, &label)) {
          return absl::DataLossError(
              absl::StrCat(where(), ": label ", Quote(field),
                           " is not a number (labels are class indices 0, 1, ...)"));
        }
        // Below 2^53 every integer is exact; far more classes than any model has.
        if (!(label >= 0 && label <= 9007199254740992.0) || label != std::trunc(label)) {
          return absl::InvalidArgumentError(absl::StrCat(
              where(), ": label ", Quote(field), " is not a class index (a non-negative integer)"));
        }
        table_.labels.push_back(static_cast<int64_t>(label));
        continue;
      }
      float value;
      if (!absl::SimpleAtof(field, &value)) {
        return absl::DataLossError(absl::StrCat(where(), ": ", Quote(field), " is not a number"));
      }
      if (!std::isfinite(value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), ": ", Quote(field), " is not a finite number (or is beyond float's range)"));
      }
      table_.features.push_back(value);
    }
    return absl::OkStatus();
  }

  absl::string_view what_;
  const CsvOptions& options_;
  CsvTable table_;
  std::vector<absl::string_view> fields_;  // the current line's, reused
};

}  // namespace

absl::StatusOr<CsvTable> ParseCsv(absl::string_view text, absl::string_view what,
                                  const CsvOptions& options) {
  return CsvParser(what, options).Parse(text);
}

absl::StatusOr<CsvTable> ReadCsv(const std::string& path, const CsvOptions& options) {
  ASSIGN_OR_RETURN(const std::string text, ReadWholeFile(path));
  return ParseCsv(text, path, options);
}

}  // namespace psflow::data
