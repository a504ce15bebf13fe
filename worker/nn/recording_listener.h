// For tests: a GradientListener that notes every call, the handles told and a copy of the host
// gradients at that moment (what a sender would have sent).
#ifndef PSFLOW_WORKER_NN_RECORDING_LISTENER_H_
#define PSFLOW_WORKER_NN_RECORDING_LISTENER_H_

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
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
  // Empty when the calls told of handles [0, handles) once each in backward order (each call a
  // non-empty range ending where the previous one began, the first ending at `handles`, the last
  // beginning at 0); else the first call that breaks it.
  std::string BackwardOrderError(int handles) const {
    int expected_last = handles;
    for (size_t i = 0; i < calls.size(); ++i) {
      const auto [first, last] = calls[i];
      if (first >= last || last != expected_last) {
        return absl::StrCat("call ", i, " told [", first, ", ", last,
                            "); expected a range ending at ", expected_last);
      }
      expected_last = first;
    }
    return expected_last == 0 ? "" : absl::StrCat("handles [0, ", expected_last, ") never told");
  }
  // Empty when every handle told was seen with the gradient it holds now (the step's final one);
  // else the first handle whose copy differs.
  std::string SeenDiffersFromNow() const {
    for (const auto& [h, copy] : seen) {
      const auto g = params_.grad(h);
      if (!std::equal(copy.begin(), copy.end(), g.begin(), g.end())) {
        return absl::StrCat("handle ", h, " (", params_.descs()[static_cast<size_t>(h)].name,
                            ") was told before its gradient was final");
      }
    }
    return "";
  }
  std::vector<std::pair<int, int>> calls;
  std::map<int, std::vector<float>> seen;

 private:
  const ParameterSet& params_;
};

}  // namespace psflow::nn

#endif  // PSFLOW_WORKER_NN_RECORDING_LISTENER_H_
