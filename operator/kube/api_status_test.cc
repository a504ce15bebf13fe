#include "operator/kube/api_status.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace psflow::kube {
namespace {

using ::testing::HasSubstr;

struct Row {
  int http_code;
  const char* reason;
  absl::StatusCode code;
};

// The table in api_status.h.
const Row kTable[] = {
    {400, "BadRequest", absl::StatusCode::kInvalidArgument},
    {401, "Unauthorized", absl::StatusCode::kUnauthenticated},
    {403, "Forbidden", absl::StatusCode::kPermissionDenied},
    {404, "NotFound", absl::StatusCode::kNotFound},
    {409, "AlreadyExists", absl::StatusCode::kAlreadyExists},
    {409, "Conflict", absl::StatusCode::kAborted},
    {410, "Gone", absl::StatusCode::kOutOfRange},
    {410, "Expired", absl::StatusCode::kOutOfRange},
    {422, "Invalid", absl::StatusCode::kInvalidArgument},
    {429, "TooManyRequests", absl::StatusCode::kUnavailable},
    {500, "InternalError", absl::StatusCode::kUnavailable},
    {503, "ServiceUnavailable", absl::StatusCode::kUnavailable},
    {504, "Timeout", absl::StatusCode::kUnavailable},
};

nlohmann::json StatusBody(int code, const char* reason, const char* message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"status", "Failure"},
          {"reason", reason}, {"message", message}, {"code", code}};
}

TEST(StatusFromHttp, MapsEveryRowOfTheTable) {
  for (const Row& row : kTable) {
    const absl::Status status = StatusFromHttp(
        row.http_code, StatusBody(row.http_code, row.reason, "details").dump(), "GET /api/v1/pods");
    EXPECT_EQ(status.code(), row.code) << row.http_code << " " << row.reason;
    EXPECT_THAT(status.message(), HasSubstr("GET /api/v1/pods"));
    EXPECT_THAT(status.message(), HasSubstr(row.reason));
    EXPECT_THAT(status.message(), HasSubstr("details"));
  }
}

TEST(StatusFromHttp, TwoHundredsAreOk) {
  EXPECT_TRUE(StatusFromHttp(200, "{}", "GET x").ok());
  EXPECT_TRUE(StatusFromHttp(201, "{}", "POST x").ok());
  EXPECT_TRUE(StatusFromHttp(202, "", "DELETE x").ok());
}

TEST(StatusFromHttp, BodyThatIsNotAStatusIsQuoted) {
  const absl::Status status = StatusFromHttp(502, "<html>bad gateway</html>", "GET x");
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr("bad gateway"));
  // A 409 without a reason is a conflict, not AlreadyExists.
  EXPECT_EQ(StatusFromHttp(409, "", "PUT x").code(), absl::StatusCode::kAborted);
}

// A JSON body whose "kind" is not a string is not a Status (json::value used to throw here: the
// kube_object fuzzer's find): it is quoted as any other body.
TEST(StatusFromHttp, BodyWhoseKindIsNotAStringIsQuoted) {
  const absl::Status status = StatusFromHttp(404, R"({"kind": {"a": 1}, "message": "m"})", "GET x");
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(status.message(), HasSubstr(R"({"kind": {"a": 1})"));
}

TEST(StatusFromHttp, HttpCodeWinsOverTheBodysCode) {
  EXPECT_EQ(StatusFromHttp(404, StatusBody(500, "NotFound", "m").dump(), "GET x").code(),
            absl::StatusCode::kNotFound);
}

