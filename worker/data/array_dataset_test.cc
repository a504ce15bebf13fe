#include "worker/data/array_dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "worker/data/file_test_fixture.h"
#include "worker/data/npy_test_files.h"

namespace psflow::data {
namespace {

using testing::Bytes;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::NpyBytes;
using testing::ZipBytes;

NpyArray Array(std::vector<int64_t> shape, NpyType type, std::string data) {
  NpyArray a;
  a.shape = std::move(shape);
  a.type = type;
  a.data = std::move(data);
  return a;
}

ArrayDataOptions Model(nn::Shape example_shape, int num_classes, float scale = 1) {
  return ArrayDataOptions{std::move(example_shape), num_classes, scale};
}

TEST(DatasetFromArrays, ScalesFeaturesAndMatchesOnlyTheElementCount) {
  const NpyArray x = Array({2, 2, 3}, NpyType::kUint8,
                           Bytes<uint8_t>({0, 51, 255, 1, 2, 3, 10, 20, 30, 40, 50, 60}));
  const NpyArray y = Array({2}, NpyType::kInt64, Bytes<int64_t>({9, 0}));
  const float scale = 1.f / 255;
  for (const nn::Shape& shape : {nn::Shape{6}, nn::Shape{3, 2, 1}, nn::Shape{2, 3}}) {
    auto d = DatasetFromArrays(x, "x.npy", y, "y.npy", Model(shape, 10, scale));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->example_shape, shape);
    EXPECT_EQ(d->num_classes, 10);
    EXPECT_EQ(d->size(), 2);
    EXPECT_THAT(d->labels, ElementsAre(9, 0));
    EXPECT_THAT(d->inputs, ElementsAre(0.f, 51 * scale, 255 * scale, 1 * scale, 2 * scale,
                                       3 * scale, 10 * scale, 20 * scale, 30 * scale, 40 * scale,
                                       50 * scale, 60 * scale));
    EXPECT_FLOAT_EQ(d->inputs[2], 1.f);
  }
}

TEST(DatasetFromArrays, AcceptsColumnLabelsIntegralFloatLabelsAndOneValueExamples) {
  const NpyArray x = Array({3}, NpyType::kFloat64, Bytes<double>({0.5, -1, 2}));
  const NpyArray y = Array({3, 1}, NpyType::kFloat32, Bytes<float>({2, 0, 1}));
  auto d = DatasetFromArrays(x, "x", y, "y", Model({1}, 3));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->inputs, ElementsAre(0.5f, -1.f, 2.f));
  EXPECT_THAT(d->labels, ElementsAre(2, 0, 1));
  const NpyArray b = Array({3}, NpyType::kBool, std::string("\x01\x00\x01", 3));
  auto bools = DatasetFromArrays(b, "b", b, "b", Model({1}, 2));
  ASSERT_TRUE(bools.ok()) << bools.status();
  EXPECT_THAT(bools->inputs, ElementsAre(1.f, 0.f, 1.f));
  EXPECT_THAT(bools->labels, ElementsAre(1, 0, 1));
}

