#include "ps/optimizer.h"

#include "absl/strings/str_cat.h"
#include "core/sgd.h"

namespace psflow {
namespace {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(float learning_rate) : learning_rate_(learning_rate) {}
  void Apply(std::span<float> var, std::span<const float> grad) override {
    SgdUpdate(learning_rate_, grad, var);
  }

 private:
  float learning_rate_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(const proto::OptimizerConfig& config) {
  if (!(config.learning_rate() > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("learning rate must be > 0, got ", config.learning_rate()));
  }
  if (config.name() == "sgd") return std::make_unique<Sgd>(config.learning_rate());
  return absl::InvalidArgumentError(absl::StrCat("unknown optimizer \"", config.name(), "\""));
}

}  // namespace psflow
