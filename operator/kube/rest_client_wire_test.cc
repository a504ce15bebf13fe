// RestKubeClient against a scripted HTTP server: what goes on the wire, how answers and broken
// connections map to statuses, and watch streaming piece by piece.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "operator/kube/object_meta.h"
#include "operator/kube/rest_client.h"
#include "tests/kube/scripted_http_server.h"

namespace psflow::kube {
namespace {

using std::chrono::milliseconds;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr milliseconds kLong{30'000};  // a bound no passing test comes near

RestKubeClient::Options Unlimited() {
  RestKubeClient::Options options;
  options.qps = 0;
  return options;
}

std::unique_ptr<RestKubeClient> MakeClient(const std::string& url,
                                           RestKubeClient::Options options = Unlimited()) {
  ClusterConfig config;
  config.server = url;
  config.token = "secret-token";
  config.source = "test config";
  absl::StatusOr<std::unique_ptr<RestKubeClient>> client =
      RestKubeClient::Create(config, std::move(options));
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

std::unique_ptr<ScriptedHttpServer> Serve(ScriptedHttpServer::Handler handler) {
  absl::StatusOr<std::unique_ptr<ScriptedHttpServer>> server =
      ScriptedHttpServer::Start(std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? *std::move(server) : nullptr;
}

std::string Event(const char* type, const std::string& name, const std::string& version) {
  return Json{{"type", type},
              {"object",
               {{"apiVersion", "v1"},
                {"kind", "Pod"},
                {"metadata", {{"name", name}, {"resourceVersion", version}}}}}}
             .dump() +
         "\n";
}

std::string StatusBodyText(int code, const char* reason, const char* message) {
  return Json{{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
              {"reason", reason}, {"message", message}, {"code", code}}
      .dump();
}

struct Seen {
  WatchEventType type;
  std::string name;
};

TEST(RestClientWire, RequestsCarryHeadersAndAnEncodedQuery) {
  auto server = Serve([](const HttpExchange&, ScriptedHttpServer::Responder& r) {
    r.Send(200, R"({"kind":"PodList","metadata":{"resourceVersion":"41"},"items":[
                   {"metadata":{"name":"a"}},{"kind":"Pod","metadata":{"name":"b"}}]})");
  });
  RestKubeClient::Options options = Unlimited();
  options.user_agent = "psflow-test/1";
  auto client = MakeClient(server->url(), options);
  ListOptions list;
  list.label_selector = "app=x,tier!=db,!canary";
  list.resource_version = "7";
  absl::StatusOr<ObjectList> result = client->List(Pods(), "ns", list);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->resource_version, "41");
  ASSERT_EQ(result->items.size(), 2u);
  // List items get the apiVersion and kind the server leaves out.
  EXPECT_EQ(result->items[0],
            (Json{{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", {{"name", "a"}}}}));
  EXPECT_EQ(result->items[1]["apiVersion"], "v1");

  const std::vector<HttpExchange> requests = server->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].target,
            "/api/v1/namespaces/ns/pods?labelSelector=app%3Dx%2Ctier%21%3Ddb%2C%21canary"
            "&resourceVersion=7");
  EXPECT_EQ(requests[0].headers.at("authorization"), "Bearer secret-token");
  EXPECT_EQ(requests[0].headers.at("user-agent"), "psflow-test/1");
  EXPECT_EQ(requests[0].headers.at("accept"), "application/json");
  EXPECT_EQ(DefaultUserAgent().rfind("psflow-operator/", 0), 0u);
}

TEST(RestClientWire, WritesSendJsonBodiesToTheirPaths) {
  auto server = Serve([](const HttpExchange& exchange, ScriptedHttpServer::Responder& r) {
    if (exchange.method == "DELETE") {
      r.Send(200, R"({"kind":"Status","status":"Success"})");
      return;
    }
    Json stored = Json::parse(exchange.body);
    stored["metadata"]["uid"] = "u-1";
    stored["metadata"]["resourceVersion"] = "9";
    r.Send(exchange.method == "POST" ? 201 : 200, stored.dump());
  });
  auto client = MakeClient(server->url());
  const Json job = {{"metadata", {{"name", "j"}, {"namespace", "team"}}}, {"spec", {{"x", 1}}}};

  absl::StatusOr<Json> created = client->Create(TrainingJobs(), "", job);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ((*created)["metadata"]["uid"], "u-1");
  absl::StatusOr<Json> updated = client->Update(TrainingJobs(), "team", *created);
  ASSERT_TRUE(updated.ok()) << updated.status();
  ASSERT_TRUE(client->UpdateStatus(TrainingJobs(), "team", *created).ok());
  DeleteOptions options;
  options.propagation = Propagation::kForeground;
  options.precondition_uid = "u-1";
  options.grace_period_seconds = 0;
  ASSERT_TRUE(client->Delete(TrainingJobs(), "team", "j", options).ok());
  ASSERT_TRUE(client->Delete(Pods(), "team", "p", DeleteOptions{}).ok());

  const std::vector<HttpExchange> requests = server->requests();
  ASSERT_EQ(requests.size(), 5u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/apis/psflow.io/v1alpha1/namespaces/team/trainingjobs");
  EXPECT_EQ(requests[0].headers.at("content-type"), "application/json");
  Json sent = Json::parse(requests[0].body);
  EXPECT_EQ(sent["apiVersion"], "psflow.io/v1alpha1");
  EXPECT_EQ(sent["kind"], "TrainingJob");
  EXPECT_EQ(sent["spec"], job["spec"]);
  EXPECT_EQ(requests[1].method, "PUT");
  EXPECT_EQ(requests[1].target, "/apis/psflow.io/v1alpha1/namespaces/team/trainingjobs/j");
  EXPECT_EQ(Json::parse(requests[1].body)["metadata"]["resourceVersion"], "9");
  EXPECT_EQ(requests[2].target, "/apis/psflow.io/v1alpha1/namespaces/team/trainingjobs/j/status");
  EXPECT_EQ(requests[3].method, "DELETE");
  EXPECT_EQ(requests[3].target, "/apis/psflow.io/v1alpha1/namespaces/team/trainingjobs/j");
  EXPECT_EQ(Json::parse(requests[3].body), (Json{{"kind", "DeleteOptions"},
                                                 {"apiVersion", "v1"},
                                                 {"propagationPolicy", "Foreground"},
                                                 {"preconditions", {{"uid", "u-1"}}},
                                                 {"gracePeriodSeconds", 0}}));
  EXPECT_EQ(
      Json::parse(requests[4].body),
      (Json{{"kind", "DeleteOptions"}, {"apiVersion", "v1"}, {"propagationPolicy", "Background"}}));
}

TEST(RestClientWire, ArgumentsTheServerNeverSees) {
  auto server =
      Serve([](const HttpExchange&, ScriptedHttpServer::Responder& r) { r.Send(200, "{}"); });
  auto client = MakeClient(server->url());
  EXPECT_EQ(client->Get(Pods(), "ns", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Create(Pods(), "", Json{{"metadata", {{"name", "p"}}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Update(Pods(), "ns", Json{{"metadata", Json::object()}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->Delete(Pods(), "ns", "", {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(server->requests().empty());
}

TEST(RestClientWire, ErrorAnswersMapToStatuses) {
  auto server = Serve([](const HttpExchange& exchange, ScriptedHttpServer::Responder& r) {
    const std::string& t = exchange.target;
    if (absl::EndsWith(t, "/missing")) return r.Send(404, StatusBodyText(404, "NotFound", "no p"));
    if (absl::EndsWith(t, "/dup")) return r.Send(409, StatusBodyText(409, "AlreadyExists", "dup"));
    if (absl::EndsWith(t, "/stale")) return r.Send(409, StatusBodyText(409, "Conflict", "stale"));
    if (absl::EndsWith(t, "/gone")) return r.Send(410, StatusBodyText(410, "Gone", "gone"));
    if (absl::EndsWith(t, "/forbidden"))
      return r.Send(403, StatusBodyText(403, "Forbidden", "rbac"));
    if (absl::EndsWith(t, "/who")) return r.Send(401, StatusBodyText(401, "Unauthorized", "who"));
    if (absl::EndsWith(t, "/busy")) return r.Send(500, "<html>oops</html>");
    r.Send(200, "this is not json");
  });
  auto client = MakeClient(server->url());
  const auto code = [&](const char* name) { return client->Get(Pods(), "ns", name).status(); };
  EXPECT_EQ(code("missing").code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(code("missing").message(), HasSubstr("GET /api/v1/namespaces/ns/pods/missing"));
  EXPECT_EQ(code("dup").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(code("stale").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(code("gone").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(code("forbidden").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(code("who").code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(code("busy").code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(code("busy").message(), HasSubstr("oops"));
  EXPECT_EQ(code("garbled").code(), absl::StatusCode::kDataLoss);
}

TEST(RestClientWire, UnreachableServerIsUnavailableNamingIt) {
  std::string url;
  {
    auto server = Serve([](const HttpExchange&, ScriptedHttpServer::Responder&) {});
    url = server->url();
  }  // nothing listens there any more
  auto client = MakeClient(url);
  const absl::Status status = client->Get(Pods(), "ns", "p").status();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr(url));
  const absl::Status watch = client->Watch(Pods(), "ns", {}, {}, [](const WatchEvent&) {});
  EXPECT_EQ(watch.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(watch.message(), HasSubstr(url));
}

TEST(RestClientWire, SilentServerIsDeadlineExceeded) {
  auto server = Serve(
      [](const HttpExchange&, ScriptedHttpServer::Responder& r) { r.WaitForClientClose(kLong); });
  RestKubeClient::Options options = Unlimited();
  options.request_timeout = milliseconds(300);
  auto client = MakeClient(server->url(), options);
  EXPECT_EQ(client->Get(Pods(), "ns", "p").status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(RestClientWire, ServerDropsTheConnectionBeforeAnswering) {
  auto server = Serve([](const HttpExchange&, ScriptedHttpServer::Responder& r) { r.Drop(); });
  auto client = MakeClient(server->url());
  EXPECT_EQ(client->Get(Pods(), "ns", "p").status().code(), absl::StatusCode::kUnavailable);
}

TEST(RestClientWire, WatchStreamsEventsAsTheyArrive) {
  std::promise<void> first_delivered;
  auto server = Serve([&](const HttpExchange&, ScriptedHttpServer::Responder& r) {
    r.StartChunked(200);
    r.Chunk(Event("ADDED", "a", "1"));
    // The rest is sent only once the client has handed on the first event: it cannot be
    // waiting for the whole body.
    if (first_delivered.get_future().wait_for(kLong) != std::future_status::ready) return;
    const std::string modified = Event("MODIFIED", "a", "2");
    r.Chunk(modified.substr(0, 10));
    r.Chunk(modified.substr(10) + Event("DELETED", "a", "3").substr(0, 5));
    r.Chunk(Event("DELETED", "a", "3").substr(5) + "\n");
    r.Chunk(R"({"type":"BOOKMARK","object":{"kind":"Pod","metadata":{"resourceVersion":"4"}}})");
    r.Chunk("\n");
    r.EndChunked();
  });
  auto client = MakeClient(server->url());
  ListOptions options;
  options.resource_version = "0";
  options.timeout_seconds = 5;
  std::vector<Seen> seen;
  std::vector<std::string> versions;
  const absl::Status status =
      client->Watch(Pods(), "ns", options, {}, [&](const WatchEvent& event) {
        seen.push_back({event.type, Name(event.object)});
        versions.push_back(ResourceVersion(event.object));
        if (seen.size() == 1) first_delivered.set_value();
      });
  EXPECT_TRUE(status.ok()) << status;  // the server ended the stream
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].type, WatchEventType::kAdded);
  EXPECT_EQ(seen[1].type, WatchEventType::kModified);
  EXPECT_EQ(seen[2].type, WatchEventType::kDeleted);
  EXPECT_EQ(seen[3].type, WatchEventType::kBookmark);
  EXPECT_THAT(versions, ElementsAre("1", "2", "3", "4"));
  const std::vector<HttpExchange> requests = server->requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].target,
            "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=0&timeoutSeconds=5"
            "&allowWatchBookmarks=true");
  EXPECT_EQ(requests[0].headers.at("authorization"), "Bearer secret-token");
}

TEST(RestClientWire, WatchGoneIsOutOfRangeEitherWay) {
  auto server = Serve([](const HttpExchange& exchange, ScriptedHttpServer::Responder& r) {
    if (absl::StrContains(exchange.target, "resourceVersion=1&")) {
      r.Send(410, StatusBodyText(410, "Expired", "too old resource version: 1 (50)"));
      return;
    }
    r.StartChunked(200);
    r.Chunk(Event("ADDED", "a", "5"));
    r.Chunk(Json{{"type", "ERROR"},
                 {"object", Json::parse(StatusBodyText(410, "Expired", "too old: 2 (50)"))}}
                .dump() +
            "\n");
    r.WaitForClientClose(kLong);
  });
  auto client = MakeClient(server->url());
  ListOptions options;
  options.resource_version = "1";
  absl::Status status = client->Watch(Pods(), "", options, {}, [](const WatchEvent&) {});
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("too old resource version"));
  options.resource_version = "2";
  int events = 0;
  status = client->Watch(Pods(), "", options, {}, [&](const WatchEvent&) { ++events; });
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(events, 1);
}

TEST(RestClientWire, UnreadableEventIsDataLoss) {
  const std::string bad_lines[] = {"this is not json\n", R"({"type":"RENAMED","object":{}})"
                                                         "\n"};
  for (const std::string& bad : bad_lines) {
    auto server = Serve([&](const HttpExchange&, ScriptedHttpServer::Responder& r) {
      r.StartChunked(200);
      r.Chunk(Event("ADDED", "a", "1") + bad + Event("ADDED", "b", "2"));
      r.WaitForClientClose(kLong);
    });
    auto client = MakeClient(server->url());
    std::vector<std::string> names;
    const absl::Status status = client->Watch(Pods(), "ns", {}, {}, [&](const WatchEvent& event) {
      names.push_back(Name(event.object));
    });
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(names, ElementsAre("a"));
  }
}

TEST(RestClientWire, WatchStopClosesTheConnection) {
  std::promise<bool> client_closed;
  auto server = Serve([&](const HttpExchange&, ScriptedHttpServer::Responder& r) {
    r.StartChunked(200);
    r.Chunk(Event("ADDED", "a", "1"));
    client_closed.set_value(r.WaitForClientClose(kLong));
  });
  auto client = MakeClient(server->url());
  std::stop_source stop;
  std::promise<void> got_event;
  std::thread stopper([&] {
    got_event.get_future().wait();
    stop.request_stop();
  });
  int events = 0;
  const absl::Status status =
      client->Watch(Pods(), "ns", {}, stop.get_token(), [&](const WatchEvent&) {
        if (++events == 1) got_event.set_value();
      });
  stopper.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
  EXPECT_EQ(events, 1);
  // Stopping closed the connection (the server was holding it open for 30 s).
  EXPECT_TRUE(client_closed.get_future().get());
}

TEST(RestClientWire, WatchStoppedBeforeItStarts) {
  auto server =
      Serve([](const HttpExchange&, ScriptedHttpServer::Responder& r) { r.Send(200, ""); });
  auto client = MakeClient(server->url());
  std::stop_source stop;
  stop.request_stop();
  EXPECT_EQ(client->Watch(Pods(), "ns", {}, stop.get_token(), [](const WatchEvent&) {}).code(),
            absl::StatusCode::kCancelled);
}

TEST(RestClientWire, WatchDroppedMidStreamIsUnavailable) {
  auto server = Serve([](const HttpExchange&, ScriptedHttpServer::Responder& r) {
    r.StartChunked(200);
    r.Chunk(Event("ADDED", "a", "1"));
    r.Chunk(Event("ADDED", "b", "2").substr(0, 12));  // half an event, then the line goes dead
    r.Drop();
  });
  auto client = MakeClient(server->url());
  std::vector<std::string> names;
  const absl::Status status = client->Watch(
      Pods(), "ns", {}, {}, [&](const WatchEvent& event) { names.push_back(Name(event.object)); });
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(status.message(), HasSubstr(server->url()));
  EXPECT_THAT(names, ElementsAre("a"));
}

TEST(RestClientWire, RateLimiterGatesEveryRequestAndStopEndsTheWait) {
  auto server = Serve([](const HttpExchange&, ScriptedHttpServer::Responder& r) {
    r.Send(200, R"({"metadata":{"name":"p"}})");
  });
  RestKubeClient::Options options;
  options.qps = 0.001;  // one token per 1000 s
  options.burst = 1;
  auto client = MakeClient(server->url(), options);
  ASSERT_TRUE(client->Get(Pods(), "ns", "p").ok());
  // The bucket is empty: the watch waits for a token until it is stopped, never sent.
  std::stop_source stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(milliseconds(50));
    stop.request_stop();
  });
  const absl::Status status =
      client->Watch(Pods(), "ns", {}, stop.get_token(), [](const WatchEvent&) {});
  stopper.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(server->requests().size(), 1u);
}

TEST(RestClientWire, ObserverSeesEachRequest) {
  auto server = Serve([](const HttpExchange& exchange, ScriptedHttpServer::Responder& r) {
    if (absl::StrContains(exchange.target, "watch=true")) {
      r.StartChunked(200);
      r.Chunk(Event("ADDED", "a", "1"));
      r.EndChunked();
    } else if (absl::EndsWith(exchange.target, "/missing")) {
      r.Send(404, StatusBodyText(404, "NotFound", "no"));
    } else if (exchange.method == "GET" && absl::StrContains(exchange.target, "pods?")) {
      r.Send(200, R"({"items":[]})");
    } else {
      r.Send(200, R"({"metadata":{"name":"p","namespace":"ns"}})");
    }
  });
  struct Call {
    std::string verb;
    std::string plural;
    int code;
    double seconds;
  };
  std::vector<Call> calls;
  std::mutex mutex;
  RestKubeClient::Options options = Unlimited();
  options.observer = [&](absl::string_view verb, const Resource& resource, int code,
                         double seconds) {
    std::lock_guard<std::mutex> lock(mutex);
    calls.push_back({std::string(verb), resource.plural, code, seconds});
  };
  auto client = MakeClient(server->url(), options);
  const Json pod = {{"metadata", {{"name", "p"}, {"namespace", "ns"}}}};
  ListOptions selector;
  selector.label_selector = "a=b";
  (void)client->Get(Pods(), "ns", "p");
  (void)client->Get(Pods(), "ns", "missing");
  (void)client->List(Pods(), "ns", selector);
  (void)client->Watch(Pods(), "ns", {}, {}, [](const WatchEvent&) {});
  (void)client->Create(Pods(), "ns", pod);
  (void)client->Update(Pods(), "ns", pod);
  (void)client->UpdateStatus(Pods(), "ns", pod);
  (void)client->Delete(Services(), "ns", "p", {});
  std::vector<std::string> verbs;
  for (const Call& call : calls) {
    verbs.push_back(absl::StrCat(call.verb, " ", call.plural, " ", call.code));
    EXPECT_GE(call.seconds, 0);
  }
  EXPECT_THAT(verbs, ElementsAre("get pods 200", "get pods 404", "list pods 200", "watch pods 200",
                                 "create pods 200", "update pods 200", "update_status pods 200",
                                 "delete services 200"));
  // A request that got no answer is reported with code 0.
  server.reset();
  (void)client->Get(Pods(), "ns", "p");
  ASSERT_EQ(calls.size(), 9u);
  EXPECT_EQ(calls.back().code, 0);
}

TEST(RestClientWire, CheckResourceServedReadsDiscovery) {
  auto server = Serve([](const HttpExchange& exchange, ScriptedHttpServer::Responder& r) {
    if (exchange.target == "/apis/psflow.io/v1alpha1") return r.Send(404, "404 page not found");
    if (exchange.target == "/api/v1") {
      return r.Send(200, R"({"kind":"APIResourceList","groupVersion":"v1","resources":[
          {"name":"pods","kind":"Pod"},{"name":"pods/status","kind":"Pod"},{"name":7}]})");
    }
    if (exchange.target == "/apis/coordination.k8s.io/v1") {
      return r.Send(200, R"({"kind":"APIResourceList","resources":[]})");
    }
    r.Send(403, StatusBodyText(403, "Forbidden", "no discovery for you"));
  });
  auto client = MakeClient(server->url());
  EXPECT_TRUE(client->CheckResourceServed(Pods()).ok());
  const absl::Status crd = client->CheckResourceServed(TrainingJobs());
  EXPECT_EQ(crd.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(crd.message(), HasSubstr("CRD trainingjobs.psflow.io is not installed"));
  const absl::Status absent = client->CheckResourceServed(Leases());
  EXPECT_EQ(absent.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(absent.message(), HasSubstr("leases.coordination.k8s.io is not installed"));
  Resource apps{"apps", "v1", "deployments", "Deployment", true};
  EXPECT_EQ(client->CheckResourceServed(apps).code(), absl::StatusCode::kPermissionDenied);
}

TEST(RestClientWire, CreateRejectsAServerUrlItCannotUse) {
  ClusterConfig config;
  config.server = "http://";
  config.source = "kubeconfig x";
  const auto client = RestKubeClient::Create(config, {});
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("kubeconfig x"));
}

}  // namespace
}  // namespace psflow::kube
