#include "sluice/http/message.hpp"

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <utility>

#include "http/header_text.hpp"

namespace sluice::http {

namespace {

constexpr std::string_view kJson = "application/json";

/// Storage of answers already written, for the thread's next ones: a few, for pipelined
/// answers written together; the last one given is the first taken (still in the cache).
struct SpareResponses {
  static constexpr std::size_t kMax = 4;
  std::array<Response, kMax> responses;
  std::size_t count = 0;
};

thread_local SpareResponses t_spares;

/// `spare` emptied for a new answer: built in the caller's return slot (one return of one
/// named object), so that the answer moves once on its way out of the spares.
Response reusedResponse(Response& spare) {
  Response response = std::move(spare);
  response.status = 200;
  if (response.content_type != kJson) {
    response.content_type.assign(kJson);
  }
  response.headers.clear();
  response.header_lines.clear();
  response.body.clear();
  response.hold = std::chrono::microseconds(0);
  return response;
}

}  // namespace

Response freshResponse() {
  SpareResponses& spares = t_spares;
  if (spares.count == 0) {
    return Response{};
  }
  return reusedResponse(spares.responses[--spares.count]);
}

void recycleResponse(Response&& response) {
  SpareResponses& spares = t_spares;
  // A moved-from answer has no storage to give.
  if (spares.count == SpareResponses::kMax ||
      response.body.capacity() + response.header_lines.capacity() <= 2 * std::string().capacity()) {
    return;
  }
  spares.responses[spares.count++] = std::move(response);
}

Request::Request(const Request& other)
    : method(other.method),
      target(other.target),
      path(other.path),
      body(other.body),
      peer(other.peer) {
  // Every field is copied into the copy's own storage, those that viewed a connection's read
  // buffer too: a copy may outlive the buffer.
  std::size_t bytes = 0;
  for (const RequestHeader& h : other.headers) {
    bytes += h.name.size() + h.value.size();
  }
  header_bytes_.reserve(bytes);
  headers.reserve(other.headers.size());
  for (const RequestHeader& h : other.headers) {
    addHeader(h.name, h.value);
  }
}

Request::Request(Request&& other) noexcept
    : method(std::move(other.method)),
      target(std::move(other.target)),
      path(std::move(other.path)),
      headers(std::move(other.headers)),
      body(std::move(other.body)),
      peer(std::move(other.peer)) {
  const char* base = other.header_bytes_.data();
  const std::size_t size = other.header_bytes_.size();
  header_bytes_ = std::move(other.header_bytes_);
  rebaseHeaders(base, size);
}

Request& Request::operator=(const Request& other) {
  if (this != &other) {
    Request copy(other);
    *this = std::move(copy);
  }
  return *this;
}

Request& Request::operator=(Request&& other) noexcept {
  if (this != &other) {
    method = std::move(other.method);
    target = std::move(other.target);
    path = std::move(other.path);
    headers = std::move(other.headers);
    body = std::move(other.body);
    peer = std::move(other.peer);
    const char* base = other.header_bytes_.data();
    const std::size_t size = other.header_bytes_.size();
    header_bytes_ = std::move(other.header_bytes_);
    rebaseHeaders(base, size);
  }
  return *this;
}

void Request::rebaseHeaders(const char* base, std::size_t size) {
  const char* now = header_bytes_.data();
  if (now == base) {
    return;
  }
  // Compared as addresses: a view of another buffer (the connection's) is left as it is.
  const auto from = reinterpret_cast<std::uintptr_t>(base);
  const auto inside = [&](std::string_view v) {
    const auto at = reinterpret_cast<std::uintptr_t>(v.data());
    return !v.empty() && at >= from && at - from + v.size() <= size;
  };
  const auto moved = [&](std::string_view v) {
    return std::string_view(now + (reinterpret_cast<std::uintptr_t>(v.data()) - from), v.size());
  };
  for (RequestHeader& h : headers) {
    if (inside(h.name)) {
      h.name = moved(h.name);
    }
    if (inside(h.value)) {
      h.value = moved(h.value);
    }
  }
}

void Request::addHeader(std::string_view name, std::string_view value) {
  const char* base = header_bytes_.data();
  const std::size_t size = header_bytes_.size();
  header_bytes_.append(name).append(value);
  rebaseHeaders(base, size);
  const char* at = header_bytes_.data() + size;
  headers.push_back(RequestHeader{std::string_view(at, name.size()),
                                  std::string_view(at + name.size(), value.size())});
}

void Request::clearHeaders() {
  headers.clear();
  header_bytes_.clear();
}

std::string_view Request::header(std::string_view name) const {
  for (const auto& h : headers) {
    if (equalsIgnoreCase(h.name, name)) {
      return h.value;
    }
  }
  return {};
}

std::string_view Response::header(std::string_view name) const {
  for (const auto& h : headers) {
    if (equalsIgnoreCase(h.name, name)) {
      return h.value;
    }
  }
  std::string_view lines = header_lines;
  while (!lines.empty()) {
    std::size_t end = lines.find("\r\n");
    std::string_view line = lines.substr(0, end);
    lines = end == std::string_view::npos ? std::string_view() : lines.substr(end + 2);
    std::size_t colon = line.find(':');
    if (colon != std::string_view::npos && equalsIgnoreCase(line.substr(0, colon), name)) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') {
        value.remove_prefix(1);
      }
      return value;
    }
  }
  return {};
}

Response jsonResponse(int status, const nlohmann::ordered_json& body) {
  Response response;
  response.status = status;
  // dump() with replace: a message quoting invalid UTF-8 input must still be valid JSON.
  response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  return response;
}

Response jsonError(int status, std::string_view message) {
  return jsonResponse(status, {{"error", std::string(message)}});
}

std::string_view reasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Payload Too Large";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 503:
      return "Service Unavailable";
    default:
      return "Unknown";
  }
}

}  // namespace sluice::http
