// Values printed the way Go's fmt prints them, so that messages match the Kubernetes API server's
// byte for byte. JSON values follow Kubernetes' decoding: an integer that fits int64 is an int64,
// every other number a float64.
#ifndef PSFLOW_TESTS_CRD_GO_FORMAT_H_
#define PSFLOW_TESTS_CRD_GO_FORMAT_H_

#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/string_view.h"

namespace psflow::kubetest {

// True for numbers Kubernetes decodes as int64.
bool IsGoInt(const nlohmann::json& value);

// strconv.Quote: "a\"b" with Go's escapes; invalid UTF-8 bytes as \xNN. Non-ASCII runes count as
// printable except the C1 controls (Go also escapes a few more, such as U+00A0).
std::string GoQuote(absl::string_view s);

// %v of a float64: shortest round-trip digits, exponent form below 1e-4 and from 1e6 on
// (2.5, 100000, 1e+06, 1.5e-05).
std::string GoFloat(double value);

// %v of the decoded value: 3, 2.5, true, two (strings unquoted), <nil>, map[a:1 b:x], [1 2].
std::string GoPlain(const nlohmann::json& value);

// %T of the decoded value: int64, float64, bool, string, <nil>, map[string]interface {},
// []interface {}.
std::string GoTypeName(const nlohmann::json& value);

// %#v of the decoded value: "two", 3, map[string]interface {}{"type":"Running"}, ...
std::string GoSyntax(const nlohmann::json& value);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_GO_FORMAT_H_
