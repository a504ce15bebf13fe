// The models of the distributed-TensorFlow seeds, by the name the worker's --model flag takes,
// each with the hyper-parameters its seed trained it with (the defaults of flags left unset).
#ifndef PSFLOW_WORKER_MODELS_MODEL_ZOO_H_
#define PSFLOW_WORKER_MODELS_MODEL_ZOO_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/learning_rate_schedule.h"
#include "worker/nn/model.h"

namespace psflow::models {

struct Recipe {
  std::string optimizer = "sgd";
  float learning_rate = 0.001f;
  int64_t batch_size = 100;
  int epochs = 1;
  float max_grad_norm = 0;  // 0: no clipping
  LearningRateSchedule schedule;
};

enum class DataKind { kMnist, kCifar10, kPtb };

struct ZooModel {
  nn::ModelSpec spec;
  Recipe recipe;
  DataKind data = DataKind::kMnist;
  int num_steps = 0;        // language models: time steps per example (truncated BPTT length)
  nn::ModelSpec eval_spec;  // language models: the test-set model (batch 1, one step, the seed's)
};

// Seed 000's configurations (ptb_word_lm.py), by name: small, medium, large, test.
struct PtbConfig {
  std::string name;
  float init_scale = 0;
  float learning_rate = 0;
  float max_grad_norm = 0;
  int num_layers = 0;
  int num_steps = 0;
  int hidden_size = 0;
  int max_epoch = 0;      // epochs at the initial learning rate
  int max_max_epoch = 0;  // epochs in all
  float keep_prob = 1;
  float lr_decay = 1;
  int batch_size = 0;
  int vocab_size = 0;
};
absl::StatusOr<PtbConfig> PtbConfigByName(absl::string_view name);
std::vector<std::string> PtbConfigNames();

// Seed 001: 784-100-10, sigmoid hidden layer; SGD 0.001, batch 100, 20 epochs.
nn::ModelSpec MnistMlp();
// Seed 002: conv 5x5x32 + ReLU, max-pool 2x2, conv 5x5x64 + ReLU, max-pool, dense 1024 + ReLU,
// dense 10 (TensorFlow's deep MNIST initialisers); Adam 1e-3, batch 128.
nn::ModelSpec MnistCnn();
// Seed 004: the TensorFlow CIFAR-10 tutorial network on 24x24x3 crops.
nn::ModelSpec Cifar10Cnn();
// Seed 000: embedding, num_layers LSTM layers (dropout when keep_prob < 1), softmax over the
// vocabulary at each of `num_steps` steps; every variable U(-init_scale, init_scale).
nn::ModelSpec PtbLstm(const PtbConfig& config, int num_steps);

// `config` names a PtbConfig for ptb_lstm and must be empty for the others. NOT_FOUND listing
// the known names when either is unknown.
absl::StatusOr<ZooModel> FindModel(absl::string_view name, absl::string_view config);
std::vector<std::string> ModelNames();

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_MODEL_ZOO_H_
