#include "operator/api/kube_names.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace psflow::api {
namespace {

using Rows = std::vector<std::pair<std::string, bool>>;

TEST(KubeNames, ContainerNamesAreDns1123Labels) {
  const Rows rows = {
      {"psflow", true},
      {"a", true},
      {"9", true},
      {"a-9", true},
      {std::string(63, 'a'), true},
      {std::string(64, 'a'), false},
      {"", false},
      {"-a", false},
      {"a-", false},
      {"A", false},
      {"a_b", false},
      {"a.b", false},
      {"a b", false},
      {std::string("a\0b", 3), false},
  };
  for (const auto& [name, ok] : rows) EXPECT_EQ(IsDns1123Label(name), ok) << absl::CHexEscape(name);
}

TEST(KubeNames, PortNamesAreIanaServiceNames) {
  const Rows rows = {
      {"psflow-port", true},
      {"metrics", true},
      {"h2c", true},
      {"a", true},
      {std::string(15, 'a'), true},
      {std::string(16, 'a'), false},
      {"", false},
      {"80", false},
      {"-a", false},
      {"a-", false},
      {"a--b", false},
      {"Metrics", false},
      {"a_b", false},
      {"a.b", false},
  };
  for (const auto& [name, ok] : rows) EXPECT_EQ(IsPortName(name), ok) << absl::CHexEscape(name);
}

// What every API server refuses; the stricter rule of those before 1.32 is left to them.
TEST(KubeNames, EnvVarNamesArePrintableAsciiWithoutEquals) {
  const Rows rows = {
      {"A", true},
      {"TF_CONFIG", true},
      {"my.env-name", true},
      {"1A", true},
      {"A B", true},
      {"..", true},
      {"~", true},
      {"", false},
      {"A=B", false},
      {"=", false},
      {"A\nB", false},
      {"A\tB", false},
      {std::string("A\0B", 3), false},
      {"\x7f", false},
      {"\xc3\xa9", false},
  };
  for (const auto& [name, ok] : rows) EXPECT_EQ(IsEnvVarName(name), ok) << absl::CHexEscape(name);
}

}  // namespace
}  // namespace psflow::api
