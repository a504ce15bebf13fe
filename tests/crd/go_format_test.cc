#include "tests/crd/go_format.h"

#include <gtest/gtest.h>

namespace psflow::kubetest {
namespace {

using nlohmann::json;

TEST(GoFloat, PrintsAsPercentV) {
  EXPECT_EQ(GoFloat(2.5), "2.5");
  EXPECT_EQ(GoFloat(1), "1");
  EXPECT_EQ(GoFloat(100000), "100000");
  EXPECT_EQ(GoFloat(1e6), "1e+06");
  EXPECT_EQ(GoFloat(123456789), "1.23456789e+08");
  EXPECT_EQ(GoFloat(0.0001), "0.0001");
  EXPECT_EQ(GoFloat(0.00001), "1e-05");
  EXPECT_EQ(GoFloat(-0.5), "-0.5");
  EXPECT_EQ(GoFloat(0.1 + 0.2), "0.30000000000000004");
}

TEST(GoQuote, EscapesAsStrconvQuote) {
  EXPECT_EQ(GoQuote("two"), "\"two\"");
  EXPECT_EQ(GoQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(GoQuote("line\nnext\t"), "\"line\\nnext\\t\"");
  EXPECT_EQ(GoQuote(std::string("\x01", 1)), "\"\\x01\"");
  EXPECT_EQ(GoQuote("\xc3\xa9t\xc3\xa9"), "\"\xc3\xa9t\xc3\xa9\"");  // printable UTF-8 stays
  EXPECT_EQ(GoQuote("\xff"), "\"\\xff\"");                           // invalid UTF-8
}

TEST(GoValue, PlainTypeAndSyntaxForms) {
  const json object = json::parse(R"({"b": "x", "a": 1})");
  EXPECT_EQ(GoPlain(object), "map[a:1 b:x]");
  EXPECT_EQ(GoPlain(json::parse("[1, 2.5, true]")), "[1 2.5 true]");
  EXPECT_EQ(GoPlain(json(nullptr)), "<nil>");
  EXPECT_EQ(GoTypeName(json("two")), "string");
  EXPECT_EQ(GoTypeName(json(2)), "int64");
  EXPECT_EQ(GoTypeName(json(2.0)), "float64");
  EXPECT_EQ(GoTypeName(json(18446744073709551615ULL)), "float64");  // beyond int64
  EXPECT_EQ(GoTypeName(object), "map[string]interface {}");
  EXPECT_EQ(GoSyntax(json::parse(R"({"type": "Running"})")),
            "map[string]interface {}{\"type\":\"Running\"}");
  EXPECT_EQ(GoSyntax(json::parse(R"([1, "a"])")), "[]interface {}{1, \"a\"}");
}

}  // namespace
}  // namespace psflow::kubetest
