// The CPU layers of the CNN models (Conv2D, MaxPool, LRN, Flatten): forward values on hand-worked
// cases and against a direct convolution, backward against a direct convolution and finite
// differences (layer by layer, and through stacked models), output shapes and bad specs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <tuple>

#include "worker/backend/cpu/conv2d.h"
#include "worker/backend/cpu/flatten.h"
#include "worker/backend/cpu/lrn.h"
#include "worker/backend/cpu/max_pool.h"
#include "worker/nn/backend.h"
#include "worker/nn/gradient_check.h"
#include "worker/nn/model.h"

namespace psflow::cpu {
namespace {

using nn::Padding;
using nn::Shape;

// One layer built for `input` with its own parameters, run on host vectors.
struct Harness {
  std::unique_ptr<nn::Layer> layer;
  std::unique_ptr<nn::ParameterSet> params = std::make_unique<nn::ParameterSet>();
  Shape input;
  Shape output;

  int64_t in_size() const { return nn::NumElements(input); }
  int64_t out_size() const { return nn::NumElements(output); }
  nn::RunContext context() const { return nn::RunContext{params.get(), true, 0}; }

  std::vector<float> Forward(std::vector<float>& x) {
    const int64_t batch = static_cast<int64_t>(x.size()) / in_size();
    std::vector<float> y(static_cast<size_t>(batch * out_size()));
    layer->Forward(context(), {x.data(), batch, in_size()}, {y.data(), batch, out_size()});
    return y;
  }
  // Forward then Backward with dy; returns dx. Parameter gradients are left in params->grads().
  std::vector<float> Backward(std::vector<float>& x, std::vector<float>& dy) {
    std::vector<float> y = Forward(x);
    const int64_t batch = static_cast<int64_t>(x.size()) / in_size();
    // dx is written, not added to: start it from garbage.
    std::vector<float> dx(x.size(), std::numeric_limits<float>::quiet_NaN());
    const nn::Matrix dx_view{dx.data(), batch, in_size()};
    layer->Backward(context(), {x.data(), batch, in_size()}, {y.data(), batch, out_size()},
                    {dy.data(), batch, out_size()}, &dx_view);
    return dx;
  }
};

Harness Build(std::unique_ptr<nn::Layer> layer, const Shape& input, int64_t max_batch) {
  Harness h;
  h.layer = std::move(layer);
  h.input = input;
  auto out = h.layer->Build(input, nn::BuildContext{h.params.get(), max_batch, 1});
  EXPECT_TRUE(out.ok()) << out.status();
  h.output = out.value_or(Shape{});
  h.params->Finalize();
  return h;
}

absl::StatusOr<Shape> BuildStatus(const nn::LayerSpec& spec, const Shape& input) {
  auto backend = nn::MakeCpuBackend(1);
  auto layer = backend->MakeLayer(spec, "layer");
  if (!layer.ok()) return layer.status();
  nn::ParameterSet params;
  return (*layer)->Build(input, nn::BuildContext{&params, 4, 1});
}

std::vector<float> Uniform(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& f : v) f = u(rng);
  return v;
}

void ExpectNear(const std::vector<float>& actual, const std::vector<float>& expected,
                double relative) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i], expected[i], relative * std::max(1.0, std::fabs(double{expected[i]})))
        << "at " << i;
  }
}

// ---------------------------------------------------------------------------------------------
// Conv2D forward on a hand-worked 4x4x2 input.
//
// Channel 0 holds 1..16 row-major, channel 1 a checkerboard (h + w) % 2. Filter 0 sums channel 0
// over the window (box sums); filter 1 is 10 * channel 1 at the window's centre plus channel 0 at
// its top-left corner. Bias {0.5, -1}.

