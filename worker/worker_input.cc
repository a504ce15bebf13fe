#include "worker/worker_input.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "worker/data/array_dataset.h"
#include "worker/data/mnist.h"
#include "worker/data/synthetic.h"

namespace psflow {
namespace {

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

absl::Status CheckShard(const data::Range& shard, const InputOptions& o) {
  if (o.eval_only || shard.size() >= o.batch_size) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("--batch_size=%d is larger than this worker's shard (%d examples)",
                      o.batch_size, shard.size()));
}

// A file the model's data names: relative to --data_path, unless absolute.
std::string DataFile(const InputOptions& o, const std::string& name) {
  if (name.empty() || name[0] == '/' || o.data_path.empty()) return name;
  return absl::StrCat(o.data_path, "/", name);
}

// A language model's sources over in.corpus: this worker's shard of train (`train_name`), checked
// now that valid (`valid_name`) has one batch and test (`test_name`) one evaluation sequence.
absl::Status UseCorpus(const models::ModelDefinition& m, const InputOptions& o,
                       const std::string& train_name, const std::string& valid_name,
                       const std::string& test_name, WorkerInput& in) {
  const data::PtbCorpus& corpus = *in.corpus;
  const std::span<const int32_t> shard = data::ShardIds(corpus.train, o.shard_index, o.num_shards);
  if (!o.eval_only) {
    auto train = data::PtbSource::Create(shard, o.batch_size, m.num_steps());
    if (!train.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(train_name, " (shard ", o.shard_index + 1,
                                                     " of ", o.num_shards,
                                                     "): ", train.status().message()));
    }
    in.train = *std::move(train);
  }
  // Found out now, not after training.
  if (auto valid = data::PtbSource::Create(corpus.valid, o.batch_size, m.num_steps());
      !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(valid_name, ": ", valid.status().message()));
  }
  // The test model reads one sequence of the evaluation's length at a time (main.cc).
  const int64_t eval_steps = m.eval_spec().input_shape.at(0);
  if (static_cast<int64_t>(corpus.test.size()) <= eval_steps) {
    return absl::InvalidArgumentError(
        absl::StrCat(test_name, ": ", corpus.test.size(),
                     " words, too few for one evaluation sequence of ", eval_steps,
                     " steps (and the word after it): use a longer test file or a shorter "
                     "evaluation.sequence_length in the model file"));
  }
  PSFLOW_LOG(INFO) << "loaded " << corpus.train.size() << " training words (" << shard.size()
                   << " in this shard), " << corpus.valid.size() << " valid, " << corpus.test.size()
                   << " test"
                   << (corpus.words.empty() ? std::string()
                                            : absl::StrCat("; vocabulary ", corpus.words.size()))
                   << (o.data_path.empty() ? "" : " from ") << o.data_path;
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<data::BatchSource> MakeSyntheticInput(const models::ModelDefinition& m,
                                                      int64_t batch_size, uint64_t seed) {
  const bool lm = m.language_model();
  data::SyntheticShape shape;
  shape.example_elements = nn::NumElements(m.spec.input_shape);
  shape.labels_per_example = lm ? m.num_steps() : 1;
  shape.num_classes = m.spec.num_classes;
  shape.vocab_size = lm ? m.spec.num_classes : 0;
  return std::make_unique<data::SyntheticSource>(shape, batch_size, seed);
}

