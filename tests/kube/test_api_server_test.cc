#include "tests/kube/test_api_server.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/resource.h"
#include "tests/kube/http_test_client.h"
#include "tests/kube/store_test_util.h"
#include "tests/kube/verbs.h"

namespace psflow::kubetest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

constexpr char kJobs[] = "/apis/psflow.io/v1alpha1/namespaces/default/trainingjobs";
constexpr char kPods[] = "/api/v1/namespaces/default/pods";

std::string JobJson(const std::string& name, int replicas = 1) {
  return JobObject(name, replicas).dump();
}

// The names of a list's items.
std::vector<std::string> ItemKeys(const Json& list) {
  std::vector<std::string> keys;
  for (const Json& item : list["items"]) keys.push_back(kube::Key(item));
  return keys;
}

class TestApiServerTest : public ::testing::Test {
 protected:
  TestApiServerTest() : store_(TestStoreOptions()) { RegisterTestResources(store_); }

  void SetUp() override { StartServer({}); }

  void StartServer(TestApiServer::Options options) {
    server_.reset();
    absl::StatusOr<std::unique_ptr<TestApiServer>> server =
        TestApiServer::Start(&store_, std::move(options));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }

  HttpResponse Call(absl::string_view method, absl::string_view target, absl::string_view body = "",
                    absl::string_view headers = "") {
    absl::StatusOr<HttpResponse> response =
        HttpRequestOnce(server_->port(), method, target, body, headers);
    EXPECT_TRUE(response.ok()) << method << " " << target << ": " << response.status();
    return response.ok() ? *response : HttpResponse();
  }