Harness HandConv(int stride, Padding padding) {
  Harness h = Build(
      std::make_unique<Conv2D>(
          nn::Conv2DSpec{.filters = 2, .kernel_size = 3, .stride = stride, .padding = padding},
          "conv"),
      {4, 4, 2}, 1);
  std::span<float> kernel = h.params->value(0);  // [kh][kw][c][f]
  auto at = [&](int kh, int kw, int c, int f) -> float& {
    return kernel[static_cast<size_t>(((kh * 3 + kw) * 2 + c) * 2 + f)];
  };
  for (int kh = 0; kh < 3; ++kh) {
    for (int kw = 0; kw < 3; ++kw) at(kh, kw, 0, 0) = 1;
  }
  at(1, 1, 1, 1) = 10;
  at(0, 0, 0, 1) = 1;
  h.params->value(1)[0] = 0.5f;
  h.params->value(1)[1] = -1.0f;
  return h;
}

std::vector<float> HandConvInput() {
  std::vector<float> x;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      x.push_back(static_cast<float>(4 * r + c + 1));
      x.push_back(static_cast<float>((r + c) % 2));
    }
  }
  return x;
}

TEST(Conv2D, SameStrideOnePadsOneEachSide) {
  Harness h = HandConv(1, Padding::kSame);
  EXPECT_EQ(h.output, (Shape{4, 4, 2}));
  std::vector<float> x = HandConvInput();
  // Interleaved {filter 0, filter 1} per output position, row-major.
  const std::vector<float> expected = {14.5, -1, 24.5, 9,  30.5, -1, 22.5, 9,   //
                                       33.5, 9,  54.5, 0,  63.5, 11, 45.5, 2,   //
                                       57.5, -1, 90.5, 14, 99.5, 5,  69.5, 16,  //
                                       46.5, 9,  72.5, 8,  78.5, 19, 54.5, 10};
  ExpectNear(h.Forward(x), expected, 1e-6);
}

TEST(Conv2D, SameStrideTwoPadsAfterLikeTensorFlow) {
  // out = 2, pad_total = 1: no padding before, one row and column after.
  Harness h = HandConv(2, Padding::kSame);
  EXPECT_EQ(h.output, (Shape{2, 2, 2}));
  std::vector<float> x = HandConvInput();
  ExpectNear(h.Forward(x), {54.5, 0, 45.5, 2, 72.5, 8, 54.5, 10}, 1e-6);
}

TEST(Conv2D, ValidStrideOne) {
  Harness h = HandConv(1, Padding::kValid);
  EXPECT_EQ(h.output, (Shape{2, 2, 2}));
  std::vector<float> x = HandConvInput();
  ExpectNear(h.Forward(x), {54.5, 0, 63.5, 11, 90.5, 14, 99.5, 5}, 1e-6);
}

TEST(Conv2D, ValidStrideTwo) {
  Harness h = HandConv(2, Padding::kValid);
  EXPECT_EQ(h.output, (Shape{1, 1, 2}));
  std::vector<float> x = HandConvInput();
  ExpectNear(h.Forward(x), {54.5, 0}, 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Conv2D against a direct convolution, forward and backward, with several chunks per batch.

struct ConvCase {
  int64_t h, w, c;
  int filters, k, stride;
  Padding padding;
};

// TensorFlow's geometry written out again: out size and padding before.
std::pair<int64_t, int64_t> Geometry(int64_t in, int k, int stride, Padding padding) {
  if (padding == Padding::kValid) return {(in - k + stride) / stride, 0};
  const int64_t out = (in + stride - 1) / stride;
  return {out, std::max<int64_t>((out - 1) * stride + k - in, 0) / 2};
}

struct DirectConv {
  ConvCase cc;
  int64_t oh, ow, pt, pl;

  explicit DirectConv(const ConvCase& c) : cc(c) {
    std::tie(oh, pt) = Geometry(c.h, c.k, c.stride, c.padding);
    std::tie(ow, pl) = Geometry(c.w, c.k, c.stride, c.padding);
  }
  // Calls f(x index, kernel index, y index) for every product of the convolution.
  template <class F>
  void ForEachProduct(int64_t batch, F f) const {
    for (int64_t e = 0; e < batch; ++e) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          for (int64_t kh = 0; kh < cc.k; ++kh) {
            for (int64_t kw = 0; kw < cc.k; ++kw) {
              const int64_t r = i * cc.stride - pt + kh, s = j * cc.stride - pl + kw;
              if (r < 0 || r >= cc.h || s < 0 || s >= cc.w) continue;
              for (int64_t ci = 0; ci < cc.c; ++ci) {
                for (int64_t fo = 0; fo < cc.filters; ++fo) {
                  f(((e * cc.h + r) * cc.w + s) * cc.c + ci,
                    ((kh * cc.k + kw) * cc.c + ci) * cc.filters + fo,
                    ((e * oh + i) * ow + j) * cc.filters + fo);
                }
              }
            }
          }
        }
      }
    }
  }
};

