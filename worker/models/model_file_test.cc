#include "worker/models/model_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "worker/models/model_check.h"
#include "worker/models/model_zoo.h"
#include "worker/models/reference_models.h"
#include "worker/nn/backend.h"
#include "worker/nn/gradient_check.h"

namespace psflow::models {
namespace {

using ::testing::HasSubstr;

struct Seed {
  const char* model;
  const char* config;
};
const Seed kSeeds[] = {{"mnist_mlp", ""},     {"mnist_cnn", ""},      {"cifar10_cnn", ""},
                       {"ptb_lstm", "small"}, {"ptb_lstm", "medium"}, {"ptb_lstm", "large"},
                       {"ptb_lstm", "test"}};

// deploy/models' files are the models psflow built in C++ before (reference_models.h), field for
// field: network, initialisers, recipe, data and the test-set model.
TEST(SeedModelFiles, AreTheModelsTheCppZooBuilt) {
  for (const Seed& s : kSeeds) {
    SCOPED_TRACE(std::string(s.model) + " " + s.config);
    absl::StatusOr<ModelDefinition> file = FindModel(s.model, s.config);
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<ModelDefinition> ref = ReferenceModel(s.model, s.config);
    ASSERT_TRUE(ref.ok()) << ref.status();
    nn::ModelSpec expected = ref->spec;
    expected.layer_names.assign(expected.layers.size(), "");  // unnamed: the default names
    EXPECT_EQ(file->spec, expected);
    EXPECT_EQ(file->recipe, ref->recipe);
    EXPECT_EQ(file->data, ref->data);
    EXPECT_EQ(file->eval_sequence_length, ref->eval_sequence_length);
    EXPECT_EQ(file->eval_spec().input_shape, ref->eval_spec().input_shape);
    EXPECT_EQ(file->num_steps(), ref->num_steps());
  }
}

// Bit for bit: the same parameters, loss and gradients over three steps of SGD from the model
// file and from the C++ definition it replaces.
TEST(SeedModelFiles, TrainBitIdenticallyToTheCppModels) {
  for (const Seed& s : {Seed{"mnist_mlp", ""}, Seed{"cifar10_cnn", ""}, Seed{"ptb_lstm", "test"}}) {
    SCOPED_TRACE(s.model);
    const ModelDefinition file = FindModel(s.model, s.config).value();
    const ModelDefinition ref = ReferenceModel(s.model, s.config).value();
    auto backend = nn::MakeCpuBackend(1);
    const int64_t batch = 3;
    auto a = nn::Model::Create(file.spec, *backend, batch, 7);
    auto b = nn::Model::Create(ref.spec, *backend, batch, 7);
    ASSERT_TRUE(a.ok() && b.ok());
    (*a)->params().Initialize(11);
    (*b)->params().Initialize(11);
    const nn::GradientCheckInput in =
        nn::RandomInput(file.spec, batch, (*a)->labels_per_example(), 5,
                        file.language_model() ? file.spec.num_classes : 0);
    const nn::Batch x{in.inputs.data(), in.labels.data(), batch};
    for (int step = 0; step < 3; ++step) {
      absl::StatusOr<double> la = (*a)->ComputeGradients(x), lb = (*b)->ComputeGradients(x);
      ASSERT_TRUE(la.ok() && lb.ok());
      EXPECT_EQ(*la, *lb);
      for (nn::Model* m : {a->get(), b->get()}) {
        std::span<float> v = m->params().values();
        std::span<const float> g = m->params().grads();
        for (size_t i = 0; i < v.size(); ++i) v[i] -= 0.1f * g[i];
        m->params().ValuesChanged();
      }
      ASSERT_EQ((*a)->params().values().size(), (*b)->params().values().size());
      EXPECT_EQ(std::memcmp((*a)->params().values().data(), (*b)->params().values().data(),
                            (*a)->params().values().size_bytes()),
                0);
    }
  }
}

TEST(ModelFile, JsonIsReadAsYaml) {
  const absl::StatusOr<ModelDefinition> m = ParseModelFile(
      R"({"name": "tiny", "input": {"shape": [4]}, "classes": 3,
          "layers": [{"type": "dense", "name": "hidden", "units": 5}, {"type": "tanh"},
                     {"type": "dense", "name": "out", "units": 3, "in_features": 5}],
          "training": {"optimizer": "momentum", "momentum": 0.5, "learning_rate": 0.25,
                       "batch_size": 8, "epochs": 2},
          "data": {"format": "csv", "train": "t.csv", "label_column": "y", "header": false}})",
      "tiny.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->spec.LayerName(0), "hidden");
  EXPECT_EQ(m->spec.LayerName(1), "activation1");
  EXPECT_EQ(m->spec.LayerName(2), "out");
  EXPECT_EQ(m->recipe.optimizer, "momentum");
  EXPECT_EQ(m->recipe.momentum, 0.5f);
  EXPECT_EQ(m->recipe.learning_rate, 0.25f);
  EXPECT_EQ(m->recipe.batch_size, 8);
  EXPECT_EQ(m->recipe.epochs, 2);
  EXPECT_EQ(m->data.format, DataSpec::Format::kCsv);
  EXPECT_EQ(m->data.train, std::vector<std::string>{"t.csv"});
  EXPECT_EQ(m->data.test, std::vector<std::string>{"test.csv"});
  EXPECT_EQ(m->data.label_column, "y");
  EXPECT_FALSE(m->data.header);
  EXPECT_FALSE(m->language_model());
}

TEST(ModelFile, NamedLayersNameTheirParameters) {
  const ModelDefinition m = ParseModelFile(R"(
name: named
input: {shape: [6, 6, 2]}
classes: 4
layers:
  - {type: conv2d, name: c1, filters: 3, kernel_size: 3, padding: valid, in_channels: 2}
  - {type: flatten}
  - {type: dense, name: fc, units: 4, in_features: 48}
data: {format: npz, file: d.npz}
)",
                                           "named.yaml")
                                .value();
  auto backend = nn::MakeCpuBackend(1);
  auto model = nn::Model::Create(m.spec, *backend, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  std::vector<std::string> names;
  for (const nn::ParameterDesc& d : (*model)->params().descs()) names.push_back(d.name);
  EXPECT_EQ(names, (std::vector<std::string>{"c1/kernel", "c1/bias", "fc/kernel", "fc/bias"}));
  EXPECT_EQ(m.data.train, (std::vector<std::string>{"x_train", "y_train"}));
  EXPECT_EQ(m.data.test, (std::vector<std::string>{"x_test", "y_test"}));
}

// Every error is one line that names the file, the line, the layer and what is wrong.
TEST(ModelFile, ErrorsNameTheLayerTheOptionAndTheShapes) {
  const std::string head = "name: m\ninput: {shape: [28, 28, 1]}\nclasses: 10\n";
  const std::string data = "data: {format: mnist}\n";
  struct Case {
    std::string text;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"name: [", "m.yaml:1: not valid YAML or JSON"},
      {"name: " + std::string(3000, '{'),
       "m.yaml:1: not valid YAML or JSON: nested deeper than the YAML parser allows"},
      {"- 1\n", "m.yaml:1: model file: must be a map of options"},
      {head + data, "m.yaml:1: model file: layers is required"},
      {head + "layers:\n  - {type: dense, units: 10}\n", "m.yaml:1: model file: data is required"},
      {head + "layers:\n  - {type: dense}\n" + data,
       "m.yaml:5: layer 0 (dense): units is required"},
      // A typo of a required option is told as the typo, not as the option missing.
      {head + "layers:\n  - {type: dense, unit: 10}\n" + data,
       "m.yaml:5: layer 0 (dense): unknown option \"unit\" (known: type, name, units, in_features, "
       "kernel_init, bias_init, weight_decay)"},
      {head + "layers:\n  - {type: dense, units: 10}\ndata: {fromat: csv}\n",
       "data: unknown option \"fromat\" (known: format, file, train, valid, test, label_column, "
       "header, scale)"},
      {head + "layer:\n  - {type: dense, units: 10}\n" + data,
       "m.yaml:4: model file: unknown option \"layer\" (known: name, input, classes, layers, "
       "loss, training, data, evaluation)"},
      {head + "layers:\n  - {type: dense, units: 10, unit: 10}\n" + data,
       "m.yaml:5: layer 0 (dense): unknown option \"unit\" (known: type, name, units, in_features, "
       "kernel_init, bias_init, weight_decay)"},
      {head + "layers:\n  - {type: densse, units: 10}\n" + data,
       "m.yaml:5: layer 0: type must be one of dense, conv2d, max_pool, lrn, flatten, dropout, "
       "embedding, lstm, relu, sigmoid, tanh, got \"densse\""},
      {head + "layers:\n  - {type: dense, units: 0}\n" + data,
       "m.yaml:5: layer 0 (dense): units must be in [1, 2147483647], got 0"},
      {head + "layers:\n  - {type: dense, units: 2.5}\n" + data,
       "m.yaml:5: layer 0 (dense): units must be an integer, got \"2.5\""},
      {head + "layers:\n  - {type: dense, units: 10, kernel_init: {normal: 1}}\n" + data,
       "m.yaml:5: layer 0 (dense): kernel_init must be zeros, glorot_uniform"},
      {head + "layers:\n  - {type: dropout, keep_prob: 1.5}\n  - {type: dense, units: 10}\n" + data,
       "m.yaml:5: layer 0 (dropout): keep_prob must be in (0, 1], got 1.5"},
      {head +
           "layers:\n  - {type: conv2d, name: c1, filters: 8, kernel_size: 5, padding: valid}\n"
           "  - {type: max_pool, size: 2}\n"
           "  - {type: conv2d, name: c2, filters: 8, kernel_size: 15, padding: valid}\n"
           "  - {type: flatten}\n  - {type: dense, units: 10}\n" +
           data,
       "m.yaml: layer 2 (conv2d \"c2\"): input 12x12x8, kernel 15x15, stride 1, padding valid "
       "leaves nothing (padding valid needs at least 15x15) (the output of layer 1 (max_pool "
       "\"maxpool1\"))"},
      {head +
           "layers:\n  - {type: conv2d, filters: 8, kernel_size: 5}\n"
           "  - {type: flatten}\n  - {type: dense, name: fc, units: 10, in_features: 1024}\n" +
           data,
       "m.yaml: layer 2 (dense \"fc\"): in_features 1024 does not match the 6272 values per "
       "position that layer 1 (flatten \"flatten1\") produces (6272)"},
      {head +
           "layers:\n  - {type: conv2d, filters: 8, kernel_size: 5, in_channels: 3}\n"
           "  - {type: flatten}\n  - {type: dense, units: 10}\n" +
           data,
       "m.yaml: layer 0 (conv2d \"conv2d0\"): in_channels 3 does not match the 1 channels that the "
       "input has (28x28x1)"},
      {head + "layers:\n  - {type: dense, units: 10}\n" + data,
       "m.yaml: the model's output per example is 28x28x10, but data format mnist has one label "
       "per example: add a flatten before the last dense layer"},
      {head + "layers:\n  - {type: flatten}\n  - {type: dense, units: 7}\n" + data,
       "m.yaml: the last layer, layer 1 (dense \"dense1\"), produces 7 values per prediction "
       "(output 7), but the model has classes: 10 (its logits)"},
      {head + "layers:\n  - {type: flatten, name: \"a b\"}\n  - {type: dense, units: 10}\n" + data,
       "m.yaml:5: layer 0 (flatten \"a b\"): name \"a b\" must be 1 to 64 letters, digits, '_', "
       "'-' or '.' (it names the layer's parameters)"},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
       "data: {format: csv}\n\"a\\nkey\": 1\n",
       "m.yaml:7: model file: unknown option \"a\\x0akey\""},  // one line, the break escaped
      {head + "layers:\n  - {type: flatten, name: a}\n  - {type: dense, name: a, units: 10}\n" +
           data,
       "m.yaml: layer 1 (dense \"a\"): another layer before it has the name \"a\""},
      {head + "layers:\n  - {type: flatten}\n  - {type: lstm, units: 10}\n" + data,
       "m.yaml: layer 1 (lstm \"lstm1\"): runs over a sequence [time, features], but its input is "
       "784"},
      {"name: m\ninput: {shape: [32, 32, 3]}\nclasses: 10\nlayers:\n  - {type: flatten}\n"
       "  - {type: dense, units: 10}\ndata: {format: mnist}\n",
       "m.yaml: data format mnist gives float32 examples of 28x28x1 (784 values), but the input is "
       "32x32x3"},
      {"name: m\ninput: {shape: [20]}\nclasses: 100\nlayers:\n  - {type: dense, units: 100}\n"
       "data: {format: tokens}\n",
       "m.yaml: data format tokens is a language model's token stream: input type must be "
       "token_ids"},
      {"name: m\ninput: {shape: [20], type: token_ids}\nclasses: 100\nlayers:\n"
       "  - {type: dense, units: 100}\ndata: {format: tokens}\n",
       "m.yaml: input type token_ids needs an embedding as layer 0 to read the ids"},
      {"name: m\ninput: {shape: [5], type: token_ids}\nclasses: 100\nlayers:\n"
       "  - {type: embedding, vocab_size: 10, dim: 4}\n  - {type: lstm, units: 4}\n"
       "  - {type: dense, units: 100}\ndata: {format: tokens}\n",
       "m.yaml: a language model's embedding vocab_size (10) is smaller than its classes (100): "
       "the token ids are its labels too, up to classes - 1, and its inputs"},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
       "data: {format: csv}\ntraining: {learning_rate: -1}\n",
       "m.yaml:7: training: learning_rate must be > 0, got -1"},
      {"name: m\ninput: {shape: [2147483647, 2147483647, 2147483647]}\nclasses: 3\nlayers:\n"
       "  - {type: flatten}\n  - {type: dense, units: 3}\ndata: {format: csv}\n",
       "m.yaml: input: shape 2147483647x2147483647x2147483647 holds more than 2147483648 values "
       "per example"},
      {"name: m\ninput: {shape: [8]}\nclasses: 3\nlayers:\n  - {type: dense, units: 2147483647}\n"
       "  - {type: dense, units: 2147483647}\n  - {type: dense, units: 3}\ndata: {format: csv}\n",
       "m.yaml: layer 1 (dense \"dense1\"): brings the model over 68719476736 parameters (256 GiB "
       "as float32), more than psflow holds"},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
       "data: {format: csv}\ntraining: {optimizer: adamw}\n",
       "m.yaml:7: training: unknown optimizer"},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3, units: "
       "500}\n"
       "data: {format: csv}\n",
       "m.yaml:5: layer 0 (dense): option \"units\" given twice"},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
       "data: {format: csv}\ntraining: {batch_size: 2}\ntraining: {batch_size: 7}\n",
       "m.yaml:8: model file: option \"training\" given twice"},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
       "data: {format: csv, train: [a.csv, b.csv]}\n",
       "m.yaml:6: data (csv): train must name one file, got 2"},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
       "data: {format: parquet}\n",
       "m.yaml:6: data (parquet): format must be one of mnist, cifar10, ptb, npz, npy, csv, "
       "tokens, got \"parquet\""},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
       "data: {format: csv}\nloss: mse\n",
       "m.yaml:7: model file: loss must be one of softmax_cross_entropy, got \"mse\""},
      {"name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n  - {type: dense, units: 3}\n"
       "data: {format: csv}\nepochs: 3\n",
       "m.yaml:7: model file: unknown option \"epochs\" (known: name, input, classes, layers, "
       "loss, "
       "training, data, evaluation)"},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<ModelDefinition> m = ParseModelFile(c.text, "m.yaml");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(m.status().message()), HasSubstr(c.message)) << c.text;
    EXPECT_EQ(std::string(m.status().message()).find('\n'), std::string::npos);
  }
}

