// Object names, uids and timestamps as the Kubernetes API server makes and checks them.
#ifndef PSFLOW_TESTS_KUBE_OBJECT_NAMING_H_
#define PSFLOW_TESTS_KUBE_OBJECT_NAMING_H_

#include <random>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace psflow::kubetest {

enum class NameRule {
  kSubdomain,  // DNS-1123 subdomain: most resources (pods, trainingjobs, leases, events)
  kLabel,      // DNS-1035 label: services, whose names become DNS labels
};

// OK when `name` follows `rule`; otherwise INVALID_ARGUMENT with the API server's message, e.g.
//   Pod "Foo" is invalid: metadata.name: Invalid value: "Foo": a lowercase RFC 1123 subdomain
//   must consist of lower case alphanumeric characters, '-' or '.', and must start and end with
//   an alphanumeric character (...)
// `kind` ("Pod") starts the message.
absl::Status ValidateName(NameRule rule, absl::string_view kind, absl::string_view name);

// metadata.generateName: `prefix` (cut to 58 characters) + 5 random characters from the
// alphabet the API server uses (lowercase consonants and digits without vowel look-alikes).
std::string GenerateName(absl::string_view prefix, std::mt19937_64& rng);

// A random (version 4) UUID in its 36-character text form.
std::string NewUid(std::mt19937_64& rng);

// RFC 3339 in UTC to the second, as metadata.creationTimestamp: "2024-05-01T12:00:00Z".
std::string Rfc3339(absl::Time t);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_KUBE_OBJECT_NAMING_H_
