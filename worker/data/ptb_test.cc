#include "worker/data/ptb.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace psflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

class PtbLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("psflow_ptb_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
  }
  void WriteAll(const std::string& train, const std::string& valid, const std::string& test) {
    Write("ptb.train.txt", train);
    Write("ptb.valid.txt", valid);
    Write("ptb.test.txt", test);
  }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(PtbLoadTest, VocabularyIsTrainWordsByCountThenByteOrder) {
  // Counts: <eos> 4; cat, sat, the 2; B, a, dog 1. Ties go in byte order ('<' < 'B' < 'a').
  WriteAll(" the cat sat \n the dog sat \n a cat \n B \n", " cat sat \n", " B a \n");
  auto corpus = LoadPtb(dir_.string());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_THAT(corpus->words, ElementsAre("<eos>", "cat", "sat", "the", "B", "a", "dog"));
  EXPECT_THAT(corpus->train, ElementsAre(3, 1, 2, 0, 3, 6, 2, 0, 5, 1, 0, 4, 0));
  EXPECT_THAT(corpus->valid, ElementsAre(1, 2, 0));
  EXPECT_THAT(corpus->test, ElementsAre(4, 5, 0));
}

TEST_F(PtbLoadTest, EachNewlineIsEosWhateverSpacesSurroundIt) {
  // The same two sentences, written as the real files do (" a b \n"), bare, with tabs and CRLF;
  // an empty line is one more <eos>, and a missing last newline is no <eos>.
  const std::vector<std::string> spellings = {" x y \n y z \n", "x y\ny z\n", "\tx  y\t\r\ny z\n"};
  std::vector<int32_t> first;
  for (const std::string& train : spellings) {
    WriteAll(train, "x\n\ny", " z \n");
    auto corpus = LoadPtb(dir_.string());
    ASSERT_TRUE(corpus.ok()) << corpus.status();
    // <eos> 2, y 2, x 1, z 1.
    EXPECT_THAT(corpus->words, ElementsAre("<eos>", "y", "x", "z"));
    EXPECT_THAT(corpus->train, ElementsAre(2, 1, 0, 1, 3, 0)) << train;
    EXPECT_THAT(corpus->valid, ElementsAre(2, 0, 0, 1));
    EXPECT_THAT(corpus->test, ElementsAre(3, 0));
  }
}