  std::unique_ptr<HttpTestClient> Open() {
    absl::StatusOr<std::unique_ptr<HttpTestClient>> client =
        HttpTestClient::Connect(server_->port());
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  // Opens a watch stream with `query` on `collection` and reads its head.
  std::unique_ptr<HttpTestClient> OpenWatch(const std::string& collection,
                                            const std::string& query) {
    std::unique_ptr<HttpTestClient> client = Open();
    EXPECT_TRUE(client->Send("GET", absl::StrCat(collection, "?watch=true&", query)).ok());
    absl::StatusOr<HttpResponse> head = client->ReadHead();
    EXPECT_TRUE(head.ok()) << head.status();
    if (head.ok()) {
      EXPECT_EQ(head->code, 200);
      EXPECT_EQ(head->headers["transfer-encoding"], "chunked");
    }
    return client;
  }

  // The next watch event line as "TYPE namespace/name resourceVersion" (see Describe).
  static std::string NextEvent(HttpTestClient& client) {
    absl::StatusOr<std::string> line = client.ReadLine();
    if (!line.ok()) return std::string(line.status().message());
    const Json event = Json::parse(*line, nullptr, false);
    if (event.is_discarded()) return "not JSON: " + *line;
    const std::string type = event["type"];
    if (type == "BOOKMARK") return "BOOKMARK " + kube::ResourceVersion(event["object"]);
    if (type == "ERROR") return absl::StrCat("ERROR ", event["object"]["code"].dump());
    return absl::StrCat(type, " ", kube::Key(event["object"]), " ",
                        kube::ResourceVersion(event["object"]));
  }

  ObjectStore store_;
  std::unique_ptr<TestApiServer> server_;
};

TEST_F(TestApiServerTest, CreateGetUpdateDelete) {
  HttpResponse created = Call("POST", kJobs, JobJson("j"));
  EXPECT_EQ(created.code, 201);
  EXPECT_EQ(created.headers["content-type"], "application/json");
  const Json job = created.Json();
  EXPECT_EQ(kube::ResourceVersion(job), "1");
  EXPECT_EQ(kube::Namespace(job), "default");
  EXPECT_FALSE(kube::Uid(job).empty());

  HttpResponse got = Call("GET", absl::StrCat(kJobs, "/j"));
  EXPECT_EQ(got.code, 200);
  EXPECT_EQ(got.Json(), job);

  Json next = job;
  next["spec"]["replicas"] = 4;
  HttpResponse updated = Call("PUT", absl::StrCat(kJobs, "/j"), next.dump());
  EXPECT_EQ(updated.code, 200);
  EXPECT_EQ(kube::Generation(updated.Json()), 2);
  EXPECT_EQ(kube::ResourceVersion(updated.Json()), "2");

  HttpResponse conflict = Call("PUT", absl::StrCat(kJobs, "/j"), next.dump());  // version 1
  EXPECT_EQ(conflict.code, 409);
  EXPECT_EQ(conflict.Json(),
            Json({{"kind", "Status"},
                  {"apiVersion", "v1"},
                  {"metadata", Json::object()},
                  {"status", "Failure"},
                  {"message",
                   "Operation cannot be fulfilled on trainingjobs.psflow.io \"j\": the object has "
                   "been modified; please apply your changes to the latest version and try again"},
                  {"reason", "Conflict"},
                  {"details", {{"name", "j"}, {"group", "psflow.io"}, {"kind", "trainingjobs"}}},
                  {"code", 409}}));

  HttpResponse exists = Call("POST", kJobs, JobJson("j"));
  EXPECT_EQ(exists.code, 409);
  EXPECT_EQ(exists.Json()["reason"], "AlreadyExists");
  EXPECT_EQ(exists.Json()["message"], "trainingjobs.psflow.io \"j\" already exists");

  HttpResponse deleted = Call("DELETE", absl::StrCat(kJobs, "/j"));
  EXPECT_EQ(deleted.code, 200);
  EXPECT_EQ(kube::Uid(deleted.Json()), kube::Uid(job));
  HttpResponse missing = Call("GET", absl::StrCat(kJobs, "/j"));
  EXPECT_EQ(missing.code, 404);
  EXPECT_EQ(missing.Json()["reason"], "NotFound");
  EXPECT_EQ(missing.Json()["message"], "trainingjobs.psflow.io \"j\" not found");
  EXPECT_EQ(Call("DELETE", absl::StrCat(kJobs, "/j")).code, 404);
}

TEST_F(TestApiServerTest, ListsByNamespaceAndUrlDecodedSelector) {
  ASSERT_TRUE(store_.Create(kube::Pods(), "a", PodObject("p1", {{"app", "x"}})).ok());
  ASSERT_TRUE(store_.Create(kube::Pods(), "b", PodObject("p2", {{"app", "x"}})).ok());
  ASSERT_TRUE(
      store_.Create(kube::Pods(), "b", PodObject("p3", {{"app", "x"}, {"tier", "db"}})).ok());
  ASSERT_TRUE(store_.Create(kube::Pods(), "b", PodObject("p4")).ok());

  HttpResponse all = Call("GET", "/api/v1/pods?labelSelector=app%3Dx%2Ctier%21%3Ddb");
  EXPECT_EQ(all.code, 200);
  const Json list = all.Json();
  EXPECT_EQ(list["kind"], "PodList");
  EXPECT_EQ(list["apiVersion"], "v1");
  EXPECT_EQ(list["metadata"]["resourceVersion"], "4");
  EXPECT_THAT(ItemKeys(list), ElementsAre("a/p1", "b/p2"));
  EXPECT_THAT(ItemKeys(Call("GET", "/api/v1/namespaces/b/pods").Json()),
              ElementsAre("b/p2", "b/p3", "b/p4"));
  EXPECT_THAT(ItemKeys(Call("GET", "/api/v1/namespaces/c/pods").Json()), IsEmpty());
  HttpResponse bad = Call("GET", "/api/v1/pods?labelSelector=app+in+%28x%29");
  EXPECT_EQ(bad.code, 400);
  EXPECT_EQ(bad.Json()["reason"], "BadRequest");
  EXPECT_EQ(Call("GET", "/api/v1/pods?fieldSelector=metadata.name%3Dp1").code, 400);
}

TEST_F(TestApiServerTest, StatusSubresource) {
  const Json job = Call("POST", kJobs, JobJson("j")).Json();
  Json body = job;
  body["status"] = {{"phase", "Running"}};
  body["spec"]["replicas"] = 7;
  HttpResponse updated = Call("PUT", absl::StrCat(kJobs, "/j/status"), body.dump());
  EXPECT_EQ(updated.code, 200);
  EXPECT_EQ(updated.Json()["status"]["phase"], "Running");
  EXPECT_EQ(updated.Json()["spec"]["replicas"], 1);
  EXPECT_EQ(Call("GET", absl::StrCat(kJobs, "/j/status")).Json(), updated.Json());
  // PUT to the main resource leaves the status as it is.
  Json main = updated.Json();
  main["status"] = {{"phase", "Failed"}};
  main["spec"]["replicas"] = 2;
  EXPECT_EQ(Call("PUT", absl::StrCat(kJobs, "/j"), main.dump()).Json()["status"]["phase"],
            "Running");
  // Events have no status subresource.
  Json event{{"metadata", {{"name", "e"}}}, {"reason", "Created"}};
  ASSERT_EQ(Call("POST", "/api/v1/namespaces/default/events", event.dump()).code, 201);
  HttpResponse none = Call("PUT", "/api/v1/namespaces/default/events/e/status", event.dump());
  EXPECT_EQ(none.code, 404);
  EXPECT_EQ(none.Json()["message"], "the server could not find the requested resource");
}

TEST_F(TestApiServerTest, DeleteOptionsInTheBody) {
  const Json job = Call("POST", kJobs, JobJson("j")).Json();
  Json pod = PodObject("j-0");
  AddOwner(pod, job);
  ASSERT_EQ(Call("POST", kPods, pod.dump()).code, 201);

  HttpResponse wrong_uid = Call("DELETE", absl::StrCat(kJobs, "/j"),
                                R"({"kind":"DeleteOptions","apiVersion":"v1",)"
                                R"("preconditions":{"uid":"other"}})");
  EXPECT_EQ(wrong_uid.code, 409);
  EXPECT_EQ(wrong_uid.Json()["reason"], "Conflict");
  EXPECT_THAT(wrong_uid.Json()["message"].get<std::string>(),
              HasSubstr("Precondition failed: UID in precondition: other"));
  EXPECT_EQ(Call("DELETE", absl::StrCat(kJobs, "/j"), R"({"propagationPolicy":"Sideways"})").code,
            422);

  HttpResponse orphaned =
      Call("DELETE", absl::StrCat(kJobs, "/j"),
           absl::StrCat(R"({"propagationPolicy":"Orphan","gracePeriodSeconds":0,)",
                        R"("preconditions":{"uid":")", kube::Uid(job), R"("}})"));
  EXPECT_EQ(orphaned.code, 200);
  const Json kept = Call("GET", absl::StrCat(kPods, "/j-0")).Json();
  EXPECT_FALSE(kept["metadata"].contains("ownerReferences"));
  // Background (the default) takes the dependents along.
  const Json job2 = Call("POST", kJobs, JobJson("k")).Json();
  Json pod2 = PodObject("k-0");
  AddOwner(pod2, job2);
  ASSERT_EQ(Call("POST", kPods, pod2.dump()).code, 201);
  EXPECT_EQ(Call("DELETE", absl::StrCat(kJobs, "/k?propagationPolicy=Background")).code, 200);
  EXPECT_EQ(Call("GET", absl::StrCat(kPods, "/k-0")).code, 404);
}

TEST_F(TestApiServerTest, RejectsMalformedRequests) {
  EXPECT_EQ(Call("POST", kJobs, "{not json").Json()["reason"], "BadRequest");
  EXPECT_EQ(Call("POST", kJobs, "[1]").code, 400);
  const Json job = Call("POST", kJobs, JobJson("j")).Json();
  HttpResponse renamed = Call("PUT", absl::StrCat(kJobs, "/other"), job.dump());
  EXPECT_EQ(renamed.code, 400);
  EXPECT_EQ(renamed.Json()["message"],
            "the name of the object (j) does not match the name on the URL (other)");
  EXPECT_EQ(Call("PATCH", absl::StrCat(kJobs, "/j"), "{}").code, 405);
  EXPECT_EQ(Call("POST", "/apis/psflow.io/v1alpha1/trainingjobs", JobJson("x")).code, 405);
  EXPECT_EQ(Call("DELETE", kJobs).code, 405);  // deletecollection
  HttpResponse invalid = Call("POST", kJobs, JobJson("Bad_Name"));
  EXPECT_EQ(invalid.code, 422);
  EXPECT_EQ(invalid.Json()["reason"], "Invalid");
  EXPECT_EQ(Call("GET", absl::StrCat(kJobs, "?watch=maybe")).code, 400);
  EXPECT_EQ(Call("GET", "/api/v1/namespaces/default/pods/p/log").code, 404);

  // Not HTTP at all: 400, then the connection is closed.
  std::unique_ptr<HttpTestClient> client = Open();
  ASSERT_TRUE(client->SendRaw("HELLO\r\n\r\n").ok());
  absl::StatusOr<HttpResponse> answer = client->ReadResponse();
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->code, 400);
  EXPECT_TRUE(client->ClosedByServer());
}

