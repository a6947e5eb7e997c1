#include "http/wire_writer.hpp"

#include <gtest/gtest.h>

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>

namespace sluice::http {
namespace {

namespace bhttp = boost::beast::http;

Response jsonResponse(int status, std::string body) {
  Response response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

std::string written(const Response& response, unsigned version = 11, bool keep_alive = true) {
  std::string out;
  writeResponse(out, response, version, keep_alive);
  return out;
}

TEST(WireWriterTest, WritesStatusLineFixedHeadersLengthAndBody) {
  EXPECT_EQ(written(jsonResponse(200, R"({"ok":true})")),
            "HTTP/1.1 200 OK\r\n"
            "Server: sluice\r\n"
            "Content-Type: application/json\r\n"
            "Content-Length: 11\r\n"
            "\r\n"
            R"({"ok":true})");
}

TEST(WireWriterTest, WritesHeadersInOrderThenPreparedHeaderLines) {
  Response response = jsonResponse(429, "{}");
  response.headers.push_back(Header{"Retry-After", "3"});
  response.headers.push_back(Header{"X-Two", "b"});
  response.header_lines = "RateLimit-Limit: 5\r\nRateLimit-Remaining: 0\r\n";
  EXPECT_EQ(written(response),
            "HTTP/1.1 429 Too Many Requests\r\n"
            "Server: sluice\r\n"
            "Content-Type: application/json\r\n"
            "Retry-After: 3\r\n"
            "X-Two: b\r\n"
            "RateLimit-Limit: 5\r\n"
            "RateLimit-Remaining: 0\r\n"
            "Content-Length: 2\r\n"
            "\r\n"
            "{}");
}

TEST(WireWriterTest, Http11ClosingConnectionSaysConnectionClose) {
  const std::string out = written(jsonResponse(200, "x"), 11, false);
  EXPECT_NE(out.find("\r\nConnection: close\r\n"), std::string::npos) << out;
  EXPECT_EQ(written(jsonResponse(200, "x"), 11, true).find("Connection:"), std::string::npos);
}

TEST(WireWriterTest, Http10KeepAliveSaysKeepAliveAndClosingSaysNothing) {
  const std::string keep = written(jsonResponse(200, "x"), 10, true);
  EXPECT_TRUE(keep.starts_with("HTTP/1.0 200 OK\r\n")) << keep;
  EXPECT_NE(keep.find("\r\nConnection: keep-alive\r\n"), std::string::npos) << keep;
  const std::string close = written(jsonResponse(200, "x"), 10, false);
  EXPECT_TRUE(close.starts_with("HTTP/1.0 200 OK\r\n")) << close;
  EXPECT_EQ(close.find("Connection:"), std::string::npos) << close;
}

TEST(WireWriterTest, StatusesWithoutBodyHaveNeitherLengthNorBody) {
  for (int status : {100, 204, 304}) {
    const std::string out = written(jsonResponse(status, "ignored"));
    EXPECT_EQ(out.find("Content-Length"), std::string::npos) << out;
    EXPECT_TRUE(out.ends_with("\r\n\r\n")) << out;
    EXPECT_EQ(out.find("ignored"), std::string::npos) << out;
  }
}

TEST(WireWriterTest, EmptyBodyHasLengthZero) {
  const std::string out = written(jsonResponse(200, ""));
  EXPECT_TRUE(out.ends_with("Content-Length: 0\r\n\r\n")) << out;
}

TEST(WireWriterTest, UnknownStatusHasUnknownReason) {
  EXPECT_TRUE(written(jsonResponse(599, "")).starts_with("HTTP/1.1 599 Unknown\r\n"));
}

TEST(WireWriterTest, CarriageReturnsAndLineFeedsNeverReachTheWireInsideHeaders) {
  Response response = jsonResponse(200, "body\r\nstays");
  response.content_type = "text/plain\r\nX-Injected: 1";
  response.headers.push_back(Header{"X-Na\rme", "va\nlue\r\nSet-Cookie: evil"});
  const std::string out = written(response);
  EXPECT_NE(out.find("\r\nContent-Type: text/plainX-Injected: 1\r\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\r\nX-Name: valueSet-Cookie: evil\r\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("\r\nX-Injected"), std::string::npos) << out;
  EXPECT_EQ(out.find("\r\nSet-Cookie"), std::string::npos) << out;
  // The body is bytes, not a header: it is sent as given.
  EXPECT_TRUE(out.ends_with("Content-Length: 11\r\n\r\nbody\r\nstays")) << out;
}

TEST(WireWriterTest, AppendsSoPipelinedAnswersShareOneBuffer) {
  std::string out = "previous";
  writeResponse(out, jsonResponse(200, "a"), 11, true);
  writeResponse(out, jsonResponse(404, "b"), 11, false);
  EXPECT_TRUE(out.starts_with("previousHTTP/1.1 200 OK\r\n")) << out;
  const std::size_t second = out.find("HTTP/1.1 404 Not Found\r\n");
  ASSERT_NE(second, std::string::npos) << out;
  EXPECT_TRUE(out.ends_with("Connection: close\r\nContent-Length: 1\r\n\r\nb")) << out;
}

TEST(WireWriterTest, LongHeadersAndBodiesAndOtherContentTypesAreWrittenWhole) {
  // Longer than the writer's inline buffer (512 bytes), in pieces of every size.
  Response response = jsonResponse(200, std::string(5000, 'b') + "end");
  response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  response.headers.push_back(Header{"X-Long", std::string(700, 'v')});
  std::string lines;
  for (int i = 0; i < 40; ++i) {
    lines += "X-Line-" + std::to_string(i) + ": " + std::string(static_cast<std::size_t>(i), 'x') +
             "\r\n";
  }
  response.header_lines = lines;
  std::string expected =
      "HTTP/1.1 200 OK\r\nServer: sluice\r\n"
      "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
      "X-Long: " +
      std::string(700, 'v') + "\r\n" + lines + "Content-Length: 5003\r\n\r\n" +
      std::string(5000, 'b') + "end";
  EXPECT_EQ(written(response), expected);
}

TEST(WireWriterTest, BeastParsesWhatItWrites) {
  Response response = jsonResponse(429, R"({"overallCode":"OVER_LIMIT"})");
  response.headers.push_back(Header{"Retry-After", "7"});
  response.header_lines = "RateLimit-Policy: 5;w=60\r\n";
  const std::string out = written(response, 11, false);

  bhttp::response_parser<bhttp::string_body> parser;
  parser.eager(true);
  boost::beast::error_code ec;
  const std::size_t used = parser.put(boost::asio::buffer(out), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(used, out.size());
  ASSERT_TRUE(parser.is_done());
  const auto& parsed = parser.get();
  EXPECT_EQ(parsed.result_int(), 429u);
  EXPECT_EQ(parsed.version(), 11u);
  EXPECT_FALSE(parsed.keep_alive());
  EXPECT_EQ(parsed[bhttp::field::server], "sluice");
  EXPECT_EQ(parsed[bhttp::field::content_type], "application/json");
  EXPECT_EQ(parsed[bhttp::field::retry_after], "7");
  EXPECT_EQ(parsed["RateLimit-Policy"], "5;w=60");
  EXPECT_EQ(parsed.body(), response.body);
}

}  // namespace
}  // namespace sluice::http
