#include "worker/nn/layer_build.h"

#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "worker/nn/parameter_set.h"

namespace psflow::nn {
namespace {

// TensorFlow's rule: SAME pads the smaller half before; VALID pads nothing.
TEST(LayerBuild, WindowDimFollowsTensorFlowsPadding) {
  struct Row {
    int64_t in;
    int window, stride;
    Padding padding;
    int64_t out, pad_before;
  };
  for (const Row& r :
       {Row{28, 5, 1, Padding::kSame, 28, 2}, Row{28, 2, 2, Padding::kSame, 14, 0},
        Row{24, 3, 2, Padding::kSame, 12, 0}, Row{5, 3, 2, Padding::kSame, 3, 1},
        Row{28, 5, 1, Padding::kValid, 24, 0}, Row{7, 3, 2, Padding::kValid, 3, 0}}) {
    absl::StatusOr<WindowedDim> d = WindowDim(r.in, r.window, r.stride, r.padding);
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(d->out, r.out) << r.in << " " << r.window << " " << r.stride;
    EXPECT_EQ(d->pad_before, r.pad_before) << r.in << " " << r.window << " " << r.stride;
  }
  EXPECT_FALSE(WindowDim(2, 3, 1, Padding::kValid).ok());
  EXPECT_FALSE(WindowDim(8, 0, 1, Padding::kSame).ok());
  EXPECT_FALSE(WindowDim(8, 2, 0, Padding::kSame).ok());
}

TEST(LayerBuild, Conv2DDeclaresKernelAndBiasAndNamesItselfInErrors) {
  ParameterSet params;
  const BuildContext ctx{&params, 4, 1};
  absl::StatusOr<Conv2DBuild> b =
      BuildConv2D(Conv2DSpec{.filters = 32, .kernel_size = 5}, "conv0", {28, 28, 1}, ctx);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->out, (Shape{28, 28, 32}));
  EXPECT_EQ(b->patch, 25);
  EXPECT_EQ(b->window.pad_top, 2);
  ASSERT_EQ(params.descs().size(), 2u);
  EXPECT_EQ(params.descs()[0].name, "conv0/kernel");
  EXPECT_EQ(params.descs()[0].shape, (Shape{5, 5, 1, 32}));
  EXPECT_EQ(params.descs()[1].name, "conv0/bias");
  const absl::Status flat =
      BuildConv2D(Conv2DSpec{.filters = 8, .kernel_size = 3}, "conv0", {784}, ctx).status();
  EXPECT_EQ(flat.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(flat.message(), "conv2d needs a [height, width, channels] input, got [784]");
  EXPECT_FALSE(BuildMaxPool(MaxPoolSpec{.window = 3, .padding = Padding::kValid}, {2, 2, 1}).ok());
}

TEST(LayerBuild, DenseActsOnTheLastDimensionAtEveryPosition) {
  ParameterSet params;
  const BuildContext ctx{&params, 4, 1};
  absl::StatusOr<DenseBuild> b = BuildDense(DenseSpec{.units = 10}, "dense0", {35, 200}, ctx);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->in, 200);
  EXPECT_EQ(b->positions, 35);
  EXPECT_EQ(b->out, (Shape{35, 10}));
  EXPECT_EQ(params.descs()[b->kernel].shape, (Shape{200, 10}));
  EXPECT_FALSE(BuildDense(DenseSpec{.units = 10}, "dense1", {}, ctx).ok());
  EXPECT_FALSE(BuildDense(DenseSpec{.units = 10}, "dense1", {3, 0}, ctx).ok());
  EXPECT_FALSE(BuildDense(DenseSpec{.units = 0}, "dense1", {3}, ctx).ok());
}

TEST(LayerBuild, EmbeddingTableIsSparse) {
  ParameterSet params;
  const BuildContext ctx{&params, 20, 1};
  absl::StatusOr<EmbeddingBuild> b =
      BuildEmbedding(EmbeddingSpec{.vocab_size = 100, .dim = 16}, "embedding0", {35}, ctx);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->time, 35);
  EXPECT_EQ(b->out, (Shape{35, 16}));
  EXPECT_TRUE(params.sparse(b->table));
  EXPECT_EQ(params.descs()[b->table].name, "embedding0/embeddings");
  EXPECT_FALSE(
      BuildEmbedding(EmbeddingSpec{.vocab_size = 100, .dim = 16}, "embedding1", {35, 1}, ctx).ok());
}

}  // namespace
}  // namespace psflow::nn
