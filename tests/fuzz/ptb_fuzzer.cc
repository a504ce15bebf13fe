// libFuzzer target: arbitrary bytes as the three text files of a PTB corpus (train, valid and
// test, separated by kPartSeparator lines), read as the worker reads them (data::LoadPtb), then
// cut into batches (data::PtbSource) when there are words enough. Any input must end in a corpus,
// NOT_FOUND, DATA_LOSS or INVALID_ARGUMENT, never a crash; a corpus it accepts has distinct
// words and only ids below their count, and a batch's labels are its inputs' next words.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/fuzz/fuzz_support.h"
#include "worker/data/ptb.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  const std::vector<absl::string_view> parts = fuzz::SplitParts(fuzz::AsText(data, size), 3);
  fuzz::WriteScratchFile("ptb.train.txt", parts[0]);
  fuzz::WriteScratchFile("ptb.valid.txt", parts[1]);
  fuzz::WriteScratchFile("ptb.test.txt", parts[2]);
  const absl::StatusOr<data::PtbCorpus> corpus = data::LoadPtb(fuzz::ScratchDir());
  fuzz::RecordOutcome(corpus.ok());
  if (!corpus.ok()) {
    const absl::StatusCode code = corpus.status().code();
    PSFLOW_FUZZ_CHECK(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kNotFound ||
                      code == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  const std::set<std::string> distinct(corpus->words.begin(), corpus->words.end());
  PSFLOW_FUZZ_CHECK(distinct.size() == corpus->words.size());
  for (const std::vector<int32_t>* ids : {&corpus->train, &corpus->valid, &corpus->test}) {
    PSFLOW_FUZZ_CHECK(!ids->empty());
    for (int32_t id : *ids) {
      PSFLOW_FUZZ_CHECK(id >= 0 && static_cast<size_t>(id) < corpus->words.size());
    }
  }
  absl::StatusOr<std::unique_ptr<data::PtbSource>> source =
      data::PtbSource::Create(corpus->train, /*batch_size=*/2, /*num_steps=*/3);
  if (!source.ok()) return 0;
  data::BatchBuffer batch;
  // A whole epoch and the first batch of the next (capped: inputs are small).
  const int64_t batches = std::min<int64_t>((*source)->batches_per_epoch() + 1, 64);
  for (int64_t b = 0; b < batches; ++b) {
    (*source)->Fill(batch);
    PSFLOW_FUZZ_CHECK(batch.size == 2 && batch.inputs.size() == 6 && batch.labels.size() == 6);
    for (int t = 0; t + 1 < 3; ++t) {
      PSFLOW_FUZZ_CHECK(batch.labels[t] == static_cast<int32_t>(batch.inputs[t + 1]));
    }
  }
  return 0;
}
