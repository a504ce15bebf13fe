// A CustomResourceDefinition's schema for one version, applied to objects as the Kubernetes API
// server applies it when a custom resource is created or updated:
//
//   CrdSchema crd = *CrdSchema::Load(path, "v1alpha1");
//   crd.Prune(object, &unknown_fields);  // drop unknown fields (fieldValidation=Strict rejects
//                                        // the request when `unknown_fields` is not empty)
//   crd.Default(object);                 // fill in the schema's defaults
//   absl::Status valid = crd.Validate(object);  // 422 Invalid when not OK
//
// Errors read as the API server's, e.g. `TrainingJob.psflow.io "x" is invalid:
// spec.replicaSpecs.Chief.replicas: Invalid value: 2: spec.replicaSpecs.Chief.replicas in body
// should be less than or equal to 1`.
//
// Covered: the OpenAPI v3 keywords a structural schema may use (see schema_validator.h),
// x-kubernetes-preserve-unknown-fields, -int-or-string, -embedded-resource, -list-type and
// -list-map-keys, defaults, the scale subresource's fields, pruning. Not covered: ObjectMeta
// (metadata.name syntax, labels; beyond what the schema itself says about metadata.name), CEL
// rules (x-kubernetes-validations: Load fails), ratcheting on update, and status/spec separation
// of the status subresource (the caller's: the API server ignores status on the main resource and
// everything but status on /status).
//
// Thread safety: immutable once loaded; every method is const and may run on any number of
// threads at once (each on its own object). Copies share the parsed schema.
#ifndef PSFLOW_TESTS_CRD_CRD_SCHEMA_H_
#define PSFLOW_TESTS_CRD_CRD_SCHEMA_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/crd/field_error.h"
#include "tests/crd/schema.h"

namespace psflow::kubetest {

class CrdSchema {
 public:
  // Reads the CRD (YAML or JSON) at `crd_path` and parses `version`'s openAPIV3Schema.
  // NOT_FOUND when the file cannot be read; INVALID_ARGUMENT when it is not an
  // apiextensions.k8s.io/v1 CustomResourceDefinition, lacks `version` or a schema, or the schema
  // is malformed; UNIMPLEMENTED when the schema uses what this validator cannot check (CEL rules,
  // string formats other than date-time, date, password).
  static absl::StatusOr<CrdSchema> Load(const std::string& crd_path, absl::string_view version);
  // The same from a CRD already read.
  static absl::StatusOr<CrdSchema> FromDefinition(nlohmann::json crd, absl::string_view version);

  // Every violation in `object` (after Prune and Default), in the API server's order: apiVersion
  // and kind first (and alone when wrong), then the schema, the scale subresource's replica and
  // selector fields, embedded resources, list types. OK, or INVALID_ARGUMENT with the one-line
  // message of the API server's 422 Invalid status.
  absl::Status Validate(const nlohmann::json& object) const;
  // The violations Validate reports, for a metav1.Status' causes.
  std::vector<FieldError> Violations(const nlohmann::json& object) const;

  // Removes the fields the schema does not specify (not under x-kubernetes-preserve-unknown-
  // fields; apiVersion, kind and metadata stay) and null values the schema neither allows nor
  // defaults. Appends the removed unknown fields' paths ("spec.replicaSpecs.Foo") to
  // `unknown_fields` when it is not null: what the API server warns about, or rejects under
  // fieldValidation=Strict (kubectl's default).
  void Prune(nlohmann::json& object, std::vector<std::string>* unknown_fields = nullptr) const;

  // Sets the schema's defaults on absent fields.
  void Default(nlohmann::json& object) const;

  // OK when the schema is structural and follows the CRD schema rules (structural.h); else
  // INVALID_ARGUMENT listing every violation as the API server rejects such a CRD.
  absl::Status CheckStructural() const;

  const std::string& name() const { return name_; }        // "trainingjobs.psflow.io"
  const std::string& group() const { return group_; }      // "psflow.io"
  const std::string& version() const { return version_; }  // "v1alpha1"
  const std::string& kind() const { return kind_; }        // "TrainingJob"
  const std::string& plural() const { return plural_; }    // "trainingjobs"
  // The whole CRD, and its entry in spec.versions (subresources, printer columns).
  const nlohmann::json& definition() const { return *definition_; }
  const nlohmann::json& version_definition() const;
  const Schema& schema() const { return *schema_; }

 private:
  struct Scale {
    std::string spec_replicas_path;    // ".spec.replicaSpecs.Worker.replicas"
    std::string status_replicas_path;  // ".status.replicaStatuses.Worker.active"
    std::optional<std::string> label_selector_path;
  };

  CrdSchema() = default;
  void ValidateScale(const nlohmann::json& object, std::vector<FieldError>* errors) const;

  std::shared_ptr<const nlohmann::json> definition_;
  size_t version_index_ = 0;
  std::string name_, group_, version_, kind_, plural_;
  std::shared_ptr<const Schema> schema_;
  std::optional<Scale> scale_;
};

}  // namespace psflow::kubetest

#endif  // PSFLOW_TESTS_CRD_CRD_SCHEMA_H_
