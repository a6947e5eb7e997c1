#pragma once

// What Beast makes of a request, as the sessions read it (RequestParser over the buffered
// bytes): the oracle parsePlainRequest() is held to, by tests/unit/http/plain_request_test.cpp
// and the fuzz_plain_request fuzzer.

#include <boost/asio/buffer.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "http/plain_request.hpp"
#include "http/request_parser.hpp"
#include "sluice/http/message.hpp"

namespace sluice::http::testing {

struct ReadRequest {
  std::size_t consumed = 0;
  unsigned version = 0;
  bool keep_alive = false;
  Request request;
};

/// The request Beast reads from the start of `data` under `limits`; nullopt when it reads
/// none (an error, or more bytes needed).
inline std::optional<ReadRequest> readWithBeast(std::string_view data, const PlainLimits& limits) {
  ReadRequest out;
  RequestParser parser(out.request);
  parser.header_limit(static_cast<std::uint32_t>(limits.header_bytes));
  parser.body_limit(limits.body_bytes);
  parser.eager(true);
  boost::beast::error_code ec;
  while (!parser.is_done()) {
    const std::size_t used = parser.put(
        boost::asio::const_buffer(data.data() + out.consumed, data.size() - out.consumed), ec);
    out.consumed += used;
    if (ec || used == 0) {
      return std::nullopt;
    }
  }
  out.version = parser.version();
  out.keep_alive = parser.keepAlive();
  return out;
}

/// The request parsePlainRequest() reads from the start of `data`; nullopt when it declines.
/// Its header fields, views of `data`, are copied into the request (Request::addHeader()), so
/// that it outlives `data`.
inline std::optional<ReadRequest> readPlain(std::string_view data, const PlainLimits& limits) {
  ReadRequest out;
  out.consumed = parsePlainRequest(data, limits, out.request, out.version, out.keep_alive);
  if (out.consumed == 0) {
    return std::nullopt;
  }
  const std::vector<RequestHeader> views = out.request.headers;
  out.request.clearHeaders();
  for (const RequestHeader& header : views) {
    out.request.addHeader(header.name, header.value);
  }
  return out;
}

/// Empty when `plain` (a request parsePlainRequest() read) is what Beast read, else what
/// differs.
inline std::string_view differs(const ReadRequest& plain, const std::optional<ReadRequest>& beast) {
  if (!beast) {
    return "Beast reads no request";
  }
  if (plain.consumed != beast->consumed) {
    return "length";
  }
  if (plain.version != beast->version) {
    return "version";
  }
  if (plain.keep_alive != beast->keep_alive) {
    return "keep-alive";
  }
  const Request& a = plain.request;
  const Request& b = beast->request;
  if (a.method != b.method || a.target != b.target || a.body != b.body) {
    return "method, target or body";
  }
  if (a.headers.size() != b.headers.size()) {
    return "header count";
  }
  for (std::size_t i = 0; i < a.headers.size(); ++i) {
    if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value) {
      return "a header";
    }
  }
  return {};
}

}  // namespace sluice::http::testing