TEST_F(TestApiServerTest, UnregisteredResourcesAndGroupsAreNotFound) {
  HttpResponse missing = Call("GET", "/apis/example.com/v1/namespaces/default/widgets");
  EXPECT_EQ(missing.code, 404);
  EXPECT_EQ(missing.Json(), Json({{"kind", "Status"},
                                  {"apiVersion", "v1"},
                                  {"metadata", Json::object()},
                                  {"status", "Failure"},
                                  {"message", "the server could not find the requested resource"},
                                  {"reason", "NotFound"},
                                  {"code", 404}}));
  EXPECT_EQ(Call("GET", "/apis/example.com/v1").code, 404);
  EXPECT_EQ(Call("GET", "/apis/example.com").code, 404);
  EXPECT_EQ(Call("GET", "/apis/psflow.io/v1").code, 404);  // another version
  EXPECT_EQ(Call("GET", "/nothing/here").code, 404);
  // A CRD deleted while the server runs.
  store_.UnregisterResource(kube::TrainingJobs());
  EXPECT_EQ(Call("GET", kJobs).code, 404);
  EXPECT_EQ(Call("GET", "/apis/psflow.io/v1alpha1").code, 404);
}

TEST_F(TestApiServerTest, Discovery) {
  const Json core = Call("GET", "/api").Json();
  EXPECT_EQ(core["kind"], "APIVersions");
  EXPECT_EQ(core["versions"], Json({"v1"}));

  const Json groups = Call("GET", "/apis").Json();
  EXPECT_EQ(groups["kind"], "APIGroupList");
  std::vector<std::string> names;
  for (const Json& g : groups["groups"]) names.push_back(g["name"]);
  EXPECT_THAT(names, UnorderedElementsAre("coordination.k8s.io", "psflow.io"));

  const Json group = Call("GET", "/apis/psflow.io").Json();
  EXPECT_EQ(group["kind"], "APIGroup");
  EXPECT_EQ(group["preferredVersion"]["groupVersion"], "psflow.io/v1alpha1");

  const Json resources = Call("GET", "/apis/psflow.io/v1alpha1").Json();
  EXPECT_EQ(resources["kind"], "APIResourceList");
  EXPECT_EQ(resources["groupVersion"], "psflow.io/v1alpha1");
  ASSERT_EQ(resources["resources"].size(), 2u);
  EXPECT_EQ(resources["resources"][0]["name"], "trainingjobs");
  EXPECT_EQ(resources["resources"][0]["kind"], "TrainingJob");
  EXPECT_EQ(resources["resources"][0]["namespaced"], true);
  EXPECT_EQ(resources["resources"][1]["name"], "trainingjobs/status");

  const Json core_list = Call("GET", "/api/v1/").Json();  // a trailing slash is fine
  std::vector<std::string> core_resources;
  for (const Json& r : core_list["resources"]) core_resources.push_back(r["name"]);
  EXPECT_THAT(core_resources, ElementsAre("configmaps", "events", "pods", "pods/status", "secrets",
                                          "services", "services/status"));
  EXPECT_EQ(Call("GET", "/version").Json()["gitVersion"], "v1.28.0-psflow-test");
  EXPECT_EQ(Call("GET", "/healthz").body, "ok");
  EXPECT_EQ(Call("POST", "/version", "{}").code, 405);
}

