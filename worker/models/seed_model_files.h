// deploy/models/*.yaml, the seeds' model files, built into the binaries (cmake/embed_files.cmake
// generates the definition at build time), so `--model=NAME` needs no file beside the binary.
#ifndef PSFLOW_WORKER_MODELS_SEED_MODEL_FILES_H_
#define PSFLOW_WORKER_MODELS_SEED_MODEL_FILES_H_

#include <span>

namespace psflow::models {

struct EmbeddedFile {
  const char* name;  // the file's name without ".yaml", e.g. "ptb_lstm_small"
  const char* text;
};

// Every file of deploy/models, sorted by name.
std::span<const EmbeddedFile> SeedModelFiles();

}  // namespace psflow::models

#endif  // PSFLOW_WORKER_MODELS_SEED_MODEL_FILES_H_
