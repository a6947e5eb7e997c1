#include "sluice/http/message.hpp"

#include <array>
#include <nlohmann/json.hpp>

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

}  // namespace

Response freshResponse() {
  SpareResponses& spares = t_spares;
  if (spares.count == 0) {
    return Response{};
  }
  Response response = std::move(spares.responses[--spares.count]);
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

void recycleResponse(Response&& response) {
  SpareResponses& spares = t_spares;
  // A moved-from answer has no storage to give.
  if (spares.count == SpareResponses::kMax ||
      response.body.capacity() + response.header_lines.capacity() <= 2 * std::string().capacity()) {
    return;
  }
  spares.responses[spares.count++] = std::move(response);
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