TEST_F(TestApiServerTest, ClusterScopedResources) {
  const kube::Resource widgets{"example.com", "v1", "clusterwidgets", "ClusterWidget", false};
  store_.RegisterResource(widgets, false);
  Json widget{{"metadata", {{"name", "w"}, {"namespace", "ignored"}}}};
  HttpResponse created = Call("POST", "/apis/example.com/v1/clusterwidgets", widget.dump());
  EXPECT_EQ(created.code, 201);
  EXPECT_FALSE(created.Json()["metadata"].contains("namespace"));
  EXPECT_EQ(Call("GET", "/apis/example.com/v1/clusterwidgets/w").code, 200);
  EXPECT_EQ(Call("GET", "/apis/example.com/v1/namespaces/default/clusterwidgets/w").code, 404);
  EXPECT_EQ(Call("GET", "/apis/example.com/v1/clusterwidgets").Json()["items"].size(), 1u);
  EXPECT_EQ(Call("GET", "/api/v1/pods/p").code, 404);  // a namespaced object needs its namespace
}

TEST_F(TestApiServerTest, WatchStreamsOneEventPerLine) {
  ASSERT_TRUE(store_.Create(kube::Pods(), "default", PodObject("a")).ok());
  std::unique_ptr<HttpTestClient> watch = OpenWatch(kPods, "resourceVersion=0");
  EXPECT_EQ(NextEvent(*watch), "ADDED default/a 1");
  ASSERT_TRUE(store_.SetPodPhase("default", "a", "Running").ok());
  ASSERT_TRUE(store_.Create(kube::Pods(), "other", PodObject("b")).ok());  // not this namespace
  ASSERT_TRUE(store_.Delete(kube::Pods(), "default", "a", {}).ok());
  EXPECT_EQ(NextEvent(*watch), "MODIFIED default/a 2");
  EXPECT_EQ(NextEvent(*watch), "DELETED default/a 4");

  // Each line is a whole watch event.
  ASSERT_TRUE(store_.Create(kube::Pods(), "default", PodObject("c")).ok());
  absl::StatusOr<std::string> line = watch->ReadLine();
  ASSERT_TRUE(line.ok());
  const Json event = Json::parse(*line);
  EXPECT_EQ(event["type"], "ADDED");
  EXPECT_EQ(event["object"], *store_.Get(kube::Pods(), "default", "c"));

  // CloseWatches ends the body cleanly; the connection carries the next request.
  server_->CloseWatches();
  EXPECT_EQ(watch->ReadLine().status().code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(watch->Send("GET", "/api/v1/namespaces/default/pods/c").ok());
  absl::StatusOr<HttpResponse> again = watch->ReadResponse();
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->code, 200);
}