void CheckAgainstDirect(Harness& h, const ConvCase& cc, int64_t batch) {
  SCOPED_TRACE(testing::Message() << cc.h << "x" << cc.w << "x" << cc.c << " k" << cc.k << " s"
                                  << cc.stride
                                  << (cc.padding == Padding::kSame ? " SAME" : " VALID"));
  const DirectConv direct(cc);
  ASSERT_EQ(h.output, (Shape{direct.oh, direct.ow, cc.filters}));
  std::span<float> w = h.params->value(0), b = h.params->value(1);
  const std::vector<float> w_values = Uniform(static_cast<int64_t>(w.size()), 1);
  const std::vector<float> b_values = Uniform(cc.filters, 2);
  std::copy(w_values.begin(), w_values.end(), w.begin());
  std::copy(b_values.begin(), b_values.end(), b.begin());
  std::vector<float> x = Uniform(batch * h.in_size(), 3);
  std::vector<float> dy = Uniform(batch * h.out_size(), 4);

  std::vector<double> y(static_cast<size_t>(batch * h.out_size()));
  for (size_t i = 0; i < y.size(); ++i) y[i] = b_values[i % static_cast<size_t>(cc.filters)];
  std::vector<double> dw(w.size()), dx(x.size()), db(b.size());
  direct.ForEachProduct(batch, [&](int64_t xi, int64_t wi, int64_t yi) {
    y[yi] += double{x[xi]} * w_values[wi];
    dw[wi] += double{x[xi]} * dy[yi];
    dx[xi] += double{w_values[wi]} * dy[yi];
  });
  for (size_t i = 0; i < dy.size(); ++i) db[i % static_cast<size_t>(cc.filters)] += dy[i];

  ExpectNear(h.Forward(x), {y.begin(), y.end()}, 1e-4);
  h.params->ZeroGrads();
  ExpectNear(h.Backward(x, dy), {dx.begin(), dx.end()}, 1e-4);
  const std::span<const float> gw = h.params->grad(0), gb = h.params->grad(1);
  ExpectNear({gw.begin(), gw.end()}, {dw.begin(), dw.end()}, 1e-4);
  ExpectNear({gb.begin(), gb.end()}, {db.begin(), db.end()}, 1e-4);
}

TEST(Conv2D, MatchesDirectConvolutionOverSeveralChunks) {
  const ConvCase cases[] = {
      {9, 11, 3, 4, 3, 1, Padding::kSame},  {9, 11, 3, 4, 3, 2, Padding::kSame},
      {9, 11, 3, 4, 3, 1, Padding::kValid}, {9, 11, 3, 4, 3, 2, Padding::kValid},
      {8, 7, 2, 5, 4, 1, Padding::kSame},  // even kernel: one more row of padding after
      {8, 7, 2, 5, 4, 3, Padding::kSame},   {8, 7, 2, 5, 5, 2, Padding::kValid},
      {6, 6, 4, 3, 1, 1, Padding::kSame},  // 1x1: patches are the input itself
  };
  for (const ConvCase& cc : cases) {
    const nn::Conv2DSpec spec{
        .filters = cc.filters, .kernel_size = cc.k, .stride = cc.stride, .padding = cc.padding};
    const DirectConv direct(cc);
    const int64_t col_per_example = direct.oh * direct.ow * cc.k * cc.k * cc.c;
    // Room for 3 examples: a batch of 8 runs as chunks of 3, 3 and 2.
    Harness h = Build(std::make_unique<Conv2D>(spec, "conv", nullptr, 3 * col_per_example + 1),
                      {cc.h, cc.w, cc.c}, 8);
    EXPECT_EQ(static_cast<Conv2D&>(*h.layer).examples_per_chunk(), 3);
    CheckAgainstDirect(h, cc, 8);
  }
}

