// Checks the Kubernetes API server runs on a custom resource besides the OpenAPI validation,
// driven by the schema's x-kubernetes-* extensions, with its messages. Each appends to `errors`.
// Pure functions of their arguments: safe to call from many threads at once.
#ifndef PSFLOW_TESTS_CRD_RESOURCE_CHECKS_H_
#define PSFLOW_TESTS_CRD_RESOURCE_CHECKS_H_

#include <nlohmann/json.hpp>
#include <vector>

#include "tests/crd/field_error.h"
#include "tests/crd/schema.h"

namespace psflow::kubetest {

// The uniqueness that x-kubernetes-list-type set and map promise ("Duplicate value"), and that
// a map list holds objects.
void ValidateListTypes(const Schema& root, const nlohmann::json& object,
                       std::vector<FieldError>* errors);

// apiVersion and kind of every x-kubernetes-embedded-resource object below the root (required,
// strings, a group/version, a DNS-1035 kind). Their metadata is not checked.
void ValidateEmbeddedResources(const Schema& root, const nlohmann::json& object,
                               std::vector<FieldError>* errors);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_RESOURCE_CHECKS_H_
