#include "operator/local/link_shape.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace psflow::local {
namespace {

constexpr double kMinRate = 1e6;   // 1mbit: below it gRPC's own timeouts decide, not the link
constexpr double kMaxRate = 4e11;  // 400gbit
constexpr double kMaxDelayS = 10;

// "2.5gbit" -> {2.5, "gbit"}. Only plain decimals: no sign, exponent, "inf" or "nan".
bool SplitNumber(absl::string_view text, double* number, std::string* unit) {
  size_t end = 0;
  bool digits = false, dot = false;
  for (; end < text.size(); ++end) {
    const char c = text[end];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
  }
  if (!digits || !absl::SimpleAtod(text.substr(0, end), number)) return false;
  *unit = absl::AsciiStrToLower(text.substr(end));
  return true;
}

absl::Status Bad(absl::string_view spec, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(
      "--emulate_network=\"", spec, "\": ", what,
      " (expected RATE[,DELAY[,LOSS]], e.g. 1gbit or 10gbit,0.2ms or 25gbit,1ms,0.1%)"));
}

}  // namespace

absl::StatusOr<LinkShape> ParseLinkShape(absl::string_view spec) {
  const std::vector<absl::string_view> parts = absl::StrSplit(spec, ',');
  if (parts.size() > 3) return Bad(spec, "more than three parts");
  LinkShape shape;
  double number;
  std::string unit;

  const absl::string_view rate = parts[0];
  static const std::pair<const char*, double> kRateUnits[] = {
      {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12}};
  if (rate.empty()) return Bad(spec, "RATE is missing");
  const auto* rate_unit = std::end(kRateUnits);
  if (SplitNumber(rate, &number, &unit)) {
    rate_unit = std::find_if(std::begin(kRateUnits), std::end(kRateUnits),
                             [&](const auto& u) { return unit == u.first; });
  }
  if (rate_unit == std::end(kRateUnits)) {
    return Bad(spec, absl::StrCat("RATE \"", rate,
                                  "\" is not a number of kbit, mbit, gbit or tbit (per second)"));
  }
  const double bits = number * rate_unit->second;
  if (bits < kMinRate || bits > kMaxRate) {
    return Bad(spec, absl::StrCat("RATE \"", rate, "\" is outside 1mbit..400gbit"));
  }
  shape.rate_bits_per_second = static_cast<int64_t>(std::llround(bits));
  shape.rate_text = std::string(rate);

  if (parts.size() >= 2) {
    const absl::string_view delay = parts[1];
    double seconds_per_unit = 0;
    if (SplitNumber(delay, &number, &unit)) {
      if (unit == "us") seconds_per_unit = 1e-6;
      if (unit == "ms") seconds_per_unit = 1e-3;
      if (unit == "s") seconds_per_unit = 1;
    }
    if (seconds_per_unit == 0) {
      return Bad(spec, absl::StrCat("DELAY \"", delay, "\" is not a number of us, ms or s"));
    }
    if (number * seconds_per_unit > kMaxDelayS) {
      return Bad(spec, absl::StrCat("DELAY \"", delay, "\" is over 10s"));
    }
    shape.delay = absl::Seconds(number * seconds_per_unit);
    shape.delay_text = std::string(delay);
  }

  if (parts.size() == 3) {
    const absl::string_view loss = parts[2];
    if (!SplitNumber(loss, &number, &unit) || unit != "%") {
      return Bad(spec, absl::StrCat("LOSS \"", loss, "\" is not a percentage such as 0.1%"));
    }
    if (number >= 100) return Bad(spec, absl::StrCat("LOSS \"", loss, "\" is not below 100%"));
    shape.loss_percent = number;
    shape.loss_text = std::string(loss);
  }
  return shape;
}

std::string DescribeLinkShape(const LinkShape& shape) {
  std::string text = shape.rate_text;
  if (shape.delay > absl::ZeroDuration()) absl::StrAppend(&text, ", ", shape.delay_text, " delay");
  if (shape.loss_percent > 0) absl::StrAppend(&text, ", ", shape.loss_text, " loss");
  return text;
}

std::vector<std::vector<std::string>> QdiscCommands(const LinkShape& shape,
                                                    const std::string& device) {
  // A bucket of 1 ms at the rate, and never below 64 KiB: a segmentation-offloaded packet on a
  // veth is up to 64 KiB, and tbf must hold one whole. Packets queue for at most 50 ms.
  const int64_t burst = std::max<int64_t>(64 * 1024, shape.rate_bits_per_second / 8 / 1000);
  std::vector<std::string> tbf = {"rate",    absl::StrCat(shape.rate_bits_per_second, "bit"),
                                  "burst",   absl::StrCat(burst),
                                  "latency", "50ms"};
  tbf.insert(tbf.begin(), "tbf");
  const bool netem = shape.delay > absl::ZeroDuration() || shape.loss_percent > 0;
  if (!netem) {
    std::vector<std::string> root = {"qdisc", "add", "dev", device, "root"};
    root.insert(root.end(), tbf.begin(), tbf.end());
    return {root};
  }
  std::vector<std::string> root = {"qdisc", "add", "dev", device, "root", "handle", "1:", "netem",
                                   // Room for every packet in flight over the delay, at 400gbit.
                                   "limit", "1000000"};
  if (shape.delay > absl::ZeroDuration()) {
    root.push_back("delay");
    root.push_back(absl::StrCat(absl::ToInt64Microseconds(shape.delay), "us"));
  }
  if (shape.loss_percent > 0) {
    root.push_back("loss");
    root.push_back(absl::StrFormat("%g%%", shape.loss_percent));
  }
  std::vector<std::string> child = {"qdisc",  "add", "dev",    device,
                                    "parent", "1:1", "handle", "10:"};
  child.insert(child.end(), tbf.begin(), tbf.end());
  return {root, child};
}

}  // namespace psflow::local
