#include "operator/api/quantity.h"

#include <cctype>

#include "absl/numeric/int128.h"
#include "absl/strings/str_cat.h"

namespace psflow::api {
namespace {

absl::Status NotAQuantity(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a quantity (", why, ")"));
}

}  // namespace

absl::StatusOr<int64_t> ParseMilliQuantity(absl::string_view text) {
  size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  // The digits as an integer `mantissa` times 10^-`fraction_digits`.
  absl::int128 mantissa = 0;
  int fraction_digits = 0;
  bool any_digit = false;
  bool in_fraction = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '.' && !in_fraction) {
      in_fraction = true;
      continue;
    }
    if (!std::isdigit(static_cast<unsigned char>(c))) break;
    any_digit = true;
    if (mantissa > absl::int128(1) << 100) return NotAQuantity(text, "too many digits");
    mantissa = mantissa * 10 + (c - '0');
    if (in_fraction) ++fraction_digits;
  }
  if (!any_digit) return NotAQuantity(text, "no digits");
  const absl::string_view suffix = text.substr(i);
  // The value is mantissa * multiplier * 10^exponent10 / 10^fraction_digits, in units; in milli
  // units one more factor 1000.
  absl::int128 multiplier = 1;
  int exponent10 = 0;
  struct Suffix {
    const char* name;
    int binary_shift;  // 2^shift
    int exponent10;    // or 10^exponent
  };
  static constexpr Suffix kSuffixes[] = {{"Ki", 10, 0}, {"Mi", 20, 0}, {"Gi", 30, 0}, {"Ti", 40, 0},
                                         {"Pi", 50, 0}, {"Ei", 60, 0}, {"n", 0, -9},  {"u", 0, -6},
                                         {"m", 0, -3},  {"", 0, 0},    {"k", 0, 3},   {"M", 0, 6},
                                         {"G", 0, 9},   {"T", 0, 12},  {"P", 0, 15},  {"E", 0, 18}};
  bool known = false;
  for (const Suffix& s : kSuffixes) {
    if (suffix == s.name) {
      multiplier = absl::int128(1) << s.binary_shift;
      exponent10 = s.exponent10;
      known = true;
      break;
    }
  }
  if (!known) {
    // An exponent: e3, E-2.
    if (suffix.size() < 2 || (suffix[0] != 'e' && suffix[0] != 'E')) {
      return NotAQuantity(text, absl::StrCat("unknown suffix \"", suffix, "\""));
    }
    size_t j = 1;
    bool exp_negative = false;
    if (suffix[j] == '+' || suffix[j] == '-') exp_negative = suffix[j++] == '-';
    if (j == suffix.size()) return NotAQuantity(text, "an exponent without digits");
    int e = 0;
    for (; j < suffix.size(); ++j) {
      if (!std::isdigit(static_cast<unsigned char>(suffix[j]))) {
        return NotAQuantity(text, absl::StrCat("unknown suffix \"", suffix, "\""));
      }
      e = e * 10 + (suffix[j] - '0');
      if (e > 30) return NotAQuantity(text, "exponent too large");
    }
    exponent10 = exp_negative ? -e : e;
  }
  // milli = mantissa * multiplier * 10^(exponent10 + 3 - fraction_digits), rounded up.
  const int shift = exponent10 + 3 - fraction_digits;
  absl::int128 value = mantissa * multiplier;
  constexpr int64_t kMax = 9'200'000'000'000'000'000;
  if (shift >= 0) {
    for (int k = 0; k < shift; ++k) {
      value *= 10;
      if (value > kMax) return NotAQuantity(text, "too large");
    }
  } else {
    absl::int128 divisor = 1;
    for (int k = 0; k < -shift && divisor <= absl::int128(kMax); ++k) divisor *= 10;
    value = (value + divisor - 1) / divisor;  // rounded up, as the API server rounds
  }
  if (value > kMax) return NotAQuantity(text, "too large");
  const int64_t milli = static_cast<int64_t>(value);
  return negative ? -milli : milli;
}

std::string FormatMilliQuantity(int64_t milli) {
  if (milli % 1000 == 0) return absl::StrCat(milli / 1000);
  return absl::StrCat(milli, "m");
}

}  // namespace psflow::api
