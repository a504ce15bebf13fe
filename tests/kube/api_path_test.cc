#include "tests/kube/api_path.h"

#include <gtest/gtest.h>

#include <string>

namespace psflow::kubetest {
namespace {

using Kind = ApiPath::Kind;

std::string Describe(const ApiPath& p) {
  return std::to_string(static_cast<int>(p.kind)) + " g=" + p.group + " v=" + p.version +
         " ns=" + p.ns + " r=" + p.plural + " n=" + p.name;
}

ApiPath Path(Kind kind, std::string group = "", std::string version = "", std::string ns = "",
             std::string plural = "", std::string name = "") {
  return {kind, group, version, ns, plural, name};
}

TEST(ApiPath, Discovery) {
  EXPECT_EQ(Describe(ParseApiPath("/version")), Describe(Path(Kind::kVersion)));
  EXPECT_EQ(Describe(ParseApiPath("/healthz")), Describe(Path(Kind::kHealth)));
  EXPECT_EQ(Describe(ParseApiPath("/api")), Describe(Path(Kind::kCoreVersions)));
  EXPECT_EQ(Describe(ParseApiPath("/apis")), Describe(Path(Kind::kGroupList)));
  EXPECT_EQ(Describe(ParseApiPath("/apis/psflow.io")), Describe(Path(Kind::kGroup, "psflow.io")));
  EXPECT_EQ(Describe(ParseApiPath("/api/v1")), Describe(Path(Kind::kResourceList, "", "v1")));
  EXPECT_EQ(Describe(ParseApiPath("/apis/psflow.io/v1alpha1/")),
            Describe(Path(Kind::kResourceList, "psflow.io", "v1alpha1")));
}

TEST(ApiPath, Resources) {
  EXPECT_EQ(Describe(ParseApiPath("/api/v1/pods")),
            Describe(Path(Kind::kCollection, "", "v1", "", "pods")));
  EXPECT_EQ(Describe(ParseApiPath("/api/v1/namespaces/ns/pods")),
            Describe(Path(Kind::kCollection, "", "v1", "ns", "pods")));
  EXPECT_EQ(Describe(ParseApiPath("/apis/psflow.io/v1alpha1/namespaces/ns/trainingjobs/j")),
            Describe(Path(Kind::kObject, "psflow.io", "v1alpha1", "ns", "trainingjobs", "j")));
  EXPECT_EQ(Describe(ParseApiPath("/api/v1/namespaces/ns/pods/p/status")),
            Describe(Path(Kind::kStatus, "", "v1", "ns", "pods", "p")));
  // namespaces/<name> alone is an object of the namespaces resource.
  EXPECT_EQ(Describe(ParseApiPath("/api/v1/namespaces/ns")),
            Describe(Path(Kind::kObject, "", "v1", "", "namespaces", "ns")));
  EXPECT_EQ(Describe(ParseApiPath("/apis/example.com/v1/clusterwidgets/w")),
            Describe(Path(Kind::kObject, "example.com", "v1", "", "clusterwidgets", "w")));
}

TEST(ApiPath, UnknownPaths) {
  for (const char* path : {"", "/", "x", "/metrics", "/api/v1/namespaces/ns/pods/p/log", "/api//v1",
                           "/other/v1/pods"}) {
    EXPECT_EQ(ParseApiPath(path).kind, Kind::kUnknown) << path;
  }
}

}  // namespace
}  // namespace psflow::kubetest
