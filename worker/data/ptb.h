// The Penn Treebank language-model input of TensorFlow's ptb_word_lm (models/tutorials/rnn/ptb/
// reader.py): three text files of whitespace-separated words, one sentence a line, read into word
// ids; and ptb_producer, which cuts the ids into [batch_size, num_steps] inputs and their
// next-word labels. scripts/make_ptb_corpus.py builds such a directory (docs/data.md).
#ifndef PSFLOW_WORKER_DATA_PTB_H_
#define PSFLOW_WORKER_DATA_PTB_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/data/batch_source.h"

namespace psflow::data {

// The token every newline becomes.
inline constexpr char kPtbEos[] = "<eos>";

struct PtbCorpus {
  std::vector<std::string> words;  // id -> word; ids are ranks in the train file (see LoadPtb)
  std::vector<int32_t> train, valid, test;
};

// Reads ptb.train.txt, ptb.valid.txt and ptb.test.txt from `dir`. Words are separated by ASCII
// whitespace; each newline is the word kPtbEos, whatever spaces surround it (reader.py's
// replace("\n", "<eos>") needs the " \n" line ends of the real files). The vocabulary is the
// words of the train file, most frequent first, ties in byte order (reader.py's _build_vocab);
// a word's id is its rank.
// Errors, one line naming the file: NOT_FOUND when a file is missing or cannot be opened;
// DATA_LOSS when it cannot be read, is empty, holds no words, or is not text (a NUL byte or
// invalid UTF-8); INVALID_ARGUMENT "vocabulary mismatch" naming the file, line and word when the
// valid or test file holds a word the train file lacks (reader.py drops such words silently; here
// they mean the files do not belong together).
absl::StatusOr<PtbCorpus> LoadPtb(const std::string& dir);

// The index-th of `count` contiguous parts of `ids` (data::ShardRange: the first size % count
// parts hold one id more), a view into `ids`. Requires count >= 1 and 0 <= index < count.
std::span<const int32_t> ShardIds(std::span<const int32_t> ids, int index, int count);

// reader.py's ptb_producer. With batch_len = ids.size() / batch_size, the first
// batch_size * batch_len ids are viewed as a [batch_size, batch_len] matrix `data` (the tail is
// dropped); an epoch is epoch_size = (batch_len - 1) / num_steps batches, batch i holding
//   inputs x[r][t] = data[r][i * num_steps + t]      (the ids as floats, exact below 2^24)
//   labels y[r][t] = data[r][i * num_steps + t + 1]  (the next word)
// for r < batch_size, t < num_steps, both row-major [batch_size, num_steps]. Batches go
// i = 0, 1, ..., epoch_size - 1, then start again at 0. BatchBuffer::size is batch_size (rows).
class PtbSource final : public BatchSource {
 public:
  // `ids` must outlive the source. INVALID_ARGUMENT when batch_size or num_steps is below 1, or
  // when epoch_size is 0 (fewer than batch_size * (num_steps + 1) ids).
  static absl::StatusOr<std::unique_ptr<PtbSource>> Create(std::span<const int32_t> ids,
                                                           int64_t batch_size, int64_t num_steps);

  int64_t batches_per_epoch() const override { return epoch_size_; }
  void Fill(BatchBuffer& out) override;

 private:
  PtbSource(std::span<const int32_t> ids, int64_t batch_size, int64_t num_steps);

  std::span<const int32_t> ids_;
  int64_t batch_size_;
  int64_t num_steps_;
  int64_t batch_len_;
  int64_t epoch_size_;
  int64_t next_ = 0;  // the batch Fill writes next, in [0, epoch_size_)
};

}  // namespace psflow::data

#endif  // PSFLOW_WORKER_DATA_PTB_H_