TEST_F(TestApiServerTest, WatchFromAVersionWithSelectorAndBookmarks) {
  Json pod = *store_.Create(kube::Pods(), "default", PodObject("a", {{"app", "x"}}));  // rv 1
  pod["metadata"]["labels"]["app"] = "y";
  ASSERT_TRUE(store_.Update(kube::Pods(), "default", pod).ok());  // rv 2: stops matching
  std::unique_ptr<HttpTestClient> watch =
      OpenWatch(kPods,
                "resourceVersion=0&labelSelector=app%3Dx&allowWatchBookmarks=true&"
                "timeoutSeconds=1");
  // Nothing matches now; the watch ends after a second with a bookmark at the latest version.
  EXPECT_EQ(NextEvent(*watch), "BOOKMARK 2");
  EXPECT_EQ(watch->ReadLine().status().code(), absl::StatusCode::kOutOfRange);

  std::unique_ptr<HttpTestClient> replay =
      OpenWatch("/api/v1/pods", "resourceVersion=0&labelSelector=app%3Dx");
  ASSERT_TRUE(store_.Create(kube::Pods(), "default", PodObject("b", {{"app", "x"}})).ok());
  EXPECT_EQ(NextEvent(*replay), "ADDED default/b 3");
  std::unique_ptr<HttpTestClient> history =
      OpenWatch(kPods, "resourceVersion=1&labelSelector=app%3Dx");
  EXPECT_EQ(NextEvent(*history), "DELETED default/a 2");
  EXPECT_EQ(NextEvent(*history), "ADDED default/b 3");
}

