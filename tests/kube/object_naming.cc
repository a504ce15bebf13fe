#include "tests/kube/object_naming.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace psflow::kubetest {
namespace {

constexpr size_t kMaxSubdomainLength = 253;
constexpr size_t kMaxLabelLength = 63;
constexpr size_t kGeneratedSuffixLength = 5;
// k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3 (no words, no look-alikes).
constexpr absl::string_view kGenerateAlphabet = "bcdfghjklmnpqrstvwxz2456789";

constexpr absl::string_view kSubdomainMessage =
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
constexpr absl::string_view kLabelMessage =
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// [a-z0-9]([-a-z0-9]*[a-z0-9])?
bool IsLabelPart(absl::string_view part) {
  if (part.empty() || !IsLowerAlnum(part.front()) || !IsLowerAlnum(part.back())) return false;
  for (char c : part) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

bool IsSubdomain(absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    if (!IsLabelPart(part)) return false;
  }
  return true;
}

absl::Status Invalid(absl::string_view kind, absl::string_view name, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      kind, " \"", name, "\" is invalid: metadata.name: Invalid value: \"", name, "\": ", why));
}

}  // namespace

absl::Status ValidateName(NameRule rule, absl::string_view kind, absl::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kind, " \"\" is invalid: metadata.name: Required value: name or generateName is required"));
  }
  const size_t max = rule == NameRule::kLabel ? kMaxLabelLength : kMaxSubdomainLength;
  if (name.size() > max) {
    return Invalid(kind, name, absl::StrCat("must be no more than ", max, " characters"));
  }
  if (rule == NameRule::kLabel) {
    if (!IsLabelPart(name) || !(name.front() >= 'a' && name.front() <= 'z')) {
      return Invalid(kind, name, kLabelMessage);
    }
  } else if (!IsSubdomain(name)) {
    return Invalid(kind, name, kSubdomainMessage);
  }
  return absl::OkStatus();
}

std::string GenerateName(absl::string_view prefix, std::mt19937_64& rng) {
  std::string name(prefix.substr(0, kMaxLabelLength - kGeneratedSuffixLength));
  std::uniform_int_distribution<size_t> pick(0, kGenerateAlphabet.size() - 1);
  for (size_t i = 0; i < kGeneratedSuffixLength; ++i) name.push_back(kGenerateAlphabet[pick(rng)]);
  return name;
}

std::string NewUid(std::mt19937_64& rng) {
  uint8_t bytes[16];
  for (int i = 0; i < 16; i += 8) {
    const uint64_t r = rng();
    for (int j = 0; j < 8; ++j) bytes[i + j] = static_cast<uint8_t>(r >> (8 * j));
  }
  bytes[6] = static_cast<uint8_t>(0x40 | (bytes[6] & 0x0f));  // version 4
  bytes[8] = static_cast<uint8_t>(0x80 | (bytes[8] & 0x3f));  // RFC 4122 variant
  constexpr char kHex[] = "0123456789abcdef";
  std::string uid;
  uid.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uid.push_back('-');
    uid.push_back(kHex[bytes[i] >> 4]);
    uid.push_back(kHex[bytes[i] & 0x0f]);
  }
  return uid;
}

std::string Rfc3339(absl::Time t) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone());
}

}  // namespace psflow::kubetest
