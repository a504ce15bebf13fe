// What the Kubernetes API server does to a custom resource before validating it: pruning
// (unknown fields, then nulls the schema neither allows nor defaults) and defaulting. Pure
// functions of the schema: safe to call from many threads at once on different objects.
#ifndef PSFLOW_TESTS_CRD_SCHEMA_PRUNING_H_
#define PSFLOW_TESTS_CRD_SCHEMA_PRUNING_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/crd/schema.h"

namespace psflow::kubetest {

// Removes every field `root` does not specify (pruning.Prune): apiVersion, kind and metadata stay
// at the root and in x-kubernetes-embedded-resource objects, and an
// x-kubernetes-preserve-unknown-fields object keeps its unknown fields (its specified ones are
// still pruned inside). Appends the removed fields' paths ("spec.foo", "spec.items[0].bar") to
// `removed` when it is not null.
void PruneUnknownFields(const Schema& root, nlohmann::json& object,
                        std::vector<std::string>* removed);

// Removes fields whose value is null where the schema is neither nullable nor has a default
// (PruneNonNullableNullsWithoutDefaults).
void PruneNulls(const Schema& root, nlohmann::json& object);

// Sets each absent field (or non-nullable null) whose schema has a default to a copy of it,
// top-down (defaulting.Default).
void ApplyDefaults(const Schema& root, nlohmann::json& object);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_SCHEMA_PRUNING_H_