TEST_F(TestApiServerTest, TooOldVersionIs410) {
  ASSERT_TRUE(store_.Create(kube::Pods(), "default", PodObject("a")).ok());
  ASSERT_TRUE(store_.Create(kube::Pods(), "default", PodObject("b")).ok());
  store_.Compact();
  HttpResponse gone = Call("GET", absl::StrCat(kPods, "?watch=1&resourceVersion=1"));
  EXPECT_EQ(gone.code, 410);
  EXPECT_EQ(gone.Json()["reason"], "Expired");
  EXPECT_EQ(gone.Json()["message"], "too old resource version: 1 (2)");
}

TEST_F(TestApiServerTest, CompactionEndsOpenWatchesWithAnErrorEvent) {
  ASSERT_TRUE(store_.Create(kube::Pods(), "default", PodObject("a")).ok());
  std::unique_ptr<HttpTestClient> watch = OpenWatch(kPods, "resourceVersion=1");
  std::unique_ptr<HttpTestClient> all = OpenWatch(kPods, "");
  EXPECT_EQ(NextEvent(*all), "ADDED default/a 1");
  store_.Compact();
  absl::StatusOr<std::string> line = watch->ReadLine();
  ASSERT_TRUE(line.ok()) << line.status();
  const Json error = Json::parse(*line);
  EXPECT_EQ(error["type"], "ERROR");
  EXPECT_EQ(error["object"]["kind"], "Status");
  EXPECT_EQ(error["object"]["code"], 410);
  EXPECT_EQ(error["object"]["reason"], "Expired");
  EXPECT_EQ(error["object"]["message"], "The resourceVersion for the provided watch is too old.");
  EXPECT_EQ(watch->ReadLine().status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(NextEvent(*all), "ERROR 410");
}

TEST_F(TestApiServerTest, BearerTokenIsRequiredWhenSet) {
  StartServer({.port = 0, .bearer_token = "s3cret", .user = "tester"});
  HttpResponse anonymous = Call("GET", kPods);
  EXPECT_EQ(anonymous.code, 401);
  EXPECT_EQ(anonymous.Json(), Json({{"kind", "Status"},
                                    {"apiVersion", "v1"},
                                    {"metadata", Json::object()},
                                    {"status", "Failure"},
                                    {"message", "Unauthorized"},
                                    {"reason", "Unauthorized"},
                                    {"code", 401}}));
  EXPECT_EQ(Call("GET", kPods, "", "Authorization: Bearer wrong\r\n").code, 401);
  EXPECT_EQ(Call("GET", "/version").code, 401);
  EXPECT_EQ(Call("GET", kPods, "", "Authorization: Bearer s3cret\r\n").code, 200);
}

TEST_F(TestApiServerTest, ForbiddenVerbsGetTheApiServersMessage) {
  server_->Forbid(verb::kList, kube::TrainingJobs());
  server_->Forbid(verb::kGet, kube::TrainingJobs());
  server_->Forbid(verb::kUpdateStatus, kube::Pods());
  HttpResponse list = Call("GET", kJobs);
  EXPECT_EQ(list.code, 403);
  EXPECT_EQ(list.Json()["reason"], "Forbidden");
  EXPECT_EQ(list.Json()["message"],
            "trainingjobs.psflow.io is forbidden: User "
            "\"system:serviceaccount:default:psflow-operator\" cannot list resource "
            "\"trainingjobs\" in API group \"psflow.io\" in the namespace \"default\"");
  EXPECT_EQ(Call("GET", "/apis/psflow.io/v1alpha1/trainingjobs").Json()["message"],
            "trainingjobs.psflow.io is forbidden: User "
            "\"system:serviceaccount:default:psflow-operator\" cannot list resource "
            "\"trainingjobs\" in API group \"psflow.io\" at the cluster scope");
  EXPECT_EQ(Call("GET", absl::StrCat(kJobs, "/j")).Json()["message"],
            "trainingjobs.psflow.io \"j\" is forbidden: User "
            "\"system:serviceaccount:default:psflow-operator\" cannot get resource "
            "\"trainingjobs\" in API group \"psflow.io\" in the namespace \"default\"");
  const Json pod = Call("POST", kPods, PodObject("p").dump()).Json();
  EXPECT_EQ(Call("PUT", absl::StrCat(kPods, "/p/status"), pod.dump()).Json()["message"],
            "pods \"p\" is forbidden: User \"system:serviceaccount:default:psflow-operator\" "
            "cannot update resource \"pods/status\" in API group \"\" in the namespace "
            "\"default\"");
  EXPECT_EQ(Call("PUT", absl::StrCat(kPods, "/p"), pod.dump()).code, 200);  // only /status
  EXPECT_EQ(Call("POST", kJobs, JobJson("j")).code, 201);                   // create is allowed
  server_->AllowAll();
  EXPECT_EQ(Call("GET", kJobs).code, 200);
}

TEST_F(TestApiServerTest, CountsRequestsPerVerb) {
  const int64_t before = server_->RequestCount();
  Call("POST", kJobs, JobJson("j"));
  Call("GET", absl::StrCat(kJobs, "/j"));
  Call("GET", absl::StrCat(kJobs, "/missing"));
  Call("GET", kJobs);
  Call("GET", absl::StrCat(kJobs, "?watch=true&timeoutSeconds=1"));
  Call("GET", "/apis");
  EXPECT_EQ(server_->RequestCount() - before, 6);
  EXPECT_EQ(server_->RequestCount(verb::kCreate), 1);
  EXPECT_EQ(server_->RequestCount(verb::kGet), 2);
  EXPECT_EQ(server_->RequestCount(verb::kList), 1);
  EXPECT_EQ(server_->RequestCount(verb::kWatch), 1);
  EXPECT_EQ(server_->RequestCount(verb::kUpdate), 0);
}

TEST_F(TestApiServerTest, KeepAliveAndConnectionClose) {
  std::unique_ptr<HttpTestClient> client = Open();
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client->Send("GET", kPods).ok());
    absl::StatusOr<HttpResponse> response = client->ReadResponse();
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->code, 200);
  }
  // Two requests sent back to back are answered in order.
  ASSERT_TRUE(client->Send("POST", kJobs, JobJson("j")).ok());
  ASSERT_TRUE(client->Send("GET", absl::StrCat(kJobs, "/j")).ok());
  EXPECT_EQ(client->ReadResponse()->code, 201);
  EXPECT_EQ(client->ReadResponse()->code, 200);
  EXPECT_EQ(server_->OpenConnectionCount(), 1);

  ASSERT_TRUE(client->Send("GET", kPods, "", "Connection: close\r\n").ok());
  absl::StatusOr<HttpResponse> last = client->ReadResponse();
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->headers["connection"], "close");
  EXPECT_TRUE(client->ClosedByServer());

  std::unique_ptr<HttpTestClient> old = Open();
  ASSERT_TRUE(old->SendRaw("GET /version HTTP/1.0\r\n\r\n").ok());
  EXPECT_EQ(old->ReadResponse()->code, 200);
  EXPECT_TRUE(old->ClosedByServer());
}

