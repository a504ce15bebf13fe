#include "operator/local/ignored_fields.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace psflow::local {
namespace {

api::Container Named(const std::string& name) {
  api::Container c;
  c.name = name;
  return c;
}

TEST(IgnoredContainerFields, NamesEachFieldPsflowRunLeavesOut) {
  api::ReplicaSpec plain;
  plain.containers = {Named("psflow")};
  plain.containers[0].env = {{"A", "1", false}};
  EXPECT_EQ(IgnoredContainerFields(plain), std::vector<std::string>{});

  api::ReplicaSpec spec;
  spec.containers = {Named("sidecar"), Named("psflow")};
  spec.containers[1].working_dir = "/work";
  spec.containers[1].env = {{"A", "1", false}, {"TOKEN", "", true}};
  EXPECT_EQ(IgnoredContainerFields(spec),
            (std::vector<std::string>{
                "container \"sidecar\" is not started here (psflow run runs only \"psflow\", the "
                "main container)",
                "workingDir /work is ignored here: the processes run in the run's directory",
                "env TOKEN comes from valueFrom, which only a kubelet resolves: not set here (it "
                "is as psflow run's own environment has it)"}));
}

}  // namespace
}  // namespace psflow::local
