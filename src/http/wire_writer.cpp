#include "http/wire_writer.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "sluice/common/words.hpp"

namespace sluice::http {
namespace {

constexpr std::string_view kJsonContentType = "application/json";

using words::Cursor;

/// The status line and the fixed headers of the usual answers (HTTP/1.1, JSON), else empty.
std::string_view usualHead(const Response& response, unsigned version) {
  if (version != 11 || response.content_type != kJsonContentType) {
    return {};
  }
  switch (response.status) {
    case 200:
      return "HTTP/1.1 200 OK\r\nServer: sluice\r\nContent-Type: application/json\r\n";
    case 429:
      return "HTTP/1.1 429 Too Many Requests\r\nServer: sluice\r\n"
             "Content-Type: application/json\r\n";
    default:
      return {};
  }
}

// The bytes around what varies, as upper bounds: the status line and the fixed headers but
// the reason and the content type, the connection line and the length line.
constexpr std::size_t kStatusRoom =
    sizeof "HTTP/1.1 \r\nServer: sluice\r\nContent-Type: \r\n" + words::kMaxDecimalBytes;
constexpr std::size_t kTailRoom =
    sizeof "Connection: keep-alive\r\nContent-Length: \r\n\r\n" + words::kMaxDecimalBytes;

}  // namespace

void writeResponse(std::string& out, const Response& response, unsigned version, bool keep_alive) {
  out.resize(writeResponseAt(out, out.size(), response, version, keep_alive));
}

std::size_t writeResponseAt(std::string& out, std::size_t at, const Response& response,
                            unsigned version, bool keep_alive) {
  // At most one resize of `out` for the whole answer: its pieces are copied in place, not
  // appended one by one.
  const std::string_view usual = usualHead(response, version);
  const std::string_view reason = usual.empty() ? reasonPhrase(response.status) : "";
  std::size_t room = kTailRoom + response.header_lines.size() + response.body.size();
  room += usual.empty() ? kStatusRoom + reason.size() + response.content_type.size() : usual.size();
  for (const auto& header : response.headers) {
    room += header.name.size() + header.value.size() + 4;
  }
  if (out.size() < at + room) {
    out.resize(at + room);
  }
  Cursor a(out.data() + at);
  if (!usual.empty()) {
    a.text(usual);
  } else {
    if (version == 10) {
      a.literal("HTTP/1.0 ");
    } else {
      a.literal("HTTP/1.1 ");
    }
    a.number(response.status);
    a.literal(" ");
    a.text(reason);
    if (response.content_type == kJsonContentType) {
      a.literal("\r\nServer: sluice\r\nContent-Type: application/json\r\n");
    } else {
      a.literal("\r\nServer: sluice\r\nContent-Type: ");
      a.clean(response.content_type);
      a.literal("\r\n");
    }
  }
  for (const auto& header : response.headers) {
    a.clean(header.name);
    a.literal(": ");
    a.clean(header.value);
    a.literal("\r\n");
  }
  a.text(response.header_lines);
  if (version >= 11 && !keep_alive) {
    a.literal("Connection: close\r\n");
  } else if (version == 10 && keep_alive) {
    a.literal("Connection: keep-alive\r\n");
  }
  bool no_body = response.status < 200 || response.status == 204 || response.status == 304;
  if (!no_body) {
    a.literal("Content-Length: ");
    a.number(static_cast<std::int64_t>(response.body.size()));
    a.literal("\r\n\r\n");
    a.text(response.body);
  } else {
    a.literal("\r\n");
  }
  return static_cast<std::size_t>(a.at() - out.data());
}

}  // namespace sluice::http
