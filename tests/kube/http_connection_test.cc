#include "tests/kube/http_connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"

namespace psflow::kubetest {
namespace {

// A connected pair of sockets: the test writes to client(), the connection reads server().
class SocketPair {
 public:
  SocketPair() { EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds_), 0); }
  ~SocketPair() {
    ::close(fds_[0]);
    if (fds_[1] >= 0) ::close(fds_[1]);
  }
  int server() const { return fds_[0]; }
  void Write(const std::string& bytes) {
    ASSERT_EQ(::write(fds_[1], bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }
  std::string ReadAll() {
    ::shutdown(fds_[0], SHUT_WR);
    std::string out;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fds_[1], buffer, sizeof(buffer))) > 0) out.append(buffer, n);
    return out;
  }
  void CloseClient() {
    ::close(fds_[1]);
    fds_[1] = -1;
  }

 private:
  int fds_[2];
};

TEST(UrlDecode, DecodesEscapes) {
  EXPECT_EQ(*UrlDecode("app%3Dx%2Ctier%21%3Ddb", true), "app=x,tier!=db");
  EXPECT_EQ(*UrlDecode("a+b", true), "a b");
  EXPECT_EQ(*UrlDecode("a+b", false), "a+b");
  for (const char* bad : {"%", "%4", "%zz", "a%g1"}) {
    EXPECT_EQ(UrlDecode(bad, true).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(HttpConnection, ReadsPipelinedRequests) {
  SocketPair pair;
  HttpConnection connection(pair.server());
  pair.Write(
      "POST /api/v1/namespaces/default/pods?labelSelector=a%3Db&watch HTTP/1.1\r\n"
      "Host: x\r\nContent-Length: 2\r\nX-Multi: 1\r\nx-multi: 2\r\n\r\n{}"
      "\r\nGET /version HTTP/1.1\r\nConnection: close\r\n\r\n");
  absl::StatusOr<HttpRequest> first = connection.ReadRequest();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->method, "POST");
  EXPECT_EQ(first->path, "/api/v1/namespaces/default/pods");
  EXPECT_EQ(first->query.at("labelSelector"), "a=b");
  EXPECT_EQ(first->query.at("watch"), "");
  EXPECT_EQ(first->body, "{}");
  EXPECT_EQ(first->Header("x-multi"), "1,2");
  EXPECT_TRUE(first->keep_alive);
  absl::StatusOr<HttpRequest> second = connection.ReadRequest();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->path, "/version");
  EXPECT_FALSE(second->keep_alive);
  pair.CloseClient();
  EXPECT_EQ(connection.ReadRequest().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(HttpConnection, ReadsChunkedBodies) {
  SocketPair pair;
  HttpConnection connection(pair.server());
  pair.Write(
      "PUT /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\nA;name=value\r\n0123456789\r\n0\r\nTrailer: t\r\n\r\n");
  absl::StatusOr<HttpRequest> request = connection.ReadRequest();
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->body, "abc0123456789");
}

TEST(HttpConnection, RejectsMalformedAndOversizedRequests) {
  {
    SocketPair pair;
    HttpConnection connection(pair.server());
    pair.Write("GET /x\r\n\r\n");
    EXPECT_EQ(connection.ReadRequest().status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    SocketPair pair;
    HttpConnection connection(pair.server());
    pair.Write("GET /x HTTP/1.1\r\nContent-Length: lots\r\n\r\n");
    EXPECT_EQ(connection.ReadRequest().status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    SocketPair pair;
    HttpConnection connection(pair.server());
    pair.Write("POST /x HTTP/1.1\r\nContent-Length: 99999999999\r\n\r\n");
    EXPECT_EQ(connection.ReadRequest().status().code(), absl::StatusCode::kResourceExhausted);
  }
  {
    SocketPair pair;
    HttpConnection connection(pair.server());
    pair.Write("POST /x HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
    pair.CloseClient();
    EXPECT_EQ(connection.ReadRequest().status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(HttpConnection, WritesResponsesAndChunks) {
  SocketPair pair;
  HttpConnection connection(pair.server());
  ASSERT_TRUE(connection.WriteResponse(404, "application/json", "{}", false).ok());
  ASSERT_TRUE(connection.StartChunked(200, "application/json").ok());
  ASSERT_TRUE(connection.WriteChunk("0123456789abcdef\n").ok());
  ASSERT_TRUE(connection.WriteChunk("").ok());  // writes nothing: it would end the body
  ASSERT_TRUE(connection.EndChunked().ok());
  EXPECT_EQ(pair.ReadAll(),
            "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
            "Connection: close\r\n\r\n{}"
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
            "\r\n11\r\n0123456789abcdef\n\r\n0\r\n\r\n");
}

TEST(HttpConnection, SeesAPeerThatLeft) {
  SocketPair pair;
  HttpConnection connection(pair.server());
  EXPECT_FALSE(connection.PeerClosed());
  pair.Write("GET /next HTTP/1.1\r\n");  // unread bytes are not an end
  EXPECT_FALSE(connection.PeerClosed());
  pair.CloseClient();
  EXPECT_TRUE(connection.PeerClosed());
}

}  // namespace
}  // namespace psflow::kubetest