TEST(Conv2D, DefaultWorkspaceChunksLargeBatches) {
  // 16x16x8 patches of 5x5: 51200 floats per example, so the default workspace holds 20.
  const ConvCase cc{16, 16, 8, 4, 5, 1, Padding::kSame};
  Harness h =
      Build(std::make_unique<Conv2D>(
                nn::Conv2DSpec{.filters = 4, .kernel_size = 5, .padding = Padding::kSame}, "conv"),
            {16, 16, 8}, 25);
  EXPECT_EQ(static_cast<Conv2D&>(*h.layer).examples_per_chunk(),
            Conv2D::kDefaultWorkspaceFloats / (16 * 16 * 5 * 5 * 8));
  EXPECT_LT(static_cast<Conv2D&>(*h.layer).examples_per_chunk(), 25);
  CheckAgainstDirect(h, cc, 25);
}

TEST(Conv2D, SmallBatchUsesOneChunk) {
  // A call may pass fewer rows than max_batch.
  const ConvCase cc{5, 5, 2, 3, 3, 1, Padding::kSame};
  Harness h =
      Build(std::make_unique<Conv2D>(
                nn::Conv2DSpec{.filters = 3, .kernel_size = 3, .padding = Padding::kSame}, "conv"),
            {5, 5, 2}, 64);
  EXPECT_EQ(static_cast<Conv2D&>(*h.layer).examples_per_chunk(), 64);
  CheckAgainstDirect(h, cc, 2);
}

TEST(Conv2D, DeclaresKernelAndBiasInTensorFlowLayout) {
  auto backend = nn::MakeCpuBackend(1);
  const nn::ModelSpec spec{
      .name = "cnn",
      .input_shape = {28, 28, 1},
      .num_classes = 10,
      .layers = {nn::Conv2DSpec{.filters = 32, .kernel_size = 5}, nn::MaxPoolSpec{},
                 nn::Conv2DSpec{.filters = 64, .kernel_size = 5}, nn::MaxPoolSpec{},
                 nn::FlattenSpec{}, nn::DenseSpec{.units = 10}}};
  auto model = nn::Model::Create(spec, *backend, 2);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& descs = (*model)->params().descs();
  ASSERT_EQ(descs.size(), 6u);
  EXPECT_EQ(descs[0].name, "conv2d0/kernel");
  EXPECT_EQ(descs[0].shape, (Shape{5, 5, 1, 32}));
  EXPECT_EQ(descs[1].shape, (Shape{32}));
  EXPECT_EQ(descs[2].shape, (Shape{5, 5, 32, 64}));
  EXPECT_EQ(descs[4].shape, (Shape{7 * 7 * 64, 10}));  // 28 -> 14 -> 7 under SAME pooling
}

TEST(Conv2D, OutputShapes) {
  auto shape = [](int k, int stride, Padding padding, Shape input) {
    return BuildStatus(
               nn::Conv2DSpec{.filters = 6, .kernel_size = k, .stride = stride, .padding = padding},
               input)
        .value_or(Shape{});
  };
  EXPECT_EQ(shape(5, 1, Padding::kSame, {28, 28, 1}), (Shape{28, 28, 6}));
  EXPECT_EQ(shape(3, 2, Padding::kSame, {7, 8, 2}), (Shape{4, 4, 6}));
  EXPECT_EQ(shape(3, 2, Padding::kValid, {7, 8, 2}), (Shape{3, 3, 6}));
  EXPECT_EQ(shape(7, 1, Padding::kValid, {7, 9, 2}), (Shape{1, 3, 6}));
}

