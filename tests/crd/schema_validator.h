// The OpenAPI v3 validation the Kubernetes API server runs on a custom resource, with its
// messages. Appends to `errors` and never stops at the first violation. A pure function of its
// arguments: safe to call from many threads at once.
#ifndef PSFLOW_TESTS_CRD_SCHEMA_VALIDATOR_H_
#define PSFLOW_TESTS_CRD_SCHEMA_VALIDATOR_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/crd/field_error.h"
#include "tests/crd/schema.h"

namespace psflow::kubetest {

// The OpenAPI v3 validation (kube-openapi's SchemaValidator as apiextensions configures it):
// type, nullable, allOf/anyOf/oneOf/not, maxLength/minLength/pattern, format (date-time, date),
// multipleOf/minimum/maximum, items/minItems/maxItems/uniqueItems, enum, minProperties/
// maxProperties, properties, additionalProperties, required. `path` is where `value` sits in
// kube-openapi's spelling: "" for the root, "spec.replicaSpecs.Chief.replicas",
// "status.conditions[0].type". anyOf/oneOf report the alternative with the fewest violations
// (kube-openapi picks by its own match count; the messages of those two may differ).
void ValidateValue(const Schema& schema, const nlohmann::json& value, const std::string& path,
                   std::vector<FieldError>* errors);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_SCHEMA_VALIDATOR_H_
