#include "http/json_writer.hpp"

#include <array>
#include <charconv>

namespace sluice::http {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

/// The length of the well-formed UTF-8 sequence at `pos` (RFC 3629: no overlongs, no
/// surrogates, nothing above U+10FFFF), or 0 if the bytes there are not one.
std::size_t utf8Length(std::string_view s, std::size_t pos) {
  auto at = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  unsigned char b0 = at(pos);
  std::size_t left = s.size() - pos;
  auto cont = [&](std::size_t i, unsigned char lo = 0x80, unsigned char hi = 0xBF) {
    return at(pos + i) >= lo && at(pos + i) <= hi;
  };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    return left >= 2 && cont(1) ? 2 : 0;
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (left < 3) {
      return 0;
    }
    unsigned char lo = b0 == 0xE0 ? 0xA0 : 0x80;
    unsigned char hi = b0 == 0xED ? 0x9F : 0xBF;
    return cont(1, lo, hi) && cont(2) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (left < 4) {
      return 0;
    }
    unsigned char lo = b0 == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return cont(1, lo, hi) && cont(2) && cont(3) ? 4 : 0;
  }
  return 0;
}

}  // namespace

void appendJsonString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  // Bytes that JSON needs escaped or that start a UTF-8 sequence to check.
  static constexpr auto kSpecial = [] {
    std::array<bool, 256> table{};
    for (std::size_t c = 0; c < 256; ++c) {
      table[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x80;
    }
    return table;
  }();
  out += '"';
  std::size_t i = 0;
  while (i < text.size()) {
    // Copy the longest run that needs no escaping in one append.
    std::size_t run = i;
    while (run < text.size() && !kSpecial[static_cast<unsigned char>(text[run])]) {
      ++run;
    }
    out.append(text.data() + i, run - i);
    i = run;
    if (i == text.size()) {
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      std::size_t n = utf8Length(text, i);
      if (n == 0) {
        out += kReplacement;
        ++i;
      } else {
        out.append(text.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default: {
        std::array<char, 6> esc{'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out.append(esc.data(), esc.size());
      }
    }
    ++i;
  }
  out += '"';
}

void JsonWriter::separate() {
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (!first_) {
    out_ += ',';
  }
  first_ = false;
}

void JsonWriter::open(char bracket) {
  separate();
  out_ += bracket;
  first_ = true;
}

void JsonWriter::close(char bracket) {
  out_ += bracket;
  first_ = false;
}

void JsonWriter::key(std::string_view name) {
  separate();
  out_ += '"';
  out_ += name;
  out_ += "\":";
  after_key_ = true;
}

void JsonWriter::value(std::string_view text) {
  separate();
  appendJsonString(out_, text);
}

void JsonWriter::value(bool flag) {
  separate();
  out_ += flag ? "true" : "false";
}

void JsonWriter::value(std::int64_t number) {
  separate();
  std::array<char, 24> digits{};
  auto [end, ec] = std::to_chars(digits.data(), digits.data() + digits.size(), number);
  out_.append(digits.data(), static_cast<std::size_t>(end - digits.data()));
}

void JsonWriter::raw(std::string_view json) {
  separate();
  out_ += json;
}

}  // namespace sluice::http
