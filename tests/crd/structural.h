// The rules a CRD's schema must follow to be accepted by the API server (apiextensions.k8s.io/v1):
// the structural-schema invariants (schema/validation.go, complete.go) plus the schema rules of
// CRD validation that concern pruning, defaulting and list types.
#ifndef PSFLOW_TESTS_CRD_STRUCTURAL_H_
#define PSFLOW_TESTS_CRD_STRUCTURAL_H_

#include <string>
#include <vector>

#include "tests/crd/field_error.h"
#include "tests/crd/schema.h"

namespace psflow::kubetest {

// Violations of `root`, which sits at `path` ("spec.versions[0].schema.openAPIV3Schema"), sorted
// by message as the API server sorts them; empty when the schema is structural and acceptable:
//  - every node has a type, unless it is x-kubernetes-int-or-string or
//    x-kubernetes-preserve-unknown-fields; the root is an object; arrays have items;
//  - inside allOf/anyOf/oneOf/not: no type (but the two int-or-string patterns), default,
//    description, title, nullable, additionalProperties, x-kubernetes-* or metadata, and every
//    field and items named there is also specified outside (checked at every node, as the rule is
//    documented);
//  - metadata at the root restricts at most name and generateName; no additionalProperties at
//    the root; x-kubernetes-embedded-resource objects are typed objects;
//  - no properties together with additionalProperties, no uniqueItems, no $ref and the other
//    keywords v1 dropped, x-kubernetes-preserve-unknown-fields only true;
//  - x-kubernetes-list-type only on arrays, map lists name keys that are required or defaulted
//    scalar fields of object items;
//  - every default validates against its schema and survives pruning.
std::vector<FieldError> StructuralViolations(const Schema& root, const std::string& path);

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_STRUCTURAL_H_
