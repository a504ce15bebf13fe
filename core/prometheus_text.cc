#include "core/prometheus_text.h"

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace psflow {

std::optional<double> SumSamples(absl::string_view exposition, absl::string_view metric) {
  std::optional<double> sum;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (line.empty() || line[0] == '#' || !absl::StartsWith(line, metric)) continue;
    const char next = line.size() > metric.size() ? line[metric.size()] : '\0';
    if (next != ' ' && next != '{') continue;  // a longer name sharing the prefix
    const size_t space = line.rfind(' ');
    if (space == absl::string_view::npos) continue;
    // Value is the last field unless a timestamp follows; psflow's endpoints send none.
    const std::string value(line.substr(space + 1));
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (end == value.c_str()) continue;
    sum = sum.value_or(0.0) + v;
  }
  return sum;
}

}  // namespace psflow