TEST(DatasetFromArrays, DataThatDoesNotFitTheModelIsInvalidArgument) {
  const NpyArray x = Array({2, 2, 2}, NpyType::kFloat32, Bytes<float>({1, 2, 3, 4, 5, 6, 7, 8}));
  const NpyArray y = Array({2}, NpyType::kInt32, Bytes<int32_t>({0, 1}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    NpyArray x, y;
    ArrayDataOptions model;
    std::string message;
  };
  const std::vector<Case> cases = {
      {x, y, Model({784}, 10),
       "x.npy: features of shape [2, 2, 2] hold 4 values per example; the model's input [784] "
       "takes 784"},
      {x, Array({3}, NpyType::kInt32, Bytes<int32_t>({0, 1, 1})), Model({4}, 10),
       "y.npy: labels of shape [3]; expected [2] or [2, 1], one label for each example of x.npy"},
      {x, Array({2, 2}, NpyType::kInt32, Bytes<int32_t>({0, 1, 1, 0})), Model({4}, 10),
       "labels of shape [2, 2]"},
      {x, Array({2}, NpyType::kInt32, Bytes<int32_t>({0, 10})), Model({4}, 10),
       "y.npy: label 10 of example 1 is outside 0..9 (the model has 10 classes)"},
      {x, Array({2}, NpyType::kInt8, Bytes<int8_t>({-1, 0})), Model({4}, 10),
       "label -1 of example 0 is outside 0..9"},
      {x, Array({2}, NpyType::kFloat64, Bytes<double>({0, 1.5})), Model({4}, 10),
       "y.npy: element 1 is 1.5, not an integer"},
      {Array({0, 4}, NpyType::kFloat32, ""), Array({0}, NpyType::kInt32, ""), Model({4}, 10),
       "x.npy: features of shape [0, 4] hold no examples"},
      {Array({}, NpyType::kFloat32, Bytes<float>({1})), y, Model({1}, 10),
       "x.npy: features are a 0-d array"},
      {Array({2, 2}, NpyType::kFloat32, Bytes<float>({1, 2, nan, 4})), y, Model({2}, 10),
       "x.npy: value 0 of example 1 is nan; features must be finite"},
      {Array({2, 1}, NpyType::kFloat32, Bytes<float>({1, 3e38f})), y, Model({1}, 10, 10.f),
       "x.npy: value 0 of example 1 is 3e+38 (times 10); features must be finite"},
      {x, y, Model({}, 10), "the model's input shape [] is not a shape of data"},
      {x, y, Model({4, 0}, 10), "the model's input shape [4, 0]"},
      {x, y, Model({4}, 0), "num_classes is 0"},
      {x, y, Model({4}, 10, std::numeric_limits<float>::infinity()), "the feature scale inf"},
      {x, y, ArrayDataOptions{{4}, 10, 1, /*token_vocabulary=*/8},
       "x.npy: value 3 of example 1 is 8; the input is token ids, whole numbers in 0..7 (the "
       "embedding's vocab_size 8)"},
      {Array({2, 1}, NpyType::kFloat32, Bytes<float>({1, 2.5f})), y,
       ArrayDataOptions{{1}, 10, 1, /*token_vocabulary=*/8},
       "x.npy: value 0 of example 1 is 2.5; the input is token ids"},
      {Array({2, 1}, NpyType::kInt32, Bytes<int32_t>({-1, 2})), y,
       ArrayDataOptions{{1}, 10, 1, /*token_vocabulary=*/8},
       "x.npy: value 0 of example 0 is -1; the input is token ids"},
  };
  for (const Case& c : cases) {
    auto d = DatasetFromArrays(c.x, "x.npy", c.y, "y.npy", c.model);
    ASSERT_FALSE(d.ok()) << c.message;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << d.status();
    EXPECT_THAT(d.status().message(), HasSubstr(c.message)) << d.status();
  }
}

TEST(DatasetFromArrays, ArraysWhoseDataDoesNotMatchTheirShapeAreDataLoss) {
  const NpyArray y = Array({2}, NpyType::kInt32, Bytes<int32_t>({0, 1}));
  for (const NpyArray& x : {Array({2, 2}, NpyType::kFloat32, Bytes<float>({1, 2, 3})),
                            Array({2, -2}, NpyType::kFloat32, ""),
                            Array({2, int64_t{1} << 62}, NpyType::kFloat64, "")}) {
    auto d = DatasetFromArrays(x, "x", y, "y", Model({2}, 2));
    EXPECT_EQ(d.status().code(), absl::StatusCode::kDataLoss) << d.status();
    EXPECT_THAT(d.status().message(), HasSubstr("x: an array of shape")) << d.status();
  }
}

class ArrayFilesTest : public testing::FileTest {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    return WriteFile(name, bytes);
  }
};

const std::string kX = NpyBytes("|u1", "(3, 2)", Bytes<uint8_t>({0, 255, 51, 102, 1, 2}));
const std::string kY = NpyBytes("<i8", "(3,)", Bytes<int64_t>({1, 0, 2}));