TEST(Conv2D, RejectsBadSpecsAndInputs) {
  auto code = [](nn::Conv2DSpec spec, Shape input) {
    return BuildStatus(spec, input).status().code();
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(code({.filters = 0, .kernel_size = 3}, {8, 8, 1}), kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 0}, {8, 8, 1}), kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 3, .stride = 0}, {8, 8, 1}), kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 5, .padding = Padding::kValid}, {4, 8, 1}),
            kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 5, .padding = Padding::kValid}, {8, 4, 1}),
            kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 3}, {64}), kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 3}, {8, 8}), kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 3}, {2, 8, 8, 1}), kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 3}, {8, 8, 0}), kInvalid);
  EXPECT_EQ(code({.filters = 2, .kernel_size = 3}, {0, 8, 1}), kInvalid);
  // SAME takes kernels larger than the input.
  EXPECT_EQ(code({.filters = 2, .kernel_size = 5}, {4, 4, 1}), absl::StatusCode::kOk);
}

// ---------------------------------------------------------------------------------------------
// MaxPool.

// 4x4x1, all negative so that a padded zero would win if padding were taken as a value.
std::vector<float> HandPoolInput() {
  return {-5,  -3,  -8,   -1,   //
          -2,  -9,  -4,   -7,   //
          -6,  -12, -1.5, -15,  //
          -14, -11, -16,  -13};
}

Harness Pool(int window, int stride, Padding padding, Shape input) {
  return Build(std::make_unique<MaxPool>(
                   nn::MaxPoolSpec{.window = window, .stride = stride, .padding = padding}, "pool"),
               input, 2);
}

TEST(MaxPool, TwoByTwoValid) {
  Harness h = Pool(2, 2, Padding::kValid, {4, 4, 1});
  EXPECT_EQ(h.output, (Shape{2, 2, 1}));
  std::vector<float> x = HandPoolInput();
  ExpectNear(h.Forward(x), {-2, -1, -6, -1.5}, 0);
  std::vector<float> dy = {1, 2, 3, 4};
  ExpectNear(h.Backward(x, dy),
             {0, 0, 0, 2,  //
              1, 0, 0, 0,  //
              3, 0, 4, 0,  //
              0, 0, 0, 0},
             0);
}

TEST(MaxPool, ThreeByThreeStrideTwoSameOverlapsAndPadsAfter) {
  // out = 2, pad_total = 1: windows cover rows (and columns) 0..2 and 2..3 plus one padded row.
  Harness h = Pool(3, 2, Padding::kSame, {4, 4, 1});
  EXPECT_EQ(h.output, (Shape{2, 2, 1}));
  std::vector<float> x = HandPoolInput();
  ExpectNear(h.Forward(x), {-1.5, -1, -1.5, -1.5}, 0);
  // -1.5 at (2, 2) wins three overlapping windows: its gradients add up.
  std::vector<float> dy = {1, 2, 3, 4};
  ExpectNear(h.Backward(x, dy),
             {0, 0, 0, 2,  //
              0, 0, 0, 0,  //
              0, 0, 8, 0,  //
              0, 0, 0, 0},
             0);
}

TEST(MaxPool, SamePaddingNeverWinsAtBorders) {
  // 5x5 under 2x2/2 SAME: 3x3 outputs, the last row and column of windows half padding.
  Harness h = Pool(2, 2, Padding::kSame, {5, 5, 1});
  EXPECT_EQ(h.output, (Shape{3, 3, 1}));
  std::vector<float> x(25);
  for (int i = 0; i < 25; ++i) x[static_cast<size_t>(i)] = -1.0f - static_cast<float>(i);
  // Each window's maximum is its top-left input.
  ExpectNear(h.Forward(x), {-1, -3, -5, -11, -13, -15, -21, -23, -25}, 0);
}

TEST(MaxPool, TiesGoToTheFirstInWindowOrderPerChannel) {
  Harness h = Pool(2, 2, Padding::kValid, {2, 2, 2});
  // Channel 0 all equal; channel 1 largest at the last position.
  std::vector<float> x = {7, 1, 7, 2, 7, 3, 7, 4};
  ExpectNear(h.Forward(x), {7, 4}, 0);
  std::vector<float> dy = {5, 6};
  ExpectNear(h.Backward(x, dy), {5, 0, 0, 0, 0, 0, 0, 6}, 0);
}

