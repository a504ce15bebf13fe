// For tests: a GradientListener that notes every call, the handles told and a copy of the host
// gradients at that moment (what a sender would have sent).
#ifndef PSFLOW_WORKER_NN_RECORDING_LISTENER_H_
#define PSFLOW_WORKER_NN_RECORDING_LISTENER_H_

#include <map>
#include <utility>
#include <vector>

#include "worker/nn/parameter_set.h"
#include "worker/nn/trainable.h"

namespace psflow::nn {

class RecordingListener final : public GradientListener {
 public:
  explicit RecordingListener(const ParameterSet& params) : params_(params) {}
  void GradientsReady(ParameterSet::Handle first, ParameterSet::Handle last) override {
    calls.emplace_back(first, last);
    for (ParameterSet::Handle h = first; h < last; ++h) {
      const auto g = params_.grad(h);
      seen[h].assign(g.begin(), g.end());
    }
  }
  void Clear() {
    calls.clear();
    seen.clear();
  }
  std::vector<std::pair<int, int>> calls;
  std::map<int, std::vector<float>> seen;

 private:
  const ParameterSet& params_;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_RECORDING_LISTENER_H_
