// What `psflow run` leaves out of a replica's pod template, said once at the start of a run
// rather than silently: it runs one process per replica, the main container's command and args
// (api::ReplicaSpec::MainContainer) with its literal env values, in the run's own directory.
#ifndef PSFLOW_OPERATOR_LOCAL_IGNORED_FIELDS_H_
#define PSFLOW_OPERATOR_LOCAL_IGNORED_FIELDS_H_

#include <string>
#include <vector>

#include "operator/api/training_job.h"

namespace psflow::local {

// One line per field ignored, in the template's order: the other containers (not started), the
// main container's workingDir, and each env entry set by valueFrom (not set: the variable is as
// the runner's own environment has it). Empty when
// nothing is. Pure.
std::vector<std::string> IgnoredContainerFields(const api::ReplicaSpec& spec);

}  // namespace psflow::local

#endif  // PSFLOW_OPERATOR_LOCAL_IGNORED_FIELDS_H_