TEST_F(TestApiServerTest, ChunkedRequestBodiesAndExpectContinue) {
  std::unique_ptr<HttpTestClient> client = Open();
  const std::string body = JobJson("j");
  const std::string first = body.substr(0, 10);
  const std::string rest = body.substr(10);
  ASSERT_TRUE(client
                  ->SendRaw(absl::StrCat("POST ", kJobs,
                                         " HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                                         "Expect: 100-continue\r\n\r\n"))
                  .ok());
  ASSERT_TRUE(
      client
          ->SendRaw(absl::StrCat(absl::Hex(first.size()), "\r\n", first, "\r\n",
                                 absl::Hex(rest.size()), ";ext=1\r\n", rest, "\r\n0\r\n\r\n"))
          .ok());
  absl::StatusOr<HttpResponse> created = client->ReadResponse();  // after the 100 Continue
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->code, 201);
  EXPECT_EQ(kube::Name(created->Json()), "j");
}

TEST_F(TestApiServerTest, StopAndResume) {
  ASSERT_TRUE(store_.Create(kube::Pods(), "default", PodObject("a")).ok());
  const int port = server_->port();
  std::unique_ptr<HttpTestClient> watch = OpenWatch(kPods, "");
  EXPECT_EQ(NextEvent(*watch), "ADDED default/a 1");
  std::unique_ptr<HttpTestClient> idle = Open();

  server_->Stop();
  EXPECT_FALSE(server_->serving());
  EXPECT_EQ(watch->ReadLine().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(idle->ClosedByServer());
  EXPECT_EQ(HttpTestClient::Connect(port).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(store_.OpenWatchCount(), 0u);
  server_->Stop();  // again: nothing happens

  ASSERT_TRUE(server_->Resume().ok());
  EXPECT_EQ(server_->port(), port);
  EXPECT_THAT(ItemKeys(Call("GET", kPods).Json()), ElementsAre("default/a"));
}

TEST_F(TestApiServerTest, WatchOfAGoneClientEnds) {
  {
    std::unique_ptr<HttpTestClient> watch = OpenWatch(kPods, "");
    EXPECT_EQ(server_->OpenConnectionCount(), 1);
  }
  for (int i = 0; i < 200 && server_->OpenConnectionCount() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(server_->OpenConnectionCount(), 0);
  EXPECT_EQ(store_.OpenWatchCount(), 0u);
}

TEST_F(TestApiServerTest, ConcurrentClients) {
  constexpr int kClients = 4;
  constexpr int kJobsEach = 10;
  std::unique_ptr<HttpTestClient> watch = OpenWatch(kJobs, "");
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([this, c] {
      std::unique_ptr<HttpTestClient> client = Open();
      for (int i = 0; i < kJobsEach; ++i) {
        const std::string name = absl::StrCat("c", c, "-", i);
        ASSERT_TRUE(client->Send("POST", kJobs, JobJson(name)).ok());
        absl::StatusOr<HttpResponse> created = client->ReadResponse();
        ASSERT_TRUE(created.ok()) << created.status();
        ASSERT_EQ(created->code, 201);
        ASSERT_TRUE(client->Send("GET", absl::StrCat(kJobs, "/", name)).ok());
        ASSERT_EQ(client->ReadResponse()->code, 200);
      }
    });
  }
  for (int i = 0; i < kClients * kJobsEach; ++i) {
    EXPECT_THAT(NextEvent(*watch), HasSubstr("ADDED default/c"));
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(Call("GET", kJobs).Json()["items"].size(), size_t{kClients * kJobsEach});
}

TEST_F(TestApiServerTest, WritesAKubeconfig) {
  StartServer({.port = 0, .bearer_token = "t0ken", .user = "u"});
  const std::string path = ::testing::TempDir() + "/kubeconfig-test.yaml";
  ASSERT_TRUE(server_->WriteKubeconfig(path).ok());
  const YAML::Node config = YAML::LoadFile(path);
  EXPECT_EQ(config["kind"].as<std::string>(), "Config");
  EXPECT_EQ(config["current-context"].as<std::string>(), "psflow-test");
  EXPECT_EQ(config["contexts"][0]["context"]["cluster"].as<std::string>(), "psflow-test");
  EXPECT_EQ(config["contexts"][0]["context"]["user"].as<std::string>(), "psflow-test");
  EXPECT_EQ(config["clusters"][0]["cluster"]["server"].as<std::string>(), server_->url());
  EXPECT_EQ(config["users"][0]["user"]["token"].as<std::string>(), "t0ken");
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);
  EXPECT_EQ(server_->WriteKubeconfig("/nonexistent-dir/kubeconfig").code(),
            absl::StatusCode::kUnavailable);
  std::filesystem::remove(path);
}

TEST_F(TestApiServerTest, StartFailsOnAPortInUse) {
  TestApiServer::Options options;
  options.port = server_->port();
  absl::StatusOr<std::unique_ptr<TestApiServer>> second = TestApiServer::Start(&store_, options);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("cannot listen on 127.0.0.1:"));
}

}  // namespace
}  // namespace psflow::kubetest
