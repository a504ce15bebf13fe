#include "tests/crd/schema_validator.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <regex>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "tests/crd/go_format.h"

namespace psflow::kubetest {
namespace {

using nlohmann::json;
using Errors = std::vector<FieldError>;

// "spec.x in body": how kube-openapi names the value in its messages.
std::string InBody(const std::string& path) { return absl::StrCat(path, " in body"); }

// The JSON type kube-openapi infers from a decoded value.
std::string JsonType(const json& value) {
  if (value.is_boolean()) return "boolean";
  if (value.is_string()) return "string";
  if (value.is_number()) return IsGoInt(value) ? "integer" : "number";
  if (value.is_array()) return "array";
  if (value.is_object()) return "object";
  return "null";
}

// swag.IsFloat64AJSONInteger.
bool IsJsonInteger(double f) {
  constexpr double kMaxJsonInteger = 9007199254740991.0;  // 2^53 - 1
  return std::isfinite(f) && std::fabs(f) <= kMaxJsonInteger && f == std::trunc(f);
}

size_t RuneCount(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

int64_t Int(const json& value) { return value.get<int64_t>(); }
double Float(const json& value) { return value.get<double>(); }

// Go's int64(f): the bound kube-openapi compares integers with.
int64_t TruncateToInt64(double f) {
  if (!(f > -9.2233720368547758e18)) return std::numeric_limits<int64_t>::min();
  if (!(f < 9.2233720368547758e18)) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(f);
}

// typeValidator.Validate.
void CheckType(const Schema& s, const json& value, const std::string& path, Errors* errors) {
  const std::vector<std::string> types = s.Types();
  if (types.empty() && s.format.empty()) return;
  const std::string joined = absl::StrJoin(types, ",");
  const auto contains = [&](absl::string_view t) {
    return std::find(types.begin(), types.end(), t) != types.end();
  };
  if (value.is_null()) {
    if (!types.empty() && !s.nullable) {
      errors->push_back(TypeInvalid(
          path, "null", absl::StrCat(InBody(path), " must be of type ", joined, ": \"null\"")));
    }
    return;
  }
  const std::string type = JsonType(value);
  const std::string format = type == "integer" ? "int64" : type == "number" ? "float64" : "";
  const bool float_int = type == "number" && IsJsonInteger(Float(value)) && contains("integer");
  const bool int_float = type == "integer" && contains("number");
  if (type != "string" && type != "array" && !s.format.empty() &&
      !(contains(type) || format == s.format || float_int || int_float)) {
    errors->push_back(TypeInvalid(
        path, format,
        absl::StrCat(InBody(path), " must be of type ", s.format, ": ", GoQuote(format))));
    return;
  }
  if (!(contains("number") || contains("integer")) && !s.format.empty() &&
      (type == "string" || type == "array")) {
    return;
  }
  if (!(contains(type) || float_int || int_float)) {
    errors->push_back(TypeInvalid(
        path, type, absl::StrCat(InBody(path), " must be of type ", joined, ": ", GoQuote(type))));
  }
}

// schemaPropsValidator: allOf, anyOf, oneOf, not. Its own messages carry no field (the API server
// turns them into field-less Invalid errors).
void CheckJunctors(const Schema& s, const json& value, const std::string& path, Errors* errors) {
  const auto junctor_error = [&](const std::string& what) {
    errors->push_back(Invalid("", "", absl::StrCat(GoQuote(path), " ", what)));
  };
  // The alternative with the fewest violations, and how many alternatives had none.
  const auto best_of = [&](const std::vector<Schema>& alternatives, Errors* best) {
    int valid = 0;
    std::optional<Errors> fewest;
    for (const Schema& alternative : alternatives) {
      Errors result;
      ValidateValue(alternative, value, path, &result);
      if (result.empty()) ++valid;
      if (!fewest || result.size() < fewest->size()) fewest = std::move(result);
    }
    if (fewest) *best = std::move(*fewest);
    return valid;
  };
  if (!s.any_of.empty()) {
    Errors best;
    if (best_of(s.any_of, &best) == 0) {
      junctor_error("must validate at least one schema (anyOf)");
      errors->insert(errors->end(), best.begin(), best.end());
    }
  }
  if (!s.one_of.empty()) {
    Errors best;
    const int valid = best_of(s.one_of, &best);
    if (valid != 1) {
      junctor_error(absl::StrCat("must validate one and only one schema (oneOf). ",
                                 valid == 0
                                     ? std::string("Found none valid")
                                     : absl::StrCat("Found ", valid, " valid alternatives")));
      if (valid == 0) errors->insert(errors->end(), best.begin(), best.end());
    }
  }
  if (!s.all_of.empty()) {
    size_t valid = 0;
    for (const Schema& part : s.all_of) {
      Errors result;
      ValidateValue(part, value, path, &result);
      if (result.empty()) ++valid;
      errors->insert(errors->end(), result.begin(), result.end());
    }
    if (valid != s.all_of.size()) {
      junctor_error(absl::StrCat("must validate all the schemas (allOf)",
                                 valid == 0 ? ". None validated" : ""));
    }
  }
  if (s.not_schema) {
    Errors result;
    ValidateValue(*s.not_schema, value, path, &result);
    if (result.empty()) junctor_error("must not validate the schema (not)");
  }
}

// stringValidator: the first failing check only.
void CheckString(const Schema& s, const std::string& value, const std::string& path,
                 Errors* errors) {
  const auto length = static_cast<int64_t>(RuneCount(value));
  if (s.max_length && length > *s.max_length) {
    errors->push_back(TooLong(path, *s.max_length));
  } else if (s.min_length && length < *s.min_length) {
    errors->push_back(
        Invalid(path, value,
                absl::StrCat(InBody(path), " should be at least ", *s.min_length, " chars long")));
  } else if (s.pattern_regex && !std::regex_search(value, *s.pattern_regex)) {
    errors->push_back(
        Invalid(path, value, absl::StrCat(InBody(path), " should match '", s.pattern, "'")));
  }
}

bool IsDate(absl::string_view s) {
  // time.Parse("2006-01-02", s): exactly YYYY-MM-DD, a day that exists.
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  const int year = std::stoi(std::string(s.substr(0, 4)));
  const int month = std::stoi(std::string(s.substr(5, 2)));
  const int day = std::stoi(std::string(s.substr(8, 2)));
  if (month < 1 || month > 12 || day < 1) return false;
  static constexpr int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return day <= kDays[month - 1] + (month == 2 && leap ? 1 : 0);
}

bool IsDateTime(const std::string& s) {
  // strfmt.IsDateTime: the date before a 't' (case-insensitive), then hh:mm:ss[.frac] and a zone.
  const std::string lower = absl::AsciiStrToLower(s);
  const std::vector<std::string> parts = absl::StrSplit(lower, 't');
  if (parts.size() < 2 || !IsDate(parts[0])) return false;
  static const auto* kTime =
      new std::regex(R"(^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$)");
  std::smatch m;
  if (!std::regex_search(parts[1], m, *kTime)) return false;
  return m[1].str() <= "23" && m[2].str() <= "59" && m[3].str() <= "59";
}

// formatValidator: for strings whose schema names a format the validator knows.
void CheckFormat(const Schema& s, const std::string& value, const std::string& path,
                 Errors* errors) {
  const std::string normalized = absl::StrReplaceAll(s.format, {{"-", ""}});
  bool ok = true;
  if (normalized == "datetime") ok = IsDateTime(value);
  if (normalized == "date") ok = IsDate(value);
  if (!ok) {
    errors->push_back(TypeInvalid(
        path, value,
        absl::StrCat(InBody(path), " must be of type ", s.format, ": ", GoQuote(value))));
  }
}

// numberValidator: multipleOf, then minimum, then maximum. Integers compare with the bounds
// truncated to int64 and print them so; floats print them with %v.
void CheckNumber(const Schema& s, const json& value, const std::string& path, Errors* errors) {
  const bool is_int = IsGoInt(value);
  if (s.multiple_of) {
    const double factor = *s.multiple_of;
    bool ok;
    std::string shown;
    if (is_int && factor >= 1) {
      const int64_t f = TruncateToInt64(factor);
      ok = Int(value) % f == 0;
      shown = absl::StrCat(f);
    } else {
      const double data = Float(value);
      ok = IsJsonInteger(factor < 1 ? 1 / factor * data : data / factor);
      shown = GoFloat(factor);
    }
    if (!ok) {
      errors->push_back(
          Invalid(path, value, absl::StrCat(InBody(path), " should be a multiple of ", shown)));
    }
  }
  const auto bound = [&](double limit, bool exclusive, bool is_max) {
    bool fails;
    std::string shown;
    if (is_int) {
      const int64_t data = Int(value);
      const int64_t l = TruncateToInt64(limit);
      fails = is_max ? (exclusive ? data >= l : data > l) : (exclusive ? data <= l : data < l);
      shown = absl::StrCat(l);
    } else {
      const double data = Float(value);
      fails = is_max ? (exclusive ? data >= limit : data > limit)
                     : (exclusive ? data <= limit : data < limit);
      shown = GoFloat(limit);
    }
    if (!fails) return;
    const char* relation = is_max ? (exclusive ? "less than" : "less than or equal to")
                                  : (exclusive ? "greater than" : "greater than or equal to");
    errors->push_back(
        Invalid(path, value, absl::StrCat(InBody(path), " should be ", relation, " ", shown)));
  };
  if (s.minimum) bound(*s.minimum, s.exclusive_minimum, /*is_max=*/false);
  if (s.maximum) bound(*s.maximum, s.exclusive_maximum, /*is_max=*/true);
}

void CheckArray(const Schema& s, const json& value, const std::string& path, Errors* errors) {
  if (s.items) {
    for (size_t i = 0; i < value.size(); ++i) {
      ValidateValue(*s.items, value[i], IndexPath(path, i), errors);
    }
  }
  const auto size = static_cast<int64_t>(value.size());
  if (s.min_items && size < *s.min_items) {
    errors->push_back(Invalid(
        path, size, absl::StrCat(InBody(path), " should have at least ", *s.min_items, " items")));
  }
  if (s.max_items && size > *s.max_items) errors->push_back(TooMany(path, size, *s.max_items));
  if (s.unique_items) {
    std::set<std::string> seen;
    for (const auto& item : value) {
      if (!seen.insert(item.dump()).second) {
        errors->push_back(
            Invalid(path, "", absl::StrCat(InBody(path), " shouldn't contain duplicates")));
        break;
      }
    }
  }
}

// Equality after Go's type conversion: numbers compare by value.
bool EnumMatches(const json& value, const json& candidate) {
  if (value.is_number() && candidate.is_number()) return Float(value) == Float(candidate);
  return value == candidate;
}

void CheckEnum(const Schema& s, const json& value, const std::string& path, Errors* errors) {
  if (!s.enum_values || s.enum_values->empty()) return;
  for (const auto& candidate : *s.enum_values) {
    if (!value.is_null() && !candidate.is_null() && EnumMatches(value, candidate)) return;
  }
  std::vector<std::string> supported;
  for (const auto& candidate : *s.enum_values) {
    supported.push_back(candidate.is_string() ? candidate.get<std::string>() : candidate.dump());
  }
  errors->push_back(NotSupported(path, value, supported));
}

void CheckObject(const Schema& s, const json& value, const std::string& path, Errors* errors) {
  const auto count = static_cast<int64_t>(value.size());
  if (s.min_properties && count < *s.min_properties) {
    errors->push_back(Invalid(
        path, count,
        absl::StrCat(InBody(path), " should have at least ", *s.min_properties, " properties")));
    return;
  }
  if (s.max_properties && count > *s.max_properties) {
    errors->push_back(TooMany(path, count, *s.max_properties));
    return;
  }
  for (const auto& [key, item] : value.items()) {
    if (s.properties.count(key)) continue;
    if (s.has_additional_properties && !s.additional_properties_allowed) {
      errors->push_back(Invalid(
          path, key, absl::StrCat(ChildPath(path, key), " in body is a forbidden property")));
    } else if (s.additional_properties) {
      ValidateValue(*s.additional_properties, item, ChildPath(path, key), errors);
    }
  }
  for (const auto& [name, property] : s.properties) {
    if (auto it = value.find(name); it != value.end()) {
      ValidateValue(*property, *it, ChildPath(path, name), errors);
    }
  }
  for (const auto& name : s.required) {
    if (!value.contains(name)) errors->push_back(Required(ChildPath(path, name)));
  }
}

}  // namespace

void ValidateValue(const Schema& schema, const json& value, const std::string& path,
                   std::vector<FieldError>* errors) {
  // The validators in kube-openapi's order; each applies to the kinds of values it knows.
  CheckType(schema, value, path, errors);
  if (value.is_null()) {
    CheckEnum(schema, value, path, errors);
    return;
  }
  CheckJunctors(schema, value, path, errors);
  if (value.is_string()) {
    CheckString(schema, value.get<std::string>(), path, errors);
    if (!schema.format.empty()) CheckFormat(schema, value.get<std::string>(), path, errors);
  }
  if (value.is_number()) CheckNumber(schema, value, path, errors);
  if (value.is_array()) CheckArray(schema, value, path, errors);
  CheckEnum(schema, value, path, errors);
  if (value.is_object()) CheckObject(schema, value, path, errors);
}

}  // namespace psflow::kubetest
