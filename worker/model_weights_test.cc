// ExportModel writes nothing from a diverged model: a parameter that is not finite refuses the
// export, naming it, and the folder keeps what it had.
#include "worker/model_weights.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/models/model_zoo.h"
#include "worker/nn/backend.h"
#include "worker/nn/model.h"

namespace psflow {
namespace {

TEST(ExportModel, AParameterNotFiniteIsRefusedAndNothingWritten) {
  const absl::StatusOr<models::ModelDefinition> m = models::FindModel("mnist_mlp", "");
  ASSERT_TRUE(m.ok()) << m.status();
  std::unique_ptr<nn::Backend> backend = nn::MakeCpuBackend(1);
  absl::StatusOr<std::unique_ptr<nn::Model>> model = nn::Model::Create(m->spec, *backend, 1);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string dir = absl::StrCat(::testing::TempDir(), "/export_nan_", getpid());
  std::filesystem::remove_all(dir);
  nn::ParameterSet& params = (*model)->params();
  ASSERT_TRUE(ExportModel(*m, params, 7, dir).ok());
  const auto written = std::filesystem::last_write_time(dir + "/" + kWeightsFile);
  params.values()[params.descs().back().offset] = std::numeric_limits<float>::infinity();
  const absl::Status s = ExportModel(*m, params, 8, dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(
      s.message().find(absl::StrCat("parameter ", params.descs().back().name, " is not finite")),
      std::string::npos)
      << s;
  EXPECT_EQ(std::filesystem::last_write_time(dir + "/" + kWeightsFile), written);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace psflow
