#pragma once

#include <chrono>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

/// The HTTP messages the router and the handlers see. They carry no Beast types, so the
/// handlers, codecs and their tests compile without Beast; only session.cpp converts.
namespace sluice::http {

/// Request::peer of a connection on a unix socket. Forward auth takes such a peer for a
/// trusted proxy: the socket file's permissions decide who may connect.
inline constexpr std::string_view kUnixSocketPeer = "unix";

struct Header {
  std::string name;
  std::string value;
};

/// One header field of a request: its name as sent and its value without surrounding
/// whitespace, as views of bytes that live as long as the request (see Request::headers).
struct RequestHeader {
  std::string_view name;
  std::string_view value;
};

/// One parsed request. The body is complete (bounded by ServerOptions::max_body_bytes).
struct Request {
  std::string method;  ///< "GET", "POST", ... as sent
  std::string target;  ///< request-target as sent, e.g. "/rules?x=1"
  std::string path;    ///< target without the query string
  /// The header fields in the order sent. A request the server read whole from a connection
  /// views them where they arrived, in the connection's read buffer (no copy); others, added
  /// with addHeader(), view the request's own copy. Either way they are valid as long as the
  /// request is (for a handler: during its call, see Handler). A copy of the request copies
  /// every field into its own storage; a move keeps the views (of the moved storage).
  std::vector<RequestHeader> headers;
  std::string body;
  /// The TCP peer's address without port, e.g. "127.0.0.1", "::1"; kUnixSocketPeer on a
  /// unix socket, whose peers have no address.
  std::string peer;

  Request() = default;
  Request(const Request& other);
  Request(Request&& other) noexcept;
  Request& operator=(const Request& other);
  Request& operator=(Request&& other) noexcept;
  ~Request() = default;

  /// The first header with this name (case-insensitive); empty when absent.
  std::string_view header(std::string_view name) const;

  /// Appends a header field whose bytes the request copies and keeps.
  void addHeader(std::string_view name, std::string_view value);

  /// Removes every header field (the storage keeps its capacity).
  void clearHeaders();

 private:
  /// The views of `headers` into [base, base + size), an earlier place of header_bytes_,
  /// moved to the same offsets in header_bytes_.
  void rebaseHeaders(const char* base, std::size_t size);

  std::string header_bytes_;  // what addHeader() copied: names and values, back to back
};

/// One answer. `hold` delays sending it (leaky-bucket shaping) on a timer of the session's
/// I/O thread; no thread blocks.
struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<Header> headers;
  /// More headers, already serialized as `Name: value\r\n` lines, sent after `headers`:
  /// the decision endpoints write their rate-limit headers here without a string each.
  std::string header_lines;
  std::string body;
  std::chrono::microseconds hold{0};

  /// The first header with this name (case-insensitive) in `headers`, then in
  /// `header_lines`; empty when absent.
  std::string_view header(std::string_view name) const;
};

/// An empty Response (status 200, application/json) to fill: this thread's spare, whose
/// strings keep the capacity of an answer already written, so that a decision's answer
/// allocates nothing once the thread is warm; a new Response when there is no spare.
Response freshResponse();

/// Gives the storage of an answer that is no longer needed to freshResponse() (a few spares
/// per thread; an answer without storage is not kept). The answer is left as it was when it
/// is not taken.
void recycleResponse(Response&& response);

/// Hands a response back to the session. Must be called exactly once, on the I/O thread
/// that received the request (synchronously or later); the session lives until then.
using Respond = std::function<void(Response)>;

/// Serves one request. The request reference is valid only during the call.
using Handler = std::function<void(const Request&, Respond)>;

/// `{"error": message}` with the given status.
Response jsonError(int status, std::string_view message);

/// The one JSON answer helper: `body` on one line plus "\n" (invalid UTF-8 replaced).
Response jsonResponse(int status, const nlohmann::ordered_json& body);

/// The standard reason phrase ("Too Many Requests"); "Unknown" for others.
std::string_view reasonPhrase(int status);

}  // namespace sluice::http
