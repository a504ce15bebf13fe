#include "worker/models/model_zoo.h"

#include <cstdlib>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/models/model_file.h"
#include "worker/models/seed_model_files.h"

namespace psflow::models {
namespace {

constexpr absl::string_view kPtb = "ptb_lstm";

const EmbeddedFile* FindFile(absl::string_view name) {
  for (const EmbeddedFile& f : SeedModelFiles()) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::StatusOr<ModelDefinition> Load(const EmbeddedFile& f) {
  return ParseModelFile(f.text, absl::StrCat("deploy/models/", f.name, ".yaml"));
}

}  // namespace

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const EmbeddedFile& f : SeedModelFiles()) {
    if (!absl::StartsWith(f.name, kPtb)) names.push_back(f.name);
  }
  names.emplace_back(kPtb);
  return names;
}

std::vector<std::string> PtbConfigNames() {
  std::vector<std::string> names;
  const std::string prefix = absl::StrCat(kPtb, "_");
  for (const EmbeddedFile& f : SeedModelFiles()) {
    if (absl::StartsWith(f.name, prefix)) names.push_back(f.name + prefix.size());
  }
  return names;
}

absl::StatusOr<ModelDefinition> FindModel(absl::string_view name, absl::string_view config) {
  if (name != kPtb && !config.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model_config is for ptb_lstm only; ", name, " has no configs"));
  }
  if (name == kPtb) {
    const std::string file = absl::StrCat(kPtb, "_", config.empty() ? "small" : config);
    const EmbeddedFile* f = FindFile(file);
    if (f == nullptr) {
      return absl::NotFoundError(absl::StrCat("unknown ptb_lstm config \"", config, "\"; known: ",
                                              absl::StrJoin(PtbConfigNames(), ", ")));
    }
    return Load(*f);
  }
  const EmbeddedFile* f = FindFile(name);
  if (f == nullptr || absl::StartsWith(name, kPtb)) {
    return absl::NotFoundError(absl::StrCat("unknown model \"", name,
                                            "\"; known: ", absl::StrJoin(ModelNames(), ", "),
                                            " (or --model_file=FILE for your own)"));
  }
  return Load(*f);
}

nn::ModelSpec SeedSpec(absl::string_view file) {
  const EmbeddedFile* f = FindFile(file);
  absl::StatusOr<ModelDefinition> m =
      f == nullptr ? absl::NotFoundError(absl::StrCat("no built-in model file ", file)) : Load(*f);
  if (!m.ok()) {
    std::cerr << m.status().message() << "\n";
    std::abort();
  }
  return m->spec;
}

nn::ModelSpec WithSequenceLength(nn::ModelSpec spec, int steps) {
  spec.input_shape.at(0) = steps;
  return spec;
}

}  // namespace psflow::models