TEST(MaxPool, OutputShapesAndBadSpecs) {
  auto build = [](int window, int stride, Padding padding, Shape input) {
    return BuildStatus(nn::MaxPoolSpec{.window = window, .stride = stride, .padding = padding},
                       input);
  };
  EXPECT_EQ(build(2, 2, Padding::kSame, {28, 28, 32}).value_or(Shape{}), (Shape{14, 14, 32}));
  EXPECT_EQ(build(3, 2, Padding::kSame, {24, 24, 64}).value_or(Shape{}), (Shape{12, 12, 64}));
  EXPECT_EQ(build(3, 2, Padding::kValid, {7, 6, 3}).value_or(Shape{}), (Shape{3, 2, 3}));
  EXPECT_EQ(build(2, 1, Padding::kSame, {3, 3, 3}).value_or(Shape{}), (Shape{3, 3, 3}));
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(build(0, 2, Padding::kSame, {4, 4, 1}).status().code(), kInvalid);
  EXPECT_EQ(build(2, 0, Padding::kSame, {4, 4, 1}).status().code(), kInvalid);
  EXPECT_EQ(build(3, 1, Padding::kValid, {2, 4, 1}).status().code(), kInvalid);
  EXPECT_EQ(build(2, 2, Padding::kSame, {16}).status().code(), kInvalid);
  EXPECT_EQ(build(2, 2, Padding::kSame, {4, 4}).status().code(), kInvalid);
  EXPECT_EQ(build(2, 2, Padding::kSame, {4, 0, 2}).status().code(), kInvalid);
}

// ---------------------------------------------------------------------------------------------
// LRN.

// TensorFlow's definition, written out per channel in double.
std::vector<float> LrnByFormula(const std::vector<float>& x, int64_t channels,
                                const nn::LrnSpec& s) {
  std::vector<float> y(x.size());
  for (size_t p = 0; p < x.size(); p += static_cast<size_t>(channels)) {
    for (int64_t c = 0; c < channels; ++c) {
      double sum = 0;
      for (int64_t d = c - s.depth_radius; d <= c + s.depth_radius; ++d) {
        if (d >= 0 && d < channels) sum += double{x[p + d]} * x[p + d];
      }
      y[p + c] = static_cast<float>(x[p + c] / std::pow(s.bias + s.alpha * sum, s.beta));
    }
  }
  return y;
}

TEST(Lrn, ForwardMatchesTensorFlowsFormula) {
  const nn::LrnSpec specs[] = {
      {.depth_radius = 1, .bias = 1, .alpha = 0.1f, .beta = 0.75f},
      {.depth_radius = 2, .bias = 2, .alpha = 0.5f, .beta = 0.6f},    // pow, not square roots
      {.depth_radius = 0, .bias = 1, .alpha = 1, .beta = 0.5f},       // a window of one channel
      {.depth_radius = 9, .bias = 1, .alpha = 0.001f, .beta = 1.0f},  // radius beyond the channels
  };
  for (const nn::LrnSpec& spec : specs) {
    Harness h = Build(std::make_unique<Lrn>(spec, "lrn"), {2, 1, 5}, 2);
    EXPECT_EQ(h.output, (Shape{2, 1, 5}));
    // Two positions of two examples: each position normalised over its own 5 channels.
    std::vector<float> x = {1,  -2, 3, 0.5, -1,   0,    4,     -0.25, 2,  1,  //
                            -3, 1,  1, 2,   0.1f, 0.3f, -0.7f, 5,     -2, 0};
    ExpectNear(h.Forward(x), LrnByFormula(x, 5, spec), 1e-6);
  }
}

