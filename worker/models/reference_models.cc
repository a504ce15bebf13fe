#include "worker/models/reference_models.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::models {
namespace {

using nn::ActivationKind;
using nn::ActivationSpec;
using nn::Initializer;

const std::vector<PtbConfig>& PtbConfigs() {
  // ptb_word_lm.py's SmallConfig, MediumConfig, LargeConfig and TestConfig.
  static const auto* configs = new std::vector<PtbConfig>{
      {"small", 0.1f, 1.0f, 5, 2, 20, 200, 4, 13, 1.0f, 0.5f, 20, 10000},
      {"medium", 0.05f, 1.0f, 5, 2, 35, 650, 6, 39, 0.5f, 0.8f, 20, 10000},
      {"large", 0.04f, 1.0f, 10, 2, 35, 1500, 14, 55, 0.35f, 1 / 1.15f, 20, 10000},
      {"test", 0.1f, 1.0f, 1, 1, 2, 2, 1, 1, 1.0f, 0.5f, 20, 10000},
  };
  return *configs;
}

}  // namespace

absl::StatusOr<PtbConfig> PtbConfigByName(absl::string_view name) {
  for (const PtbConfig& c : PtbConfigs()) {
    if (c.name == name) return c;
  }
  return absl::NotFoundError(absl::StrCat("unknown ptb_lstm config \"", name, "\""));
}

nn::ModelSpec MnistMlp() {
  return nn::ModelSpec{
      .name = "mnist_mlp",
      .input_shape = {784},
      .num_classes = 10,
      .layers = {nn::DenseSpec{100}, ActivationSpec{ActivationKind::kSigmoid}, nn::DenseSpec{10}},
  };
}

nn::ModelSpec MnistCnn() {
  // Deep MNIST's weight_variable / bias_variable: truncated normal 0.1, constant 0.1.
  const Initializer w = Initializer::TruncatedNormal(0.1f), b = Initializer::Constant(0.1f);
  const ActivationSpec relu{ActivationKind::kRelu};
  return nn::ModelSpec{
      .name = "mnist_cnn",
      .input_shape = {28, 28, 1},
      .num_classes = 10,
      .layers = {nn::Conv2DSpec{32, 5, 1, nn::Padding::kSame, w, b}, relu,
                 nn::MaxPoolSpec{2, 2, nn::Padding::kSame},
                 nn::Conv2DSpec{64, 5, 1, nn::Padding::kSame, w, b}, relu,
                 nn::MaxPoolSpec{2, 2, nn::Padding::kSame}, nn::FlattenSpec{},
                 nn::DenseSpec{1024, w, b}, relu, nn::DenseSpec{10, w, b}},
  };
}

nn::ModelSpec Cifar10Cnn() {
  // cifar10.py's inference(): initialisers, weight decay and LRN parameters as there.
  const ActivationSpec relu{ActivationKind::kRelu};
  const nn::LrnSpec lrn{4, 1.0f, 0.001f / 9.0f, 0.75f};
  const nn::MaxPoolSpec pool{3, 2, nn::Padding::kSame};
  return nn::ModelSpec{
      .name = "cifar10_cnn",
      .input_shape = {24, 24, 3},
      .num_classes = 10,
      .layers = {nn::Conv2DSpec{64, 5, 1, nn::Padding::kSame, Initializer::TruncatedNormal(5e-2f),
                                Initializer::Zeros()},
                 relu, pool, lrn,
                 nn::Conv2DSpec{64, 5, 1, nn::Padding::kSame, Initializer::TruncatedNormal(5e-2f),
                                Initializer::Constant(0.1f)},
                 relu, lrn, pool, nn::FlattenSpec{},
                 nn::DenseSpec{384, Initializer::TruncatedNormal(0.04f),
                               Initializer::Constant(0.1f), 0.004f},
                 relu,
                 nn::DenseSpec{192, Initializer::TruncatedNormal(0.04f),
                               Initializer::Constant(0.1f), 0.004f},
                 relu,
                 nn::DenseSpec{10, Initializer::TruncatedNormal(1.0f / 192.0f),
                               Initializer::Zeros()}},
  };
}

nn::ModelSpec PtbLstm(const PtbConfig& c, int num_steps) {
  const Initializer init = Initializer::Uniform(c.init_scale);
  nn::ModelSpec spec{.name = absl::StrCat("ptb_lstm_", c.name),
                     .input_shape = {num_steps},
                     .num_classes = c.vocab_size,
                     .layers = {}};
  spec.layers.push_back(nn::EmbeddingSpec{c.vocab_size, c.hidden_size, init});
  if (c.keep_prob < 1) spec.layers.push_back(nn::DropoutSpec{c.keep_prob});
  for (int l = 0; l < c.num_layers; ++l) {
    spec.layers.push_back(nn::LstmSpec{c.hidden_size, 0.0f, init});
    if (c.keep_prob < 1) spec.layers.push_back(nn::DropoutSpec{c.keep_prob});
  }
  spec.layers.push_back(nn::DenseSpec{c.vocab_size, init, init});
  return spec;
}

absl::StatusOr<ModelDefinition> ReferenceModel(absl::string_view name, absl::string_view config) {
  ModelDefinition m;
  if (name == "mnist_mlp") {
    m.spec = MnistMlp();
    m.recipe = Recipe{.optimizer = "sgd",
                      .learning_rate = 0.001f,
                      .batch_size = 100,
                      .epochs = 20,
                      .max_grad_norm = 0,
                      .schedule = {}};
  } else if (name == "mnist_cnn") {
    m.spec = MnistCnn();
    m.recipe = Recipe{.optimizer = "adam",
                      .learning_rate = 1e-3f,
                      .batch_size = 128,
                      .epochs = 5,
                      .max_grad_norm = 0,
                      .schedule = {}};
  } else if (name == "cifar10_cnn") {
    m.spec = Cifar10Cnn();
    m.data.format = DataSpec::Format::kCifar10;
    m.recipe =
        Recipe{.optimizer = "sgd",
               .learning_rate = 0.1f,
               .batch_size = 100,
               .epochs = 10,
               .max_grad_norm = 0,
               .schedule = {.decay = 0.1f, .first_decay_epoch = 350, .decay_every_epochs = 350}};
  } else if (name == "ptb_lstm") {
    auto c = PtbConfigByName(config.empty() ? "small" : config);
    if (!c.ok()) return c.status();
    m.spec = PtbLstm(*c, c->num_steps);
    m.eval_sequence_length = 1;
    m.data.format = DataSpec::Format::kPtb;
    m.recipe = Recipe{
        .optimizer = "sgd",
        .learning_rate = c->learning_rate,
        .batch_size = c->batch_size,
        .epochs = c->max_max_epoch,
        .max_grad_norm = c->max_grad_norm,
        .schedule = {
            .decay = c->lr_decay, .first_decay_epoch = c->max_epoch, .decay_every_epochs = 1}};
  } else {
    return absl::NotFoundError(absl::StrCat("unknown model \"", name, "\""));
  }
  return m;
}

}  // namespace psflow::models
