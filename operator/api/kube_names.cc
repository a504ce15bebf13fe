#include "operator/api/kube_names.h"

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"

namespace psflow::api {
namespace {

bool Lower(char c) { return c >= 'a' && c <= 'z'; }
bool Digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

bool IsDns1123Label(absl::string_view name) {
  const auto alnum = [](char c) { return Lower(c) || Digit(c); };
  return !name.empty() && name.size() <= 63 && alnum(name.front()) && alnum(name.back()) &&
         absl::c_all_of(name, [&](char c) { return alnum(c) || c == '-'; });
}

bool IsPortName(absl::string_view name) {
  return !name.empty() && name.size() <= 15 && name.front() != '-' && name.back() != '-' &&
         !absl::StrContains(name, "--") && absl::c_any_of(name, Lower) &&
         absl::c_all_of(name, [](char c) { return Lower(c) || Digit(c) || c == '-'; });
}

bool IsEnvVarName(absl::string_view name) {
  return !name.empty() &&
         absl::c_all_of(name, [](char c) { return c >= ' ' && c <= '~' && c != '='; });
}

}  // namespace psflow::api
