#include "worker/data/ptb.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "worker/data/dataset.h"

namespace psflow::data {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

// The offset of the first byte that breaks UTF-8 (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF), or npos when all of `s` is well formed.
size_t FindInvalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

// The whole file, checked to be non-empty text.
// Token ids are int32: no corpus file this reader takes is larger.
constexpr size_t kMaxTextBytes = size_t{1} << 31;

absl::StatusOr<std::string> ReadText(const std::string& path) {
  File f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  std::string text;
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof(chunk), f.get())) > 0) {
    // A NUL never occurs in text; checking it as it comes names binary files (and endless ones,
    // /dev/zero) for what they are.
    if (const void* nul = std::memchr(chunk, '\0', n); nul != nullptr) {
      return absl::DataLossError(absl::StrCat(
          path, ": not a text file (NUL byte at offset ",
          text.size() + static_cast<size_t>(static_cast<const char*>(nul) - chunk), ")"));
    }
    text.append(chunk, n);
    if (text.size() > kMaxTextBytes) {
      return absl::DataLossError(absl::StrCat(path, ": more than ", kMaxTextBytes,
                                              " bytes, more than a corpus this reader takes"));
    }
  }
  if (std::ferror(f.get())) {
    return absl::DataLossError(absl::StrCat(path, ": read error: ", std::strerror(errno)));
  }
  if (text.empty()) return absl::DataLossError(absl::StrCat(path, ": file is empty"));
  if (const size_t bad = FindInvalidUtf8(text); bad != std::string_view::npos) {
    return absl::DataLossError(
        absl::StrCat(path, ": not a text file (invalid UTF-8 at offset ", bad, ")"));
  }
  return text;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// Calls fn(word, line) for each word of `text` in order, line counting from 1, until fn returns
// false; each '\n' is the word kPtbEos, on the line it ends. The views point into `text`.
template <class Fn>
void ForEachWord(std::string_view text, Fn&& fn) {
  int64_t line = 1;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\n') {
      if (!fn(std::string_view(kPtbEos), line++)) return;
      ++i;
    } else if (IsSpace(c)) {
      ++i;
    } else {
      const size_t begin = i;
      while (i < text.size() && text[i] != '\n' && !IsSpace(text[i])) ++i;
      if (!fn(text.substr(begin, i - begin), line)) return;
    }
  }
}

using Vocabulary = absl::flat_hash_map<std::string_view, int32_t>;

// reader.py's _build_vocab: by count descending, then word ascending. The keys of `ids` are views
// into `train_text`; `words` holds copies.
absl::Status BuildVocabulary(const std::string& path, std::string_view train_text,
                             std::vector<std::string>& words, Vocabulary& ids) {
  absl::flat_hash_map<std::string_view, int64_t> counts;
  bool has_word = false;
  ForEachWord(train_text, [&](std::string_view w, int64_t) {
    ++counts[w];
    has_word |= w != kPtbEos;
    return true;
  });
  if (!has_word) return absl::DataLossError(absl::StrCat(path, ": holds no words"));
  if (counts.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": more than 2^31 - 1 distinct words"));
  }
  std::vector<std::pair<std::string_view, int64_t>> by_rank(counts.begin(), counts.end());
  std::sort(by_rank.begin(), by_rank.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  words.clear();
  words.reserve(by_rank.size());
  ids.clear();
  ids.reserve(by_rank.size());
  for (const auto& [word, count] : by_rank) {
    ids.emplace(word, static_cast<int32_t>(words.size()));
    words.emplace_back(word);
  }
  return absl::OkStatus();
}

// The ids of every word of `text`; `train_path` only names the vocabulary's source in errors.
absl::StatusOr<std::vector<int32_t>> ToIds(const std::string& path, std::string_view text,
                                           const Vocabulary& vocabulary,
                                           const std::string& train_path) {
  std::vector<int32_t> out;
  absl::Status status;
  bool has_word = false;
  ForEachWord(text, [&](std::string_view w, int64_t line) {
    const auto it = vocabulary.find(w);
    if (it == vocabulary.end()) {
      status = absl::InvalidArgumentError(
          absl::StrCat(path, ":", line, ": vocabulary mismatch: the word \"", std::string(w),
                       "\" does not occur in ", train_path, " (the files are not one corpus)"));
      return false;
    }
    out.push_back(it->second);
    has_word |= w != kPtbEos;
    return true;
  });
  RETURN_IF_ERROR(status);
  if (!has_word) return absl::DataLossError(absl::StrCat(path, ": holds no words"));
  return out;
}

}  // namespace

