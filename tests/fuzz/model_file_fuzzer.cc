// libFuzzer target: arbitrary bytes as a model file (worker/models/model_file.h), parsed as
// psflow-worker --model_file, `psflow validate` and the operator (spec.modelFile) parse one. Any
// input must end in a model or one INVALID_ARGUMENT line, never a crash or an exception; a model
// it accepts walks its shapes again without error, has a name per layer, and summarises.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "tests/fuzz/fuzz_support.h"
#include "worker/models/model_check.h"
#include "worker/models/model_file.h"
#include "worker/models/model_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psflow;
  const absl::StatusOr<models::ModelDefinition> m =
      models::ParseModelFile(fuzz::AsText(data, size), "model.yaml");
  fuzz::RecordOutcome(m.ok());
  if (!m.ok()) {
    PSFLOW_FUZZ_CHECK(m.status().code() == absl::StatusCode::kInvalidArgument);
    PSFLOW_FUZZ_CHECK(std::string(m.status().message()).find('\n') == std::string::npos);
    return 0;
  }
  PSFLOW_FUZZ_CHECK(!m->spec.layers.empty());
  PSFLOW_FUZZ_CHECK(m->spec.layer_names.size() == m->spec.layers.size());
  const bool tokens = std::holds_alternative<nn::EmbeddingSpec>(m->spec.layers.front());
  const absl::StatusOr<std::vector<models::LayerReport>> reports =
      models::CheckModel(m->spec, tokens);
  PSFLOW_FUZZ_CHECK(reports.ok());
  PSFLOW_FUZZ_CHECK(reports->back().output.back() == m->spec.num_classes);
  PSFLOW_FUZZ_CHECK(!models::ModelSummary(*m, "model.yaml").empty());
  return 0;
}