TEST_F(PtbLoadTest, MissingFileIsNotFoundNamingIt) {
  WriteAll("a\n", "a\n", "a\n");
  for (const std::string name : {"ptb.train.txt", "ptb.valid.txt", "ptb.test.txt"}) {
    std::filesystem::rename(dir_ / name, dir_ / "moved");
    auto corpus = LoadPtb(dir_.string());
    ASSERT_FALSE(corpus.ok()) << name;
    EXPECT_EQ(corpus.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(corpus.status().message(), HasSubstr(Path(name)));
    std::filesystem::rename(dir_ / "moved", dir_ / name);
  }
  auto corpus = LoadPtb((dir_ / "no_such_dir").string());
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(PtbLoadTest, EmptyOrBinaryFilesAreDataLossNamingThem) {
  struct Case {
    std::string file, bytes, reason;
  };
  const std::vector<Case> cases = {
      {"ptb.train.txt", "", "file is empty"},
      {"ptb.valid.txt", "", "file is empty"},
      {"ptb.test.txt", " \n \n", "holds no words"},
      {"ptb.train.txt", std::string("a b\n\0\x01\x02", 7), "NUL byte at offset 4"},
      {"ptb.test.txt", "a \xff b\n", "invalid UTF-8 at offset 2"},
      {"ptb.valid.txt", "a \xc3\n", "invalid UTF-8 at offset 2"},      // truncated sequence
      {"ptb.valid.txt", "a \xc0\xaf\n", "invalid UTF-8 at offset 2"},  // overlong '/'
  };
  for (const Case& c : cases) {
    WriteAll("a b\n", "a\n", "b\n");
    Write(c.file, c.bytes);
    auto corpus = LoadPtb(dir_.string());
    ASSERT_FALSE(corpus.ok()) << c.reason;
    EXPECT_EQ(corpus.status().code(), absl::StatusCode::kDataLoss) << c.reason;
    EXPECT_THAT(corpus.status().message(), HasSubstr(Path(c.file)));
    EXPECT_THAT(corpus.status().message(), HasSubstr(c.reason));
  }
}

TEST_F(PtbLoadTest, AcceptsMultiByteUtf8Words) {
  WriteAll(" caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac \xf0\x9f\x98\x80 \n", " \xe2\x82\xac \n",
           " caf\xc3\xa9 \n");
  auto corpus = LoadPtb(dir_.string());
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  EXPECT_EQ(corpus->words.size(), 5u);
}

TEST_F(PtbLoadTest, WordMissingFromTrainIsVocabularyMismatchWithLine) {
  WriteAll(" a b \n b c \n", " a b \n c a \n", " a b \n b c \n c zebra a \n");
  auto corpus = LoadPtb(dir_.string());
  ASSERT_FALSE(corpus.ok());
  EXPECT_EQ(corpus.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(corpus.status().message(), HasSubstr("vocabulary mismatch"));
  EXPECT_THAT(corpus.status().message(), HasSubstr(Path("ptb.test.txt") + ":3:"));
  EXPECT_THAT(corpus.status().message(), HasSubstr("\"zebra\""));
  EXPECT_THAT(corpus.status().message(), HasSubstr(Path("ptb.train.txt")));
}

std::vector<int32_t> Iota(int n) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

TEST(PtbShardIds, ContiguousDisjointCoveringViews) {
  const std::vector<int32_t> ids = Iota(10);
  // Sizes 4, 3, 3, each a view into `ids`.
  EXPECT_THAT(ShardIds(ids, 0, 3), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(ShardIds(ids, 1, 3), ElementsAre(4, 5, 6));
  EXPECT_THAT(ShardIds(ids, 2, 3), ElementsAre(7, 8, 9));
  EXPECT_EQ(ShardIds(ids, 1, 3).data(), ids.data() + 4);
  EXPECT_THAT(ShardIds(ids, 0, 1), ElementsAreArray(ids));
}

TEST(PtbSource, BatchesAreReaderPyProducerAndWrapEachEpoch) {
  // 25 ids, batch 2: batch_len 12, rows 0..11 and 12..23 (24 dropped); epoch (12 - 1) / 3 = 3.
  const std::vector<int32_t> ids = Iota(25);
  auto source = PtbSource::Create(ids, /*batch_size=*/2, /*num_steps=*/3);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->batches_per_epoch(), 3);
  const std::vector<std::vector<float>> x = {
      {0, 1, 2, 12, 13, 14}, {3, 4, 5, 15, 16, 17}, {6, 7, 8, 18, 19, 20}};
  const std::vector<std::vector<int32_t>> y = {
      {1, 2, 3, 13, 14, 15}, {4, 5, 6, 16, 17, 18}, {7, 8, 9, 19, 20, 21}};
  BatchBuffer buffer;
  const float* inputs = nullptr;
  const int32_t* labels = nullptr;
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (size_t i = 0; i < 3; ++i) {
      (*source)->Fill(buffer);
      EXPECT_EQ(buffer.size, 2);
      EXPECT_THAT(buffer.inputs, ElementsAreArray(x[i])) << "epoch " << epoch << " batch " << i;
      EXPECT_THAT(buffer.labels, ElementsAreArray(y[i])) << "epoch " << epoch << " batch " << i;
      // The buffer is allocated on the first Fill only.
      if (inputs == nullptr) {
        inputs = buffer.inputs.data();
        labels = buffer.labels.data();
      }
      EXPECT_EQ(buffer.inputs.data(), inputs);
      EXPECT_EQ(buffer.labels.data(), labels);
    }
  }
}

TEST(PtbSource, LastBatchOfEpochMayReachTheRowsLastId) {
  // 8 ids, batch 2, steps 3: rows 0..3 and 4..7, epoch (4 - 1) / 3 = 1; y ends at each row's end.
  const std::vector<int32_t> ids = Iota(8);
  auto source = PtbSource::Create(ids, 2, 3);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ((*source)->batches_per_epoch(), 1);
  BatchBuffer buffer;
  (*source)->Fill(buffer);
  EXPECT_THAT(buffer.inputs, ElementsAre(0, 1, 2, 4, 5, 6));
  EXPECT_THAT(buffer.labels, ElementsAre(1, 2, 3, 5, 6, 7));
}

TEST(PtbSource, RejectsBadSizesAndEmptyEpochs) {
  const std::vector<int32_t> ids = Iota(25);
  const std::vector<std::pair<int64_t, int64_t>> bad_sizes = {{0, 3}, {2, 0}, {-1, 3}};
  for (const auto& [batch_size, num_steps] : bad_sizes) {
    auto source = PtbSource::Create(ids, batch_size, num_steps);
    ASSERT_FALSE(source.ok());
    EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(source.status().message(), HasSubstr(">= 1"));
  }
  // batch_len 12 needs num_steps <= 11; batch 26 leaves batch_len 0; no ids at all.
  struct Case {
    std::span<const int32_t> ids;
    int64_t batch_size, num_steps;
  };
  for (const Case& c : {Case{ids, 2, 12}, Case{ids, 26, 1}, Case{{}, 1, 1}}) {
    auto source = PtbSource::Create(c.ids, c.batch_size, c.num_steps);
    ASSERT_FALSE(source.ok());
    EXPECT_EQ(source.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(source.status().message(),
                HasSubstr("epoch size is 0: decrease batch_size or num_steps"));
    EXPECT_THAT(source.status().message(), HasSubstr(absl::StrCat(c.ids.size(), " ids")));
    EXPECT_THAT(source.status().message(), HasSubstr(absl::StrCat("batch_size ", c.batch_size)));
    EXPECT_THAT(source.status().message(), HasSubstr(absl::StrCat("num_steps ", c.num_steps)));
  }
  EXPECT_TRUE(PtbSource::Create(ids, 2, 11).ok());
}

}  // namespace
}  // namespace psflow::data