absl::StatusOr<PtbCorpus> LoadPtb(const std::string& dir) {
  const std::string train_path = absl::StrCat(dir, "/ptb.train.txt");
  const std::string valid_path = absl::StrCat(dir, "/ptb.valid.txt");
  const std::string test_path = absl::StrCat(dir, "/ptb.test.txt");
  // All three are read before any is parsed, so a missing file is reported before a mismatch.
  ASSIGN_OR_RETURN(const std::string train_text, ReadText(train_path));
  ASSIGN_OR_RETURN(const std::string valid_text, ReadText(valid_path));
  ASSIGN_OR_RETURN(const std::string test_text, ReadText(test_path));

  PtbCorpus corpus;
  Vocabulary vocabulary;
  RETURN_IF_ERROR(BuildVocabulary(train_path, train_text, corpus.words, vocabulary));
  ASSIGN_OR_RETURN(corpus.train, ToIds(train_path, train_text, vocabulary, train_path));
  ASSIGN_OR_RETURN(corpus.valid, ToIds(valid_path, valid_text, vocabulary, train_path));
  ASSIGN_OR_RETURN(corpus.test, ToIds(test_path, test_text, vocabulary, train_path));
  return corpus;
}

std::span<const int32_t> ShardIds(std::span<const int32_t> ids, int index, int count) {
  const Range r = ShardRange(static_cast<int64_t>(ids.size()), index, count);
  return ids.subspan(static_cast<size_t>(r.begin), static_cast<size_t>(r.size()));
}

absl::StatusOr<std::unique_ptr<PtbSource>> PtbSource::Create(std::span<const int32_t> ids,
                                                             int64_t batch_size,
                                                             int64_t num_steps) {
  if (batch_size < 1 || num_steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("PTB batches need batch_size >= 1 and num_steps >= 1; got batch_size ",
                     batch_size, ", num_steps ", num_steps));
  }
  const int64_t batch_len = static_cast<int64_t>(ids.size()) / batch_size;
  if (batch_len < 1 || (batch_len - 1) / num_steps == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("epoch size is 0: decrease batch_size or num_steps (", ids.size(),
                     " ids, batch_size ", batch_size, ", num_steps ", num_steps,
                     "; one batch needs batch_size * (num_steps + 1) ids)"));
  }
  return std::unique_ptr<PtbSource>(new PtbSource(ids, batch_size, num_steps));
}

PtbSource::PtbSource(std::span<const int32_t> ids, int64_t batch_size, int64_t num_steps)
    : ids_(ids),
      batch_size_(batch_size),
      num_steps_(num_steps),
      batch_len_(static_cast<int64_t>(ids.size()) / batch_size),
      epoch_size_((batch_len_ - 1) / num_steps) {}

void PtbSource::Fill(BatchBuffer& out) {
  const auto n = static_cast<size_t>(batch_size_ * num_steps_);
  if (out.inputs.size() != n) out.inputs.resize(n);
  if (out.labels.size() != n) out.labels.resize(n);
  out.size = batch_size_;
  for (int64_t r = 0; r < batch_size_; ++r) {
    const int32_t* x = ids_.data() + r * batch_len_ + next_ * num_steps_;
    float* inputs = out.inputs.data() + r * num_steps_;
    int32_t* labels = out.labels.data() + r * num_steps_;
    for (int64_t t = 0; t < num_steps_; ++t) {
      inputs[t] = static_cast<float>(x[t]);
      labels[t] = x[t + 1];
    }
  }
  next_ = (next_ + 1) % epoch_size_;
}

}  // namespace psflow::data
