// The seeds' models as psflow built them in C++ before they became model files (deploy/models):
// the reference those files must equal, field for field (worker/models/model_file_test.cc), and
// builders of variants for tests (a PTB model with a small vocabulary, dropout, two layers).
// Tests only: the product reads deploy/models (worker/models/model_zoo.h).
#ifndef PSFLOW_WORKER_MODELS_REFERENCE_MODELS_H_
#define PSFLOW_WORKER_MODELS_REFERENCE_MODELS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/models/model_definition.h"

namespace psflow::models {

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

// The seed's model, recipe and data as the C++ zoo defined them, by --model name and
// --model_config (ptb_lstm only). NOT_FOUND for an unknown name.
absl::StatusOr<ModelDefinition> ReferenceModel(absl::string_view name, absl::string_view config);

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_REFERENCE_MODELS_H_