absl::StatusOr<std::unique_ptr<WorkerInput>> LoadWorkerInput(const models::ModelDefinition& m,
                                                             const InputOptions& o) {
  auto in = std::make_unique<WorkerInput>();
  // Each worker's own order and randomness, repeatable for a seed.
  const uint64_t seed = o.seed * 7919 + static_cast<uint64_t>(o.shard_index);
  if (o.synthetic) {
    in->train = MakeSyntheticInput(m, o.batch_size, seed);
    PSFLOW_LOG(INFO) << "synthetic data: random batches of the model's shape, no evaluation";
    return in;
  }
  switch (m.data.format) {
    case models::DataSpec::Format::kMnist: {
      const std::string dir = o.data_path.empty() ? kFashionMnistDir : o.data_path;
      ASSIGN_OR_RETURN(in->train_set_, data::LoadMnist(dir, data::Split::kTrain));
      ASSIGN_OR_RETURN(in->test, data::LoadMnist(dir, data::Split::kTest));
      const data::Range shard =
          data::ShardRange(in->train_set_.size(), o.shard_index, o.num_shards);
      RETURN_IF_ERROR(CheckShard(shard, o));
      if (!o.eval_only) {
        in->train = std::make_unique<data::BatchSampler>(in->train_set_, shard, o.batch_size, seed);
      }
      PSFLOW_LOG(INFO) << "loaded " << in->train_set_.size() << " training and " << in->test->size()
                       << " test examples from " << dir << "; shard [" << shard.begin << ", "
                       << shard.end << ")";
      break;
    }
    case models::DataSpec::Format::kCifar10: {
      if (o.data_path.empty()) {
        return absl::InvalidArgumentError(
            "cifar10_cnn needs --data_path=DIR holding CIFAR-10's binary version "
            "(data_batch_1.bin ... data_batch_5.bin, test_batch.bin), or --data_source=synthetic");
      }
      ASSIGN_OR_RETURN(in->cifar_train_, data::LoadCifar10(o.data_path, data::Split::kTrain));
      ASSIGN_OR_RETURN(data::Cifar10Images test,
                       data::LoadCifar10(o.data_path, data::Split::kTest));
      in->test = data::MakeCifar10EvalSet(test);
      const data::Range shard =
          data::ShardRange(in->cifar_train_.size(), o.shard_index, o.num_shards);
      RETURN_IF_ERROR(CheckShard(shard, o));
      if (!o.eval_only) {
        in->train =
            std::make_unique<data::Cifar10TrainSource>(in->cifar_train_, shard, o.batch_size, seed);
      }
      PSFLOW_LOG(INFO) << "loaded " << in->cifar_train_.size() << " training and "
                       << in->test->size() << " test images from " << o.data_path << "; shard ["
                       << shard.begin << ", " << shard.end << ")";
      break;
    }
    case models::DataSpec::Format::kPtb: {
      if (o.data_path.empty()) {
        return absl::InvalidArgumentError(
            "ptb_lstm needs --data_path=DIR holding ptb.train.txt, ptb.valid.txt and "
            "ptb.test.txt (scripts/make_ptb_corpus.py builds one), or --data_source=synthetic");
      }
      ASSIGN_OR_RETURN(in->corpus, data::LoadPtb(o.data_path));
      const auto vocabulary = static_cast<int64_t>(in->corpus->words.size());
      if (vocabulary > m.spec.num_classes) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s: the corpus has %d distinct words, more than the model's vocab_size %d",
            o.data_path, vocabulary, m.spec.num_classes));
      }
      RETURN_IF_ERROR(UseCorpus(m, o, absl::StrCat(o.data_path, "/ptb.train.txt"),
                                absl::StrCat(o.data_path, "/ptb.valid.txt"),
                                absl::StrCat(o.data_path, "/ptb.test.txt"), *in));
      break;
    }
    case models::DataSpec::Format::kTokens: {
      const models::DataSpec& d = m.data;
      data::PtbCorpus corpus;
      ASSIGN_OR_RETURN(corpus.train,
                       data::LoadTokenIds(DataFile(o, d.train[0]), m.spec.num_classes));
      for (auto [split, ids] :
           {std::pair{&d.valid, &corpus.valid}, std::pair{&d.test, &corpus.test}}) {
        if (split->empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("model ", m.spec.name,
                           ": data format tokens needs valid and test files to evaluate on"));
        }
        ASSIGN_OR_RETURN(*ids, data::LoadTokenIds(DataFile(o, split->front()), m.spec.num_classes));
      }
      in->corpus = std::move(corpus);
      RETURN_IF_ERROR(UseCorpus(m, o, DataFile(o, d.train[0]), DataFile(o, d.valid[0]),
                                DataFile(o, d.test[0]), *in));
      break;
    }
    case models::DataSpec::Format::kNpz:
    case models::DataSpec::Format::kNpy:
    case models::DataSpec::Format::kCsv: {
      const models::DataSpec& d = m.data;
      const data::ArrayDataOptions options{m.spec.input_shape, m.spec.num_classes, d.scale,
                                           m.input_vocabulary()};
      auto load = [&](const std::vector<std::string>& split) -> absl::StatusOr<data::Dataset> {
        switch (d.format) {
          case models::DataSpec::Format::kNpz:
            return data::LoadNpzSplit(DataFile(o, d.file), split[0], split[1], options);
          case models::DataSpec::Format::kNpy:
            return data::LoadNpySplit(DataFile(o, split[0]), DataFile(o, split[1]), options);
          default:
            return data::LoadCsv(DataFile(o, split[0]),
                                 data::CsvOptions{d.header, ',', d.label_column}, options);
        }
      };
      ASSIGN_OR_RETURN(in->train_set_, load(d.train));
      if (!d.test.empty()) {
        ASSIGN_OR_RETURN(in->test, load(d.test));
      }
      const data::Range shard =
          data::ShardRange(in->train_set_.size(), o.shard_index, o.num_shards);
      RETURN_IF_ERROR(CheckShard(shard, o));
      if (!o.eval_only) {
        in->train = std::make_unique<data::BatchSampler>(in->train_set_, shard, o.batch_size, seed);
      }
      PSFLOW_LOG(INFO) << "loaded " << in->train_set_.size() << " training and "
                       << (in->test ? in->test->size() : 0) << " test examples ("
                       << models::DataFormatName(d.format) << ") under "
                       << (o.data_path.empty() ? "." : o.data_path) << "; shard [" << shard.begin
                       << ", " << shard.end << ")";
      break;
    }
  }
  return in;
}

}  // namespace psflow
