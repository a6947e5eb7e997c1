#include "http/request_parser.hpp"

#include <gtest/gtest.h>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace sluice::http {
namespace {

namespace bhttp = boost::beast::http;

/// What a parser made of a request: the fields the sessions use.
struct Parsed {
  boost::beast::error_code ec;
  std::string method;
  std::string target;
  unsigned version = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool keep_alive = false;
  bool done = false;

  bool operator==(const Parsed&) const = default;
};

/// Feeds `wire` to `parser` in pieces of `step` bytes (0: all at once), as the sessions do:
/// the bytes a put() did not use are offered again with the next ones.
template <typename Parser>
boost::beast::error_code feed(Parser& parser, const std::string& wire, std::size_t step) {
  parser.eager(true);
  parser.header_limit(1024);
  parser.body_limit(256);
  std::size_t offered = step == 0 ? wire.size() : 0;
  std::size_t used = 0;
  boost::beast::error_code ec;
  while (!parser.is_done()) {
    if (step != 0) {
      offered = std::min(wire.size(), offered + step);
    }
    std::size_t n = parser.put(boost::asio::buffer(wire.data() + used, offered - used), ec);
    used += n;
    if (ec == bhttp::error::need_more) {
      ec = {};
      if (offered == wire.size()) {
        return bhttp::error::need_more;
      }
      continue;
    }
    if (ec) {
      return ec;
    }
    if (n == 0 && offered == wire.size()) {
      break;
    }
  }
  return ec;
}

Parsed withBeast(const std::string& wire, std::size_t step) {
  bhttp::request_parser<bhttp::string_body> parser;
  Parsed p;
  p.ec = feed(parser, wire, step);
  p.done = parser.is_done();
  if (!p.ec && p.done) {
    const auto& m = parser.get();
    p.method = std::string(m.method_string());
    p.target = std::string(m.target());
    p.version = m.version();
    for (const auto& field : m) {
      p.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
    }
    p.body = m.body();
    p.keep_alive = m.keep_alive();
  }
  return p;
}

Parsed withOurs(const std::string& wire, std::size_t step, Request& request) {
  RequestParser parser(request);
  Parsed p;
  p.ec = feed(parser, wire, step);
  p.done = parser.is_done();
  if (!p.ec && p.done) {
    p.method = request.method;
    p.target = request.target;
    p.version = parser.version();
    for (const auto& h : request.headers) {
      p.headers.emplace_back(std::string(h.name), std::string(h.value));
    }
    p.body = request.body;
    p.keep_alive = parser.keepAlive();
  }
  return p;
}

TEST(RequestParserTest, ReadsWhatBeastsRequestParserReads) {
  const std::vector<std::string> requests = {
      "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n", "GET /rules?x=1&y HTTP/1.0\r\n\r\n",
      "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
      "GET / HTTP/1.0\r\nconnection: Keep-Alive, foo\r\n\r\n",
      "GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
      "GET / HTTP/1.1\r\nConnection: foo\r\nConnection: close\r\n\r\n",  // the first decides
      "GET / HTTP/1.1\r\nConnection: upgrade, close\r\n\r\n",
      "POST /shouldAllowRequest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: 13\r\n\r\n{\"domain\":1}\n",
      "POST /json HTTP/1.1\r\nx-MiXeD-case:   padded value \t \r\nX-Empty:\r\n"
      "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n",
      "PURGE /cache HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
      "OPTIONS * HTTP/1.1\r\nA: 1\r\nA: 2\r\nB: 3\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
      // Errors: the same ones.
      "GET / HTTP/1.1\r\nBad Header: x\r\n\r\n", "G@T / HTTP/1.1\r\n\r\n", "GET / HTTP/2.0\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 1000\r\n\r\n",              // body limit
      "GET / HTTP/1.1\r\nX: " + std::string(2000, 'v') + "\r\n\r\n",  // header limit
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
      "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabc",  // incomplete
  };
  Request reused;  // one Request for all, as a session's: nothing may leak between them
  for (const std::string& wire : requests) {
    for (std::size_t step : {std::size_t{0}, std::size_t{1}, std::size_t{7}}) {
      Parsed beast = withBeast(wire, step);
      Parsed ours = withOurs(wire, step, reused);
      EXPECT_EQ(ours.ec, beast.ec) << wire << " step " << step;
      EXPECT_EQ(ours.done, beast.done) << wire;
      EXPECT_EQ(ours.method, beast.method) << wire;
      EXPECT_EQ(ours.target, beast.target) << wire;
      EXPECT_EQ(ours.version, beast.version) << wire;
      EXPECT_EQ(ours.headers, beast.headers) << wire;
      EXPECT_EQ(ours.body, beast.body) << wire;
      EXPECT_EQ(ours.keep_alive, beast.keep_alive) << wire;
    }
  }
}

TEST(RequestParserTest, EmptiesTheRequestItFillsAndKeepsItsStorage) {
  Request request;
  Parsed first = withOurs(
      "POST /a HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nContent-Length: 3\r\n\r\nabc", 0, request);
  ASSERT_TRUE(first.done);
  const char* body_storage = request.body.data();
  Parsed second = withOurs("GET /b HTTP/1.1\r\nD: 4\r\n\r\n", 0, request);
  ASSERT_TRUE(second.done);
  EXPECT_EQ(request.method, "GET");
  EXPECT_EQ(request.target, "/b");
  ASSERT_EQ(request.headers.size(), 1u);
  EXPECT_EQ(request.headers[0].name, "D");
  EXPECT_EQ(request.headers[0].value, "4");
  EXPECT_TRUE(request.body.empty());
  EXPECT_EQ(request.body.data(), body_storage);
  EXPECT_EQ(request.header("expect"), "");
}

TEST(RequestTest, CopiesOwnTheirHeaderBytesAndMovesViewTheirOwn) {
  auto original = std::make_unique<Request>();
  original->addHeader("A", "1");  // short: a string's own bytes, which a move does not keep
  original->addHeader("Long-Header-Name", std::string(100, 'v'));
  const std::string outside = "X-Outside";
  original->headers.push_back(RequestHeader{outside, "kept"});
  Request copy = *original;
  Request assigned;
  assigned.addHeader("Old", "value");
  assigned = *original;
  Request moved = std::move(*original);
  original.reset();
  for (const Request* r : {&copy, &assigned, &moved}) {
    ASSERT_EQ(r->headers.size(), 3u);
    EXPECT_EQ(r->headers[0].name, "A");
    EXPECT_EQ(r->headers[0].value, "1");
    EXPECT_EQ(r->header("long-header-name"), std::string(100, 'v'));
    EXPECT_EQ(r->header("x-outside"), "kept");
  }
  // A copy may outlive the buffer its original viewed (a connection's): it has its own bytes.
  EXPECT_NE(copy.headers[2].name.data(), outside.data());
  EXPECT_NE(assigned.headers[2].name.data(), outside.data());
  // A move keeps the original's views of other bytes.
  EXPECT_EQ(moved.headers[2].name.data(), outside.data());
  moved.clearHeaders();
  EXPECT_TRUE(moved.headers.empty());
  EXPECT_EQ(moved.header("A"), "");
}

TEST(RequestParserTest, VersionIsElevenBeforeTheRequestLine) {
  Request request;
  RequestParser parser(request);
  EXPECT_EQ(parser.version(), 11u);
}

}  // namespace
}  // namespace sluice::http
