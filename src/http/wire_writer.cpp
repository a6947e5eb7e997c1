#include "http/wire_writer.hpp"

#include <cstdint>
#include <string_view>

#include "sluice/common/json_writer.hpp"

namespace sluice::http {
namespace {

constexpr std::string_view kJsonContentType = "application/json";

/// `text` without CR and LF.
void putClean(Appender& out, std::string_view text) {
  if (text.find_first_of("\r\n") == std::string_view::npos) {
    out.put(text);
    return;
  }
  for (char c : text) {
    if (c != '\r' && c != '\n') {
      out.put(c);
    }
  }
}

}  // namespace

void writeResponse(std::string& out, const Response& response, unsigned version, bool keep_alive) {
  // Through an Appender: the pieces of the head are gathered in its buffer and reach `out`
  // in one or two appends.
  Appender a(out);
  a.put(version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ", 9);
  a.number(response.status);
  a.put(' ');
  a.put(reasonPhrase(response.status));
  if (response.content_type == kJsonContentType) {
    static constexpr std::string_view kHead =
        "\r\nServer: sluice\r\nContent-Type: application/json\r\n";
    a.put(kHead.data(), kHead.size());
  } else {
    static constexpr std::string_view kHead = "\r\nServer: sluice\r\nContent-Type: ";
    a.put(kHead.data(), kHead.size());
    putClean(a, response.content_type);
    a.put("\r\n", 2);
  }
  for (const auto& header : response.headers) {
    putClean(a, header.name);
    a.put(": ", 2);
    putClean(a, header.value);
    a.put("\r\n", 2);
  }
  a.put(response.header_lines);
  if (version >= 11 && !keep_alive) {
    static constexpr std::string_view kClose = "Connection: close\r\n";
    a.put(kClose.data(), kClose.size());
  } else if (version == 10 && keep_alive) {
    static constexpr std::string_view kKeepAlive = "Connection: keep-alive\r\n";
    a.put(kKeepAlive.data(), kKeepAlive.size());
  }
  bool no_body = response.status < 200 || response.status == 204 || response.status == 304;
  if (!no_body) {
    static constexpr std::string_view kLength = "Content-Length: ";
    a.put(kLength.data(), kLength.size());
    a.number(static_cast<std::int64_t>(response.body.size()));
    a.put("\r\n\r\n", 4);
    a.put(response.body);
  } else {
    a.put("\r\n", 2);
  }
  a.finish();
}

}  // namespace sluice::http
