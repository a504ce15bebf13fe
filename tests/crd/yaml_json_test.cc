#include "tests/crd/yaml_json.h"

#include <gtest/gtest.h>

namespace psflow::kubetest {
namespace {

using nlohmann::json;

json Parse(const std::string& yaml) {
  auto parsed = YamlToJson(yaml, "test.yaml");
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *parsed : json();
}

TEST(YamlToJson, ResolvesPlainScalarsAsYaml11) {
  const json j = Parse(R"(
a: yes
b: Off
c: ~
d:
e: 010
f: 0x1F
g: 1_000
h: 1e3
i: .5
j: 08
k: -7
l: 2.0
m: 9223372036854775808
name: hello
)");
  EXPECT_EQ(j["a"], json(true));
  EXPECT_EQ(j["b"], json(false));
  EXPECT_TRUE(j["c"].is_null());
  EXPECT_TRUE(j["d"].is_null());
  EXPECT_EQ(j["e"], json(8));
  EXPECT_EQ(j["f"], json(31));
  EXPECT_EQ(j["g"], json(1000));
  EXPECT_TRUE(j["h"].is_number_float());
  EXPECT_DOUBLE_EQ(j["h"].get<double>(), 1000);
  EXPECT_DOUBLE_EQ(j["i"].get<double>(), 0.5);
  EXPECT_TRUE(j["j"].is_number_float());  // not octal, so a float as in yaml.v2
  EXPECT_EQ(j["k"], json(-7));
  EXPECT_TRUE(j["l"].is_number_float());
  EXPECT_TRUE(j["m"].is_number_unsigned());
  EXPECT_EQ(j["name"], json("hello"));
}

TEST(YamlToJson, QuotedAndBlockScalarsStayStrings) {
  const json j = Parse("a: \"1\"\nb: 'true'\nc: \"null\"\nd: |\n  yes\n");
  EXPECT_EQ(j["a"], json("1"));
  EXPECT_EQ(j["b"], json("true"));
  EXPECT_EQ(j["c"], json("null"));
  EXPECT_EQ(j["d"], json("yes\n"));
}

TEST(YamlToJson, NonStringKeysArePrinted) {
  const json j = Parse("on: 1\n2: x\nn: no\n");
  EXPECT_EQ(j["true"], json(1));
  EXPECT_EQ(j["2"], json("x"));
  EXPECT_EQ(j["false"], json(false));  // the key `n` is a YAML 1.1 boolean too
}

TEST(YamlToJson, RejectsWhatJsonCannotHold) {
  auto inf = YamlToJson("a: .inf\n", "x.yaml");
  EXPECT_EQ(inf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(inf.status().message(), "x.yaml: line 1: \".inf\" has no JSON representation");
  auto broken = YamlToJson("a: [1, 2\n", "x.yaml");
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LoadYamlFile("/nonexistent/x.yaml").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psflow::kubetest
