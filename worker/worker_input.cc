#include "worker/worker_input.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/log.h"
#include "core/status_macros.h"
#include "worker/data/mnist.h"
#include "worker/data/synthetic.h"

namespace psflow {
namespace {

constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

absl::Status CheckShard(const data::Range& shard, const InputOptions& o) {
  if (shard.size() >= o.batch_size) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrFormat("--batch_size=%d is larger than this worker's shard (%d examples)",
                      o.batch_size, shard.size()));
}

}  // namespace

std::unique_ptr<data::BatchSource> MakeSyntheticInput(const models::ZooModel& m, int64_t batch_size,
                                                      uint64_t seed) {
  const bool lm = m.data == models::DataKind::kPtb;
  data::SyntheticShape shape;
  shape.example_elements = nn::NumElements(m.spec.input_shape);
  shape.labels_per_example = lm ? m.num_steps : 1;
  shape.num_classes = m.spec.num_classes;
  shape.vocab_size = lm ? m.spec.num_classes : 0;
  return std::make_unique<data::SyntheticSource>(shape, batch_size, seed);
}

absl::StatusOr<std::unique_ptr<WorkerInput>> LoadWorkerInput(const models::ZooModel& m,
                                                             const InputOptions& o) {
  auto in = std::make_unique<WorkerInput>();
  // Each worker's own order and randomness, repeatable for a seed.
  const uint64_t seed = o.seed * 7919 + static_cast<uint64_t>(o.shard_index);
  if (o.synthetic) {
    in->train = MakeSyntheticInput(m, o.batch_size, seed);
    PSFLOW_LOG(INFO) << "synthetic data: random batches of the model's shape, no evaluation";
    return in;
  }
  switch (m.data) {
    case models::DataKind::kMnist: {
      const std::string dir = o.data_path.empty() ? kFashionMnistDir : o.data_path;
      ASSIGN_OR_RETURN(in->mnist_train_, data::LoadMnist(dir, data::Split::kTrain));
      ASSIGN_OR_RETURN(in->test, data::LoadMnist(dir, data::Split::kTest));
      const data::Range shard =
          data::ShardRange(in->mnist_train_.size(), o.shard_index, o.num_shards);
      RETURN_IF_ERROR(CheckShard(shard, o));
      in->train = std::make_unique<data::BatchSampler>(in->mnist_train_, shard, o.batch_size, seed);
      PSFLOW_LOG(INFO) << "loaded " << in->mnist_train_.size() << " training and "
                       << in->test->size() << " test examples from " << dir << "; shard ["
                       << shard.begin << ", " << shard.end << ")";
      break;
    }
    case models::DataKind::kCifar10: {
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
      in->train =
          std::make_unique<data::Cifar10TrainSource>(in->cifar_train_, shard, o.batch_size, seed);
      PSFLOW_LOG(INFO) << "loaded " << in->cifar_train_.size() << " training and "
                       << in->test->size() << " test images from " << o.data_path << "; shard ["
                       << shard.begin << ", " << shard.end << ")";
      break;
    }
    case models::DataKind::kPtb: {
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
      const std::span<const int32_t> shard =
          data::ShardIds(in->corpus->train, o.shard_index, o.num_shards);
      ASSIGN_OR_RETURN(in->train, data::PtbSource::Create(shard, o.batch_size, m.num_steps));
      // Evaluation needs one batch of valid (training shapes) and one word pair of test: found
      // out now, not after training.
      if (auto valid = data::PtbSource::Create(in->corpus->valid, o.batch_size, m.num_steps);
          !valid.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(o.data_path, "/ptb.valid.txt: ", valid.status().message()));
      }
      if (in->corpus->test.size() < 2) {
        return absl::InvalidArgumentError(
            absl::StrCat(o.data_path, "/ptb.test.txt: fewer than two words to evaluate on"));
      }
      PSFLOW_LOG(INFO) << "loaded " << in->corpus->train.size() << " training words ("
                       << shard.size() << " in this shard), " << in->corpus->valid.size()
                       << " valid, " << in->corpus->test.size() << " test; vocabulary "
                       << vocabulary << " from " << o.data_path;
      break;
    }
  }
  return in;
}

}  // namespace psflow
