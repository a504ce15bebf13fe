// A model as a worker trains it: the network (nn::ModelSpec), how it trains (Recipe: the
// hyper-parameters that flags left unset take), and the data it reads (DataSpec). Model files
// (worker/models/model_file.h) describe one; the seeds' models are model files too
// (deploy/models/, worker/models/model_zoo.h).
#ifndef PSFLOW_WORKER_MODELS_MODEL_DEFINITION_H_
#define PSFLOW_WORKER_MODELS_MODEL_DEFINITION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "core/learning_rate_schedule.h"
#include "worker/nn/model_spec.h"

namespace psflow::models {

struct Recipe {
  std::string optimizer = "sgd";
  float learning_rate = 0.001f;
  float momentum = 0;  // the momentum optimizers'
  int64_t batch_size = 100;
  int epochs = 1;
  float max_grad_norm = 0;  // 0: no clipping
  LearningRateSchedule schedule;

  bool operator==(const Recipe&) const = default;
};

// Where the examples come from. File names are relative to the worker's --data_path (absolute
// ones are taken as they are).
struct DataSpec {
  enum class Format {
    kMnist,    // MNIST-format idx files (worker/data/mnist.h)
    kCifar10,  // CIFAR-10's binary version (worker/data/cifar10.h)
    kPtb,      // ptb.{train,valid,test}.txt (worker/data/ptb.h)
    kNpz,      // one .npz archive: `file`, arrays train = {features, labels}, test likewise
    kNpy,      // .npy files: train = {features file, labels file}, test likewise
    kCsv,      // train and test: one .csv file each; label_column names the label
    kTokens,   // language models: token ids, train, valid and test, as text or 1-D .npy
  };
  Format format = Format::kMnist;
  std::string file;                 // kNpz: the archive
  std::vector<std::string> train;   // kNpz/kNpy: {features, labels}; kCsv/kTokens: {file}
  std::vector<std::string> test;    // as train; empty: no evaluation
  std::vector<std::string> valid;   // kTokens: {file}
  std::string label_column = "-1";  // kCsv: a header's name, or an index (-1: the last column)
  bool header = true;               // kCsv: whether the first row names the columns
  float scale = 1;                  // every feature multiplied by it (e.g. 1/255 for bytes)

  bool operator==(const DataSpec&) const = default;
};

// "mnist", "npz", ...: the format as model files spell it.
const char* DataFormatName(DataSpec::Format format);

struct ModelDefinition {
  nn::ModelSpec spec;
  Recipe recipe;
  DataSpec data;
  // Language models: the sequence length the test-set model runs (the seeds' PTB evaluation
  // runs one word per step, batch 1).
  int eval_sequence_length = 0;
  // The model file's text, as read: what an export writes beside the weights.
  std::string source;

  // Reads token-id sequences (kPtb, kTokens) and predicts the next token at every time step.
  bool language_model() const {
    return data.format == DataSpec::Format::kPtb || data.format == DataSpec::Format::kTokens;
  }
  // The vocab_size of the embedding reading the input's token ids (layer 0; an input of type
  // token_ids has one there, and only it); 0 for float32 input.
  int64_t input_vocabulary() const {
    const auto* e = spec.layers.empty() ? nullptr : std::get_if<nn::EmbeddingSpec>(&spec.layers[0]);
    return e == nullptr ? 0 : e->vocab_size;
  }
  // Time steps per training example (truncated BPTT length); 0 for classifiers.
  int num_steps() const { return language_model() ? static_cast<int>(spec.input_shape.at(0)) : 0; }
  // The test-set model: the spec with eval_sequence_length time steps (language models), else
  // the spec itself.
  nn::ModelSpec eval_spec() const;
};

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_MODEL_DEFINITION_H_