TEST(ModelFile, MissingFileIsNotFound) {
  const absl::StatusOr<ModelDefinition> m = ReadModelFile("/nonexistent/model.yaml");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("/nonexistent/model.yaml"));
}

// What `psflow validate` prints for the seed CNN: each layer's shapes and parameters.
TEST(ModelCheck, ReportsShapesAndParametersOfTheMnistCnn) {
  const ModelDefinition m = FindModel("mnist_cnn", "").value();
  const std::vector<LayerReport> r = CheckModel(m.spec, false).value();
  ASSERT_EQ(r.size(), 10u);
  EXPECT_EQ(r[0].label, "layer 0 (conv2d \"conv2d0\")");
  EXPECT_EQ(ShapeText(r[0].output), "28x28x32");
  EXPECT_EQ(r[0].detail, "kernel 5x5, stride 1, padding same, 32 filters");
  EXPECT_EQ(r[0].parameters, 5 * 5 * 1 * 32 + 32);
  EXPECT_EQ(ShapeText(r[2].output), "14x14x32");
  EXPECT_EQ(ShapeText(r[5].output), "7x7x64");
  EXPECT_EQ(ShapeText(r[6].output), "3136");
  EXPECT_EQ(r[7].parameters, 3136 * 1024 + 1024);
  int64_t total = 0;
  for (const LayerReport& l : r) total += l.parameters;
  EXPECT_EQ(total, 3274634);  // deep MNIST's variable count
}

}  // namespace
}  // namespace psflow::models
