#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace sluice {

/// The value of one hexadecimal digit (either case), or -1 if `ch` is not one.
/// Shared by the percent-decoders of forward auth and Redis URLs.
constexpr int hexValue(char ch) {
  if (ch >= '0' && ch <= '9') {
    return ch - '0';
  }
  if (ch >= 'a' && ch <= 'f') {
    return ch - 'a' + 10;
  }
  if (ch >= 'A' && ch <= 'F') {
    return ch - 'A' + 10;
  }
  return -1;
}

/// Exactly 16 lower-case hex digits -> their value (a reservation id's nonce and
/// fingerprint); false, `value` untouched, for any other text.
inline bool readHex16(std::string_view text, std::uint64_t& value) {
  static constexpr auto kValue = [] {  // each byte's digit value, or 16
    std::array<std::uint8_t, 256> table{};
    for (std::size_t c = 0; c < 256; ++c) {
      table[c] = c >= '0' && c <= '9'   ? static_cast<std::uint8_t>(c - '0')
                 : c >= 'a' && c <= 'f' ? static_cast<std::uint8_t>(c - 'a' + 10)
                                        : 16;
    }
    return table;
  }();
  if (text.size() != 16) {
    return false;
  }
  std::uint64_t v = 0;
  for (const char c : text) {
    const std::uint8_t digit = kValue[static_cast<unsigned char>(c)];
    if (digit == 16) {
      return false;
    }
    v = v << 4 | digit;
  }
  value = v;
  return true;
}

}  // namespace sluice