TEST(Lrn, HandWorkedValue) {
  // x = {1, 2, 3}, radius 1, bias 1, alpha 0.1, beta 1: n = {1.5, 2.4, 2.3}.
  Harness h = Build(std::make_unique<Lrn>(
                        nn::LrnSpec{.depth_radius = 1, .bias = 1, .alpha = 0.1f, .beta = 1}, "lrn"),
                    {3}, 1);
  std::vector<float> x = {1, 2, 3};
  ExpectNear(h.Forward(x), {1 / 1.5f, 2 / 2.4f, 3 / 2.3f}, 1e-6);
}

TEST(Lrn, RejectsBadSpecs) {
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(BuildStatus(nn::LrnSpec{.depth_radius = -1}, {2, 2, 4}).status().code(), kInvalid);
  EXPECT_EQ(BuildStatus(nn::LrnSpec{.bias = 0}, {2, 2, 4}).status().code(), kInvalid);
  EXPECT_EQ(BuildStatus(nn::LrnSpec{.alpha = -1}, {2, 2, 4}).status().code(), kInvalid);
  EXPECT_EQ(BuildStatus(nn::LrnSpec{}, {}).status().code(), kInvalid);
}

// ---------------------------------------------------------------------------------------------
// Flatten.

TEST(Flatten, ReshapesAndCopiesBothWays) {
  Harness h = Build(std::make_unique<Flatten>("flatten"), {2, 3, 4}, 2);
  EXPECT_EQ(h.output, (Shape{24}));
  std::vector<float> x = Uniform(48, 5);
  EXPECT_EQ(h.Forward(x), x);
  std::vector<float> dy = Uniform(48, 6);
  EXPECT_EQ(h.Backward(x, dy), dy);
}

// ---------------------------------------------------------------------------------------------
// Backward against central finite differences of L = sum(r * y), layer by layer: dx and the
// parameter gradients (which Backward must add to what the gradient buffer holds).

double RelativeError(double a, double n) {
  return std::fabs(a - n) / std::max(1e-3, std::fabs(a) + std::fabs(n));
}

double MaxLayerGradientError(Harness& h, std::vector<float> x, float step) {
  const int64_t batch = static_cast<int64_t>(x.size()) / h.in_size();
  std::vector<float> r = Uniform(batch * h.out_size(), 8);
  auto loss = [&] {
    const std::vector<float> y = h.Forward(x);
    double sum = 0;  // products in double too: float ones would round away small differences
    for (size_t i = 0; i < y.size(); ++i) sum += double{y[i]} * r[i];
    return sum;
  };
  std::span<float> grads = h.params->grads(), values = h.params->values();
  std::fill(grads.begin(), grads.end(), 0.25f);
  const std::vector<float> dx = h.Backward(x, r);
  const std::vector<float> analytic(grads.begin(), grads.end());
  double worst = 0;
  auto check = [&](float& v, double a) {
    const float saved = v;
    v = saved + step;
    const double up = loss();
    v = saved - step;
    const double down = loss();
    v = saved;
    worst = std::max(worst, RelativeError(a, (up - down) / (2.0 * step)));
  };
  for (size_t i = 0; i < x.size(); ++i) check(x[i], dx[i]);
  for (size_t i = 0; i < values.size(); ++i) check(values[i], analytic[i] - 0.25);
  return worst;
}

TEST(LayerGradient, Conv2DChunkedMatchesFiniteDifferences) {
  for (Padding padding : {Padding::kSame, Padding::kValid}) {
    for (int stride : {1, 2}) {
      const nn::Conv2DSpec spec{
          .filters = 3, .kernel_size = 3, .stride = stride, .padding = padding};
      // 2 examples per chunk, 3 examples.
      Harness h = Build(std::make_unique<Conv2D>(spec, "conv", nullptr, 2 * 7 * 6 * 3 * 3 * 2),
                        {7, 6, 2}, 3);
      h.params->Initialize(3);
      std::span<float> b = h.params->value(1);
      for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * static_cast<float>(i + 1);
      // L is linear in x and the parameters: any step is exact up to rounding.
      EXPECT_LT(MaxLayerGradientError(h, Uniform(3 * h.in_size(), 9), 0.25f), 1e-3)
          << "stride " << stride << (padding == Padding::kSame ? " SAME" : " VALID");
    }
  }
}

