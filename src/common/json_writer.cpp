#include "sluice/common/json_writer.hpp"

#include <array>

namespace sluice {
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

void JsonWriter::string(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  // Bytes that JSON needs escaped or that start a UTF-8 sequence to check.
  static constexpr auto kSpecial = [] {
    std::array<bool, 256> table{};
    for (std::size_t c = 0; c < 256; ++c) {
      table[c] = c < 0x20 || c == '"' || c == '\\' || c >= 0x80;
    }
    return table;
  }();
  put('"');
  std::size_t i = 0;
  while (i < text.size()) {
    // Copy the longest run that needs no escaping at once.
    std::size_t run = i;
    while (run < text.size() && !kSpecial[static_cast<unsigned char>(text[run])]) {
      ++run;
    }
    put(text.data() + i, run - i);
    i = run;
    if (i == text.size()) {
      break;
    }
    auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      std::size_t n = utf8Length(text, i);
      if (n == 0) {
        put(kReplacement);
        ++i;
      } else {
        put(text.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        put("\\\"", 2);
        break;
      case '\\':
        put("\\\\", 2);
        break;
      case '\b':
        put("\\b", 2);
        break;
      case '\f':
        put("\\f", 2);
        break;
      case '\n':
        put("\\n", 2);
        break;
      case '\r':
        put("\\r", 2);
        break;
      case '\t':
        put("\\t", 2);
        break;
      default: {
        const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        put(esc, sizeof esc);
      }
    }
    ++i;
  }
  put('"');
}

void Appender::number(std::int64_t number) {
  char* p = reserve(words::kMaxDecimalBytes);
  advance(static_cast<std::size_t>(words::writeDecimal(number, p) - p));
}

void JsonWriter::largeValue(std::int64_t number) {
  separate();
  out_.number(number);
}

}  // namespace sluice
