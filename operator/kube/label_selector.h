// Equality-based label selectors ("a=b,c==d,e!=f,g,!h"), as the API server and the informer
// caches evaluate them. Set-based selectors ("in", "notin") are not supported: Parse rejects them.
#ifndef PSFLOW_OPERATOR_KUBE_LABEL_SELECTOR_H_
#define PSFLOW_OPERATOR_KUBE_LABEL_SELECTOR_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow::kube {

class LabelSelector {
 public:
  // Empty text selects everything. INVALID_ARGUMENT naming the bad term otherwise.
  static absl::StatusOr<LabelSelector> Parse(absl::string_view text);
  // From a map of required key=value pairs (a Service's selector, say).
  static LabelSelector Equals(const std::vector<std::pair<std::string, std::string>>& pairs);

  // `labels` is metadata.labels (an object of strings, or null/missing for none).
  bool Matches(const nlohmann::json& labels) const;
  bool Empty() const { return terms_.empty(); }
  std::string ToString() const;

 private:
  enum class Op { kEquals, kNotEquals, kExists, kNotExists };
  struct Term {
    std::string key;
    Op op;
    std::string value;
  };
  std::vector<Term> terms_;
};

}  // namespace psflow::kube

#endif  // PSFLOW_OPERATOR_KUBE_LABEL_SELECTOR_H_