TEST(StatusFromStatusObject, ReadsCodeAndReason) {
  EXPECT_EQ(StatusFromStatusObject(StatusBody(410, "Expired", "too old"), "watch").code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(StatusFromStatusObject(StatusBody(409, "AlreadyExists", "m"), "w").code(),
            absl::StatusCode::kAlreadyExists);
  // Malformed objects never crash and never read as OK.
  EXPECT_FALSE(StatusFromStatusObject(nlohmann::json("oops"), "w").ok());
  EXPECT_FALSE(StatusFromStatusObject(nlohmann::json::object(), "w").ok());
  EXPECT_FALSE(StatusFromStatusObject({{"code", "410"}, {"reason", 7}}, "w").ok());
}

TEST(HttpCodeFor, ServerSideRoundTripsThroughTheClientSide) {
  const absl::Status statuses[] = {
      absl::InvalidArgumentError("bad"), absl::UnauthenticatedError("who"),
      absl::PermissionDeniedError("no"), absl::NotFoundError("gone"),
      absl::AlreadyExistsError("dup"),   absl::AbortedError("stale"),
      absl::OutOfRangeError("old"),      absl::UnavailableError("busy"),
  };
  for (const absl::Status& status : statuses) {
    const int code = HttpCodeFor(status);
    const nlohmann::json object = StatusObjectFor(status);
    EXPECT_EQ(object["code"], code);
    EXPECT_EQ(object["kind"], "Status");
    const absl::Status back = StatusFromHttp(code, object.dump(), "GET x");
    EXPECT_EQ(back.code(), status.code()) << status;
    EXPECT_THAT(back.message(), HasSubstr(std::string(status.message())));
    EXPECT_EQ(StatusFromStatusObject(object, "watch").code(), status.code()) << status;
  }
}

TEST(HttpCodeFor, CodesAndReasonsAsKubernetesWritesThem) {
  EXPECT_EQ(HttpCodeFor(absl::OkStatus()), 200);
  EXPECT_EQ(HttpCodeFor(absl::InvalidArgumentError("")), 422);
  EXPECT_EQ(HttpCodeFor(absl::ResourceExhaustedError("")), 429);
  EXPECT_EQ(HttpCodeFor(absl::InternalError("")), 500);
  EXPECT_EQ(StatusObjectFor(absl::AbortedError(""))["reason"], "Conflict");
  EXPECT_EQ(StatusObjectFor(absl::AlreadyExistsError(""))["reason"], "AlreadyExists");
  EXPECT_EQ(StatusObjectFor(absl::OutOfRangeError(""))["reason"], "Expired");
  EXPECT_EQ(StatusObjectFor(absl::NotFoundError(""))["reason"], "NotFound");
  EXPECT_EQ(StatusObjectFor(absl::PermissionDeniedError(""))["reason"], "Forbidden");
  EXPECT_EQ(StatusObjectFor(absl::UnauthenticatedError(""))["reason"], "Unauthorized");
}

TEST(IsNamespaceTerminating, OnlyTheLifecyclePluginsRefusal) {
  // As a 1.26 API server answers a create in a namespace being deleted.
  const std::string body =
      R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"j-ps-0\" is )"
      R"(forbidden: unable to create new content in namespace team-a because it is being )"
      R"(terminated","reason":"Forbidden","code":403})";
  EXPECT_TRUE(
      IsNamespaceTerminating(StatusFromHttp(403, body, "POST /api/v1/namespaces/team-a/pods")));
  EXPECT_FALSE(IsNamespaceTerminating(
      absl::PermissionDeniedError("pods \"j-worker-0\" is forbidden: maximum cpu usage per "
                                  "Container is 500m, but limit is 1")));
  EXPECT_FALSE(IsNamespaceTerminating(absl::UnavailableError("because it is being terminated")));
  EXPECT_FALSE(IsNamespaceTerminating(absl::OkStatus()));
}

TEST(IsGoneAndIsConflict, NameTheirCodes) {
  EXPECT_TRUE(IsGone(absl::OutOfRangeError("")));
  EXPECT_FALSE(IsGone(absl::NotFoundError("")));
  EXPECT_TRUE(IsConflict(absl::AbortedError("")));
  EXPECT_FALSE(IsConflict(absl::AlreadyExistsError("")));
}

}  // namespace
}  // namespace psflow::kube
