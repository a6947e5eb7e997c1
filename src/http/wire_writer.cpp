#include "http/wire_writer.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <string_view>

namespace sluice::http {

void writeResponse(std::string& out, const Response& response, unsigned version, bool keep_alive) {
  auto number = [&out](std::uint64_t value) {
    std::array<char, 24> digits{};
    auto result = std::to_chars(digits.data(), digits.data() + digits.size(), value);
    out.append(digits.data(), static_cast<std::size_t>(result.ptr - digits.data()));
  };
  auto clean = [&out](std::string_view text) {
    if (text.find_first_of("\r\n") == std::string_view::npos) {
      out += text;
      return;
    }
    for (char c : text) {
      if (c != '\r' && c != '\n') {
        out += c;
      }
    }
  };
  out += version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
  number(static_cast<std::uint64_t>(response.status));
  out += ' ';
  out += reasonPhrase(response.status);
  out += "\r\nServer: sluice\r\nContent-Type: ";
  clean(response.content_type);
  out += "\r\n";
  for (const auto& header : response.headers) {
    clean(header.name);
    out += ": ";
    clean(header.value);
    out += "\r\n";
  }
  out += response.header_lines;
  if (version >= 11 && !keep_alive) {
    out += "Connection: close\r\n";
  } else if (version == 10 && keep_alive) {
    out += "Connection: keep-alive\r\n";
  }
  bool no_body = response.status < 200 || response.status == 204 || response.status == 304;
  if (!no_body) {
    out += "Content-Length: ";
    number(response.body.size());
    out += "\r\n";
  }
  out += "\r\n";
  if (!no_body) {
    out += response.body;
  }
}

}  // namespace sluice::http
