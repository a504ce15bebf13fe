#include "worker/data/csv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace psflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CsvOptions Options(bool header, std::string label_column = "-1", char delimiter = ',') {
  CsvOptions o;
  o.header = header;
  o.label_column = std::move(label_column);
  o.delimiter = delimiter;
  return o;
}

TEST(ParseCsv, ReadsAHeaderAndTheLastColumnAsTheLabel) {
  auto t = ParseCsv("a,b,label\n1.5,-2,0\n3e2,0.25,2\n", "f.csv", CsvOptions{});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->column_names, ElementsAre("a", "b", "label"));
  EXPECT_EQ(t->columns, 3);
  EXPECT_EQ(t->label_column, 2);
  EXPECT_EQ(t->first_row_line, 2);
  EXPECT_EQ(t->features_per_row(), 2);
  EXPECT_THAT(t->features, ElementsAre(1.5f, -2.f, 300.f, 0.25f));
  EXPECT_THAT(t->labels, ElementsAre(0, 2));
}

TEST(ParseCsv, LabelColumnByIndexOrName) {
  const std::string text = "y,p,q\n4,0.5,1\n7,2,3\n";
  for (const char* label : {"0", "-3", "y"}) {
    auto t = ParseCsv(text, "f.csv", Options(true, label));
    ASSERT_TRUE(t.ok()) << label << ": " << t.status();
    EXPECT_EQ(t->label_column, 0) << label;
    EXPECT_THAT(t->labels, ElementsAre(4, 7)) << label;
    EXPECT_THAT(t->features, ElementsAre(0.5f, 1.f, 2.f, 3.f)) << label;
  }
  auto middle = ParseCsv(text, "f.csv", Options(true, "p"));
  EXPECT_FALSE(middle.ok());  // 0.5 is not a class index
  auto q = ParseCsv(text, "f.csv", Options(true, "-1"));
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_THAT(q->features, ElementsAre(4.f, 0.5f, 7.f, 2.f));
}

TEST(ParseCsv, WithoutAHeaderEveryLineIsARow) {
  auto t = ParseCsv("1,2,3\n4,5,6", "f.csv", Options(false, "1"));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->column_names.empty());
  EXPECT_EQ(t->first_row_line, 1);
  EXPECT_THAT(t->labels, ElementsAre(2, 5));
  EXPECT_THAT(t->features, ElementsAre(1.f, 3.f, 4.f, 6.f));
}

TEST(ParseCsv, ToleratesQuotesSpacesCrlfBomAndTrailingBlankLines) {
  const std::string text =
      "\xEF\xBB\xBF\"x, first\",\"y\"\"s\" , label\r\n"
      " \"1.5\" , 2 ,\"3\"\r\n"
      "4,\t5.5,6\r\n"
      "\r\n"
      "   \n";
  auto t = ParseCsv(text, "f.csv", CsvOptions{});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->column_names, ElementsAre("x, first", "y\"s", "label"));
  EXPECT_THAT(t->features, ElementsAre(1.5f, 2.f, 4.f, 5.5f));
  EXPECT_THAT(t->labels, ElementsAre(3, 6));
}

TEST(ParseCsv, OtherDelimitersAndIntegralFloatLabels) {
  auto semicolon = ParseCsv("1;2.0\n3;1e1\n", "f.csv", Options(false, "-1", ';'));
  ASSERT_TRUE(semicolon.ok()) << semicolon.status();
  EXPECT_THAT(semicolon->labels, ElementsAre(2, 10));
  auto tab = ParseCsv("a\tb\n0.5\t1\n", "f.tsv", Options(true, "b", '\t'));
  ASSERT_TRUE(tab.ok()) << tab.status();
  EXPECT_THAT(tab->features, ElementsAre(0.5f));
  EXPECT_THAT(tab->labels, ElementsAre(1));
}

struct BadCase {
  std::string text;
  CsvOptions options;
  absl::StatusCode code;
  std::string message;
};

