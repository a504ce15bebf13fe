#include "tests/crd/yaml_json.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/status_macros.h"
#include "tests/crd/go_format.h"

namespace psflow::kubetest {
namespace {

using nlohmann::json;

absl::Status Bad(absl::string_view source, const YAML::Mark& mark, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": line ", mark.line + 1, ": ", what));
}

bool OneOf(absl::string_view s, std::initializer_list<absl::string_view> options) {
  for (absl::string_view option : options) {
    if (s == option) return true;
  }
  return false;
}

// strconv.ParseInt/ParseUint with base 0 after yaml.v2 removed the underscores: an optional
// sign, then 0x/0o/0b prefixes or a leading 0 for octal.
std::optional<json> ParseGoInt(absl::string_view text) {
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  int base = 10;
  if (text.size() > 1 && text[0] == '0') {
    const char prefix = absl::ascii_tolower(static_cast<unsigned char>(text[1]));
    base = prefix == 'x' ? 16 : prefix == 'b' ? 2 : 8;
    text.remove_prefix(prefix == 'x' || prefix == 'o' || prefix == 'b' ? 2 : 1);
  }
  if (text.empty()) return std::nullopt;
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  uint64_t magnitude = 0;
  for (char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0 || digit >= base) return std::nullopt;
    const auto d = static_cast<uint64_t>(digit);
    const auto b = static_cast<uint64_t>(base);
    if (magnitude > (kMax - d) / b) return std::nullopt;  // beyond uint64
    magnitude = magnitude * b + d;
  }
  const auto max_int = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (negative) {
    if (magnitude > max_int + 1) return std::nullopt;
    // -(2^63) does not fit the positive side: negate in unsigned arithmetic.
    return json(magnitude == max_int + 1 ? std::numeric_limits<int64_t>::min()
                                         : -static_cast<int64_t>(magnitude));
  }
  if (magnitude <= max_int) return json(static_cast<int64_t>(magnitude));
  return json(magnitude);
}

// A plain (unquoted, untagged) scalar, resolved as yaml.v2 does.
absl::StatusOr<json> ResolvePlain(const std::string& text, absl::string_view source,
                                  const YAML::Mark& mark) {
  if (OneOf(text, {"", "~", "null", "Null", "NULL"})) return json(nullptr);
  if (OneOf(text, {"y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"})) {
    return json(true);
  }
  if (OneOf(text, {"n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"})) {
    return json(false);
  }
  if (OneOf(text, {".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF",
                   "-.inf", "-.Inf", "-.INF"})) {
    return Bad(source, mark, absl::StrCat("\"", text, "\" has no JSON representation"));
  }
  const char first = text[0];
  if (first == '.') {
    char* end = nullptr;
    const double value = std::strtod(text.c_str(), &end);
    if (end == text.c_str() + text.size()) return json(value);
    return json(text);
  }
  if (!(absl::ascii_isdigit(static_cast<unsigned char>(first)) || first == '+' || first == '-')) {
    return json(text);
  }
  const std::string plain = absl::StrReplaceAll(text, {{"_", ""}});
  if (auto integer = ParseGoInt(plain)) return *integer;
  static const auto* kYamlFloat =
      new std::regex(R"(^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$)");
  if (std::regex_match(plain, *kYamlFloat)) {
    errno = 0;
    const double value = std::strtod(plain.c_str(), nullptr);
    if (errno != ERANGE && std::isfinite(value)) return json(value);
    return Bad(source, mark, absl::StrCat("\"", text, "\" is out of range"));
  }
  return json(text);
}

absl::StatusOr<json> Convert(const YAML::Node& node, absl::string_view source);

// A scalar with its tag: "!" for quoted and block scalars (strings), "?" for plain ones, or an
// explicit tag.
absl::StatusOr<json> ConvertScalar(const YAML::Node& node, absl::string_view source) {
  const std::string& tag = node.Tag();
  const std::string& text = node.Scalar();
  if (tag == "!" || tag == "tag:yaml.org,2002:str") return json(text);
  return ResolvePlain(text, source, node.Mark());
}

// Map keys are strings in JSON; sigs.k8s.io/yaml prints non-string keys (`on:` is "true").
absl::StatusOr<std::string> ConvertKey(const YAML::Node& key, absl::string_view source) {
  if (key.IsNull()) return std::string("null");
  if (!key.IsScalar()) return Bad(source, key.Mark(), "map keys must be scalars");
  ASSIGN_OR_RETURN(json value, ConvertScalar(key, source));
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return std::string("null");
  return GoPlain(value);
}

absl::StatusOr<json> Convert(const YAML::Node& node, absl::string_view source) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      // yaml-cpp reports quoted "null" as a scalar, so this is a real null.
      return json(nullptr);
    case YAML::NodeType::Scalar:
      return ConvertScalar(node, source);
    case YAML::NodeType::Sequence: {
      json out = json::array();
      for (const auto& item : node) {
        ASSIGN_OR_RETURN(json value, Convert(item, source));
        out.push_back(std::move(value));
      }
      return out;
    }
    case YAML::NodeType::Map: {
      json out = json::object();
      for (const auto& entry : node) {
        ASSIGN_OR_RETURN(std::string key, ConvertKey(entry.first, source));
        ASSIGN_OR_RETURN(out[key], Convert(entry.second, source));
      }
      return out;
    }
  }
  return json(nullptr);
}

}  // namespace

absl::StatusOr<json> YamlToJson(absl::string_view yaml, absl::string_view source) {
  try {
    const YAML::Node doc = YAML::Load(std::string(yaml));
    return Convert(doc, source);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not valid YAML: ", e.msg, " (line ", e.mark.line + 1, ")"));
  }
}

absl::StatusOr<json> LoadYamlFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the file"));
  std::stringstream text;
  text << in.rdbuf();
  return YamlToJson(text.str(), path);
}

}  // namespace psflow::kubetest
