// Test-only: whether a model or layer could not be built because PSFLOW_LSTM_IMPL forces an LSTM
// path cuDNN has no kernel for on this GPU (scripts/gpu_check.sh forces each path in turn;
// cuDNN 9 refuses the persistent one on an H100). Only then may a test skip; any other
// UNIMPLEMENTED, or one with no path forced, is a failure.
#ifndef PSFLOW_WORKER_BACKEND_CUDA_FORCED_LSTM_PATH_H_
#define PSFLOW_WORKER_BACKEND_CUDA_FORCED_LSTM_PATH_H_

#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psflow::nn {

// The reason to skip with, or empty when `s` is no such refusal.
inline std::string ForcedLstmPathRefused(const absl::Status& s) {
  const char* forced = std::getenv("PSFLOW_LSTM_IMPL");
  if (!absl::IsUnimplemented(s) || forced == nullptr) return "";
  return absl::StrCat("PSFLOW_LSTM_IMPL=", forced,
                      " has no cuDNN kernel on this GPU: ", s.message());
}

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_BACKEND_CUDA_FORCED_LSTM_PATH_H_