TEST_F(ArrayFilesTest, LoadsAnNpzSplitStoredOrDeflated) {
  for (bool deflate : {false, true}) {
    const std::string path =
        Write("data.npz", ZipBytes({{"x_train.npy", kX, deflate}, {"y_train.npy", kY, deflate}}));
    const float s = 1.f / 255;
    auto d = LoadNpzSplit(path, "x_train", "y_train", Model({2}, 3, s));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_THAT(d->inputs, ElementsAre(0.f, 255 * s, 51 * s, 102 * s, 1 * s, 2 * s));
    EXPECT_THAT(d->labels, ElementsAre(1, 0, 2));
  }
}

TEST_F(ArrayFilesTest, NpzErrorsNameTheArchiveAndMember) {
  const std::string path = Write("data.npz", ZipBytes({{"x_train.npy", kX}, {"y_train.npy", kY}}));
  auto missing = LoadNpzSplit(path, "x_train", "labels", Model({2}, 3));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("no array 'labels' in the archive (it holds "
                                                    "x_train, y_train)"));
  auto too_few_classes = LoadNpzSplit(path, "x_train", "y_train", Model({2}, 2));
  EXPECT_EQ(too_few_classes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_few_classes.status().message(),
              HasSubstr(path + ":y_train: label 2 of example 2 is outside 0..1"));
  auto wrong_shape = LoadNpzSplit(path, "x_train", "y_train", Model({28, 28}, 3));
  EXPECT_THAT(wrong_shape.status().message(),
              HasSubstr(path + ":x_train: features of shape [3, 2] hold 2 values per example; "
                               "the model's input [28, 28] takes 784"));
}

TEST_F(ArrayFilesTest, LoadsAnNpySplit) {
  const std::string x = Write("x.npy", kX);
  const std::string y = Write("y.npy", kY);
  auto d = LoadNpySplit(x, y, Model({2, 1}, 3));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->inputs, ElementsAre(0.f, 255.f, 51.f, 102.f, 1.f, 2.f));
  EXPECT_THAT(d->labels, ElementsAre(1, 0, 2));
  auto missing = LoadNpySplit(x, (dir_ / "nope.npy").string(), Model({2}, 3));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("nope.npy: no such file"));
  auto corrupt = LoadNpySplit(Write("bad.npy", kX.substr(0, kX.size() - 1)), y, Model({2}, 3));
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(corrupt.status().message(), HasSubstr("bad.npy: truncated"));
}

TEST_F(ArrayFilesTest, LoadsACsv) {
  const std::string path = Write("iris.csv", "sepal,petal,species\n5.1,1.4,0\n6.3,5.0,2\n");
  CsvOptions csv;
  csv.label_column = "species";
  auto d = LoadCsv(path, csv, Model({2}, 3, 0.5f));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_THAT(d->inputs, ElementsAre(5.1f * 0.5f, 1.4f * 0.5f, 6.3f * 0.5f, 2.5f));
  EXPECT_THAT(d->labels, ElementsAre(0, 2));
  EXPECT_EQ(d->example_shape, (nn::Shape{2}));
}