TEST(LayerGradient, MaxPoolMatchesFiniteDifferences) {
  // Distinct inputs 0.05 apart: a step of 0.01 never changes which input wins.
  Harness h = Pool(3, 2, Padding::kSame, {7, 7, 3});
  std::vector<float> x(static_cast<size_t>(2 * h.in_size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.05f * static_cast<float>(i);
  std::shuffle(x.begin(), x.end(), std::mt19937_64(4));
  EXPECT_LT(MaxLayerGradientError(h, x, 1e-2f), 1e-3);
}

TEST(LayerGradient, LrnMatchesFiniteDifferences) {
  const nn::LrnSpec specs[] = {
      {.depth_radius = 2, .bias = 1, .alpha = 0.1f, .beta = 0.75f},
      {.depth_radius = 1, .bias = 2, .alpha = 0.5f, .beta = 0.6f},
      {.depth_radius = 4, .bias = 1, .alpha = 0.001f / 9, .beta = 0.75f},  // the CIFAR-10 setting
  };
  for (const nn::LrnSpec& spec : specs) {
    Harness h = Build(std::make_unique<Lrn>(spec, "lrn"), {2, 3, 7}, 2);
    EXPECT_LT(MaxLayerGradientError(h, Uniform(2 * h.in_size(), 10, -2, 2), 1e-2f), 2e-3)
        << "radius " << spec.depth_radius;
  }
}

// ---------------------------------------------------------------------------------------------
// Stacked models: each layer's dx feeds the layer before it, so an error in any dx shows up in
// the first convolution's kernel gradient.
//
// Max pooling (and relu) are not differentiable where two inputs tie, and with random weights a
// step of 1e-2 crosses such a point for a good share of inputs. So the model with a pool gets it
// from a 1x1 convolution of a single channel: each filter scales and shifts the input, which
// changes no window's arg-max, however its kernel or bias is perturbed (while |w| > step).

double ModelError(const nn::ModelSpec& spec, int64_t batch) {
  auto error = nn::MaxGradientError(spec, nn::RandomInput(spec, batch, 1, 11));
  EXPECT_TRUE(error.ok()) << error.status();
  return error.value_or(1.0);
}

TEST(CnnGradient, StridedConvIntoConvLrnConvFlattenDense) {
  const nn::ModelSpec spec{
      .name = "conv_stack",
      .input_shape = {11, 10, 2},
      .num_classes = 4,
      .layers = {
          nn::Conv2DSpec{.filters = 4, .kernel_size = 3, .stride = 2},
          nn::Conv2DSpec{.filters = 3, .kernel_size = 3, .padding = Padding::kValid},
          nn::LrnSpec{.depth_radius = 1, .bias = 2, .alpha = 0.5f, .beta = 0.5f},
          nn::Conv2DSpec{.filters = 5, .kernel_size = 2, .stride = 2, .padding = Padding::kValid},
          nn::FlattenSpec{}, nn::DenseSpec{.units = 4}}};
  EXPECT_LT(ModelError(spec, 3), 2e-2);
}

TEST(CnnGradient, ConvPoolLrnConvFlattenDense) {
  const nn::ModelSpec spec{
      .name = "conv_pool",
      .input_shape = {7, 7, 1},
      .num_classes = 5,
      .layers = {nn::Conv2DSpec{
                     .filters = 3, .kernel_size = 1, .kernel_init = nn::Initializer::Uniform(1)},
                 nn::MaxPoolSpec{.window = 3, .stride = 2, .padding = Padding::kSame},
                 nn::LrnSpec{.depth_radius = 1, .bias = 1, .alpha = 0.1f, .beta = 0.75f},
                 nn::Conv2DSpec{.filters = 4, .kernel_size = 3, .stride = 2}, nn::FlattenSpec{},
                 nn::DenseSpec{.units = 5}}};
  EXPECT_LT(ModelError(spec, 3), 2e-2);
}

}  // namespace
}  // namespace psflow::cpu