TEST(ParseCsv, RejectsBadTablesNamingFileLineAndColumn) {
  const std::vector<BadCase> cases = {
      {"a,b,c\n1,x,2\n", CsvOptions{}, absl::StatusCode::kDataLoss,
       "f.csv:2: column 2 (\"b\"): \"x\" is not a number"},
      {"1,2\n3,abc\n", Options(false), absl::StatusCode::kDataLoss,
       "f.csv:2: column 2: label \"abc\" is not a number"},
      {"a,b,c\n1,2,3\n4,5\n", CsvOptions{}, absl::StatusCode::kDataLoss,
       "f.csv:3: 2 fields, expected 3 (as the header has)"},
      {"1,2,3\n4,5,6,7\n", Options(false), absl::StatusCode::kDataLoss,
       "f.csv:2: 4 fields, expected 3 (as the first line has)"},
      {"a,b\n1,\n", CsvOptions{}, absl::StatusCode::kDataLoss,
       "f.csv:2: column 2 (\"b\"): empty field"},
      {"a,b\n1,2\n\n3,4\n", CsvOptions{}, absl::StatusCode::kDataLoss,
       "f.csv:3: blank line between rows"},
      {"a,b\n\"1,2\n", CsvOptions{}, absl::StatusCode::kDataLoss,
       "f.csv:2: column 1: unterminated quote"},
      {"a,b\n\"1\"x,2\n", CsvOptions{}, absl::StatusCode::kDataLoss,
       "f.csv:2: column 1: text after the closing quote"},
      {"a,b\n", CsvOptions{}, absl::StatusCode::kDataLoss, "f.csv: no data rows after the header"},
      {"", Options(false), absl::StatusCode::kDataLoss, "f.csv: no data rows"},
      {"a;b\n1;2\n", CsvOptions{}, absl::StatusCode::kDataLoss,
       "f.csv:1: 1 column; a row needs a label and at least one feature (is \",\" the delimiter?)"},
      {"a,b\nnan,1\n", CsvOptions{}, absl::StatusCode::kInvalidArgument,
       "f.csv:2: column 1 (\"a\"): \"nan\" is not a finite number"},
      {"a,b\n-inf,1\n", CsvOptions{}, absl::StatusCode::kInvalidArgument, "not a finite number"},
      {"a,b\n1e39,1\n", CsvOptions{}, absl::StatusCode::kInvalidArgument, "beyond float's range"},
      {"a,b\n1,1.5\n", CsvOptions{}, absl::StatusCode::kInvalidArgument,
       "f.csv:2: column 2 (\"b\"): label \"1.5\" is not a class index (a non-negative integer)"},
      {"a,b\n1,-1\n", CsvOptions{}, absl::StatusCode::kInvalidArgument, "is not a class index"},
      {"a,b\n1,nan\n", CsvOptions{}, absl::StatusCode::kInvalidArgument, "is not a class index"},
      {"a,b\n1,2\n", Options(true, "c"), absl::StatusCode::kInvalidArgument,
       "f.csv: no column named \"c\" (the header has a, b)"},
      {"a,a\n1,2\n", Options(true, "a"), absl::StatusCode::kInvalidArgument,
       "several columns are named \"a\""},
      {"1,2\n", Options(false, "label"), absl::StatusCode::kInvalidArgument,
       "is a name, but the file is read without a header"},
      {"a,b\n1,2\n", Options(true, "2"), absl::StatusCode::kInvalidArgument,
       "label column 2 does not exist (the file has 2 columns)"},
      {"a,b\n1,2\n", Options(true, "-3"), absl::StatusCode::kInvalidArgument,
       "label column -3 does not exist"},
      {"a\"b\n1\"2\n", Options(true, "-1", '"'), absl::StatusCode::kInvalidArgument,
       "the delimiter cannot be"},
  };
  for (const BadCase& c : cases) {
    auto t = ParseCsv(c.text, "f.csv", c.options);
    ASSERT_FALSE(t.ok()) << c.message;
    EXPECT_EQ(t.status().code(), c.code) << t.status();
    EXPECT_THAT(t.status().message(), HasSubstr(c.message)) << t.status();
  }
}

TEST(ReadCsv, ReadsTheFileOrSaysItIsMissing) {
  const std::string path =
      ::testing::TempDir() + "psflow_csv_test_" + std::to_string(::getpid()) + ".csv";
  std::ofstream(path) << "a,label\n0.5,1\n";
  auto t = ReadCsv(path, CsvOptions{});
  std::filesystem::remove(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(t->features, ElementsAre(0.5f));
  EXPECT_THAT(t->labels, ElementsAre(1));
  auto missing = ReadCsv(path, CsvOptions{});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
}

}  // namespace
}  // namespace psflow::data