TEST_F(ArrayFilesTest, CsvThatDoesNotFitTheModelNamesLineAndColumn) {
  const std::string path = Write("iris.csv", "sepal,petal,species\n5.1,1.4,0\n6.3,5.0,3\n");
  auto classes = LoadCsv(path, CsvOptions{}, Model({2}, 3));
  EXPECT_EQ(classes.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(classes.status().message(),
              HasSubstr(path + ":3: column 3 (\"species\"): label 3 is outside 0..2 (the model "
                               "has 3 classes)"));
  auto features = LoadCsv(path, CsvOptions{}, Model({4}, 4));
  EXPECT_EQ(features.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(features.status().message(),
              HasSubstr(path + ": 2 feature columns (3 columns, the label in column 3 "
                               "(\"species\")); the model's input [4] takes 4"));
  auto overflow = LoadCsv(path, CsvOptions{}, Model({2}, 4, 1e38f));
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(overflow.status().message(), HasSubstr(path + ":2: feature 1 is 5.1 (times 1e+38)"));
  auto missing = LoadCsv((dir_ / "nope.csv").string(), CsvOptions{}, Model({2}, 3));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ArrayFilesTest, TokenIdsFromText) {
  auto ids = LoadTokenIds(Write("ids.txt", "3 1\t4\n1 5\n\n9 2 6\n"), 10);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(3, 1, 4, 1, 5, 9, 2, 6));
  auto no_newline = LoadTokenIds(Write("one.txt", "0"), 1);
  ASSERT_TRUE(no_newline.ok()) << no_newline.status();
  EXPECT_THAT(*no_newline, ElementsAre(0));
}

TEST_F(ArrayFilesTest, TokenIdsFromNpy) {
  auto ids = LoadTokenIds(
      Write("ids.NPY", NpyBytes("<u2", "(4,)", Bytes<uint16_t>({7, 0, 65535, 1}))), 65536);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_THAT(*ids, ElementsAre(7, 0, 65535, 1));
  auto big_endian = LoadTokenIds(
      Write("be.npy", NpyBytes(">i8", "(1,)", std::string("\0\0\0\0\0\0\0\x05", 8))), 6);
  ASSERT_TRUE(big_endian.ok()) << big_endian.status();
  EXPECT_THAT(*big_endian, ElementsAre(5));
}

TEST_F(ArrayFilesTest, BadTokenIdsNameFileAndLine) {
  struct Case {
    std::string name, bytes;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"a.txt", "1 2\n3 10\n", absl::StatusCode::kInvalidArgument,
       "a.txt:2: token id 10 is outside 0..9 (the model's classes: a language model's ids are its "
       "labels)"},
      {"b.txt", "1 2\n\n 99999999999999999999999999\n", absl::StatusCode::kInvalidArgument,
       "b.txt:3: token id 99999999999999999999999999 is outside 0..9"},
      {"c.txt", "1 -2\n", absl::StatusCode::kDataLoss,
       "c.txt:1: \"-2\" is not a token id (a non-negative decimal integer)"},
      {"d.txt", "1\n2\n3a\n", absl::StatusCode::kDataLoss, "d.txt:3: \"3a\" is not a token id"},
      {"e.txt", " \n\t\n", absl::StatusCode::kDataLoss, "e.txt: holds no token ids"},
      {"f.npy", NpyBytes("<f4", "(2,)", Bytes<float>({1, 2})), absl::StatusCode::kInvalidArgument,
       "f.npy: token ids of dtype float32; expected an integer dtype"},
      {"g.npy", NpyBytes("<i4", "(1, 2)", Bytes<int32_t>({1, 2})),
       absl::StatusCode::kInvalidArgument,
       "g.npy: token ids of shape [1, 2]; expected a 1-D array"},
      {"h.npy", NpyBytes("<i4", "(2,)", Bytes<int32_t>({1, -1})),
       absl::StatusCode::kInvalidArgument, "h.npy: token id -1 at index 1 is outside 0..9"},
      {"i.npy", NpyBytes("<i4", "(0,)", ""), absl::StatusCode::kInvalidArgument,
       "i.npy: holds no token ids"},
      {"j.npy", "not npy", absl::StatusCode::kDataLoss, "j.npy: not a .npy file"},
  };
  for (const Case& c : cases) {
    auto ids = LoadTokenIds(Write(c.name, c.bytes), 10);
    ASSERT_FALSE(ids.ok()) << c.message;
    EXPECT_EQ(ids.status().code(), c.code) << ids.status();
    EXPECT_THAT(ids.status().message(), HasSubstr(c.message)) << ids.status();
  }
  EXPECT_EQ(LoadTokenIds((dir_ / "absent.txt").string(), 10).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(LoadTokenIds(Write("k.txt", "1"), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psflow::data
