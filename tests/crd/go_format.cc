#include "tests/crd/go_format.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::kubetest {
namespace {

// Decodes one UTF-8 sequence at s[i]; returns its length, 0 for an invalid byte.
size_t DecodeRune(absl::string_view s, size_t i, char32_t* rune) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b0 = byte(i);
  if (b0 < 0x80) {
    *rune = b0;
    return 1;
  }
  // Sequence length, payload bits of the first byte, smallest rune of that length.
  struct Lead {
    unsigned char mask, bits;
    size_t len;
    char32_t payload_mask, min;
  };
  static constexpr Lead kLeads[] = {
      {0xE0, 0xC0, 2, 0x1F, 0x80}, {0xF0, 0xE0, 3, 0x0F, 0x800}, {0xF8, 0xF0, 4, 0x07, 0x10000}};
  const Lead* lead = nullptr;
  for (const Lead& l : kLeads) {
    if ((b0 & l.mask) == l.bits) lead = &l;
  }
  if (lead == nullptr) return 0;
  const size_t len = lead->len;
  const char32_t min = lead->min;
  char32_t r = b0 & lead->payload_mask;
  if (i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    r = (r << 6) | (byte(i + k) & 0x3F);
  }
  if (r < min || r > 0x10FFFF || (r >= 0xD800 && r <= 0xDFFF)) return 0;
  *rune = r;
  return len;
}

double AsDouble(const nlohmann::json& value) { return value.get<double>(); }

std::string GoInt(const nlohmann::json& value) {
  return value.is_number_unsigned() ? absl::StrCat(value.get<uint64_t>())
                                    : absl::StrCat(value.get<int64_t>());
}

}  // namespace

bool IsGoInt(const nlohmann::json& value) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return true;
  return value.is_number_unsigned() &&
         value.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
}

std::string GoQuote(absl::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    char32_t r = 0;
    const size_t len = DecodeRune(s, i, &r);
    if (len == 0) {
      absl::StrAppend(&out, "\\x", absl::Hex(static_cast<unsigned char>(s[i]), absl::kZeroPad2));
      ++i;
      continue;
    }
    static constexpr std::pair<char32_t, const char*> kEscapes[] = {
        {'"', "\\\""}, {'\\', "\\\\"}, {'\a', "\\a"}, {'\b', "\\b"}, {'\f', "\\f"},
        {'\n', "\\n"}, {'\r', "\\r"},  {'\t', "\\t"}, {'\v', "\\v"}};
    const auto escape = std::find_if(std::begin(kEscapes), std::end(kEscapes),
                                     [r](const auto& e) { return e.first == r; });
    const auto code = static_cast<uint32_t>(r);
    if (escape != std::end(kEscapes)) {
      out += escape->second;
    } else if (r < 0x20 || r == 0x7F) {
      absl::StrAppend(&out, "\\x", absl::Hex(code, absl::kZeroPad2));
    } else if (r >= 0x80 && r < 0xA0) {
      absl::StrAppend(&out, "\\u", absl::Hex(code, absl::kZeroPad4));
    } else {
      absl::StrAppend(&out, s.substr(i, len));
    }
    i += len;
  }
  out += '"';
  return out;
}

std::string GoFloat(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == 0) return std::signbit(value) ? "-0" : "0";
  // The shortest scientific form gives the digits and the decimal exponent; Go's %v switches to
  // it when the exponent is < -4 or >= 6 (strconv's 'g' with the shortest precision).
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, end);
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  if (exponent < -4 || exponent >= 6) return sci;  // to_chars writes e+06 as Go does
  auto [fend, fec] = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed);
  return std::string(buf, fend);
}

std::string GoPlain(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "<nil>";
    case nlohmann::json::value_t::boolean:
      return value.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::string:
      return value.get<std::string>();
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return IsGoInt(value) ? GoInt(value) : GoFloat(AsDouble(value));
    case nlohmann::json::value_t::number_float:
      return GoFloat(AsDouble(value));
    case nlohmann::json::value_t::array: {
      std::vector<std::string> items;
      for (const auto& item : value) items.push_back(GoPlain(item));
      return absl::StrCat("[", absl::StrJoin(items, " "), "]");
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::string> items;  // nlohmann keeps keys sorted, as fmt prints maps
      for (const auto& [key, item] : value.items()) {
        items.push_back(absl::StrCat(key, ":", GoPlain(item)));
      }
      return absl::StrCat("map[", absl::StrJoin(items, " "), "]");
    }
    default:
      return value.dump();
  }
}

std::string GoTypeName(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "<nil>";
    case nlohmann::json::value_t::boolean:
      return "bool";
    case nlohmann::json::value_t::string:
      return "string";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
      return IsGoInt(value) ? "int64" : "float64";
    case nlohmann::json::value_t::number_float:
      return "float64";
    case nlohmann::json::value_t::array:
      return "[]interface {}";
    case nlohmann::json::value_t::object:
      return "map[string]interface {}";
    default:
      return "?";
  }
}

std::string GoSyntax(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null:
      return "interface {}(nil)";
    case nlohmann::json::value_t::string:
      return GoQuote(value.get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<std::string> items;
      for (const auto& item : value) items.push_back(GoSyntax(item));
      return absl::StrCat("[]interface {}{", absl::StrJoin(items, ", "), "}");
    }
    case nlohmann::json::value_t::object: {
      std::vector<std::string> items;
      for (const auto& [key, item] : value.items()) {
        items.push_back(absl::StrCat(GoQuote(key), ":", GoSyntax(item)));
      }
      return absl::StrCat("map[string]interface {}{", absl::StrJoin(items, ", "), "}");
    }
    default:
      return GoPlain(value);
  }
}

}  // namespace psflow::kubetest
