#pragma once

#include <cstdint>
#include <string_view>

#include "sluice/common/words.hpp"

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

namespace hex_detail {

using words::kHighs;
using words::kOnes;

/// True when the 8 bytes of `x` are lower-case hex digits; `letters` then has the high bit
/// of each byte that is a letter.
inline bool hexWord(std::uint64_t x, std::uint64_t& letters) {
  if ((x & kHighs) != 0) {
    return false;
  }
  // Each byte is under 0x80 now, so adding up to 0x7f to it carries into no other byte:
  // the high bit of (byte + 0x80 - c) says byte >= c.
  const auto atLeast = [x](unsigned char c) { return x + kOnes * (0x80U - c); };
  const std::uint64_t digit = atLeast('0') & ~atLeast('9' + 1);
  letters = atLeast('a') & ~atLeast('f' + 1) & kHighs;
  return ((digit | letters) & kHighs) == kHighs;
}

/// The 8 lower-case hex digits at `p` (the first the most significant) -> their value, all
/// eight bytes at once; false if a byte is not one.
inline bool readHex8(const char* p, std::uint32_t& value) {
  const std::uint64_t x = words::load(p);
  std::uint64_t letters = 0;
  if (!hexWord(x, letters)) {
    return false;
  }
  // Nibble values ('a' & 0xf is 1: 9 more), then pairs, quads and the eight put together.
  std::uint64_t v = (x & (kOnes * 0x0f)) + (letters >> 7) * 9;
  v = ((v << 4) | (v >> 8)) & 0x00ff00ff00ff00ffULL;
  v = ((v << 8) | (v >> 16)) & 0x0000ffff0000ffffULL;
  v = ((v << 16) | (v >> 32)) & 0xffffffffULL;
  value = static_cast<std::uint32_t>(v);
  return true;
}

/// `value` as 8 lower-case hex digits (the most significant first) at `out`.
inline void writeHex8(std::uint32_t value, char* out) {
  std::uint64_t x = value;
  // One nibble per byte, the most significant in the lowest byte.
  x = ((x & 0xffff0000ULL) >> 16) | ((x & 0x0000ffffULL) << 32);
  x = ((x & 0x0000ff000000ff00ULL) >> 8) | ((x & 0x000000ff000000ffULL) << 16);
  x = ((x & 0x00f000f000f000f0ULL) >> 4) | ((x & 0x000f000f000f000fULL) << 8);
  // '0' + n, and 'a' - '0' - 10 more where n >= 10 (n + 6 reaches 16).
  const std::uint64_t letters = ((x + kOnes * 6) >> 4) & kOnes;
  words::store(x + kOnes * '0' + letters * ('a' - '0' - 10), out);
}

}  // namespace hex_detail

/// Exactly 16 lower-case hex digits -> their value (a reservation id's nonce and
/// fingerprint); false, `value` untouched, for any other text. Eight digits at a time.
inline bool readHex16(std::string_view text, std::uint64_t& value) {
  std::uint32_t high = 0;
  std::uint32_t low = 0;
  if (text.size() != 16 || !hex_detail::readHex8(text.data(), high) ||
      !hex_detail::readHex8(text.data() + 8, low)) {
    return false;
  }
  value = static_cast<std::uint64_t>(high) << 32 | low;
  return true;
}

/// True when `text` is exactly 16 lower-case hex digits (what readHex16 reads), without
/// their value.
inline bool isHex16(std::string_view text) {
  std::uint64_t letters = 0;
  return text.size() == 16 && hex_detail::hexWord(words::load(text.data()), letters) &&
         hex_detail::hexWord(words::load(text.data() + 8), letters);
}

/// `value` as exactly 16 lower-case hex digits at `out` (what readHex16 reads).
inline void writeHex16(std::uint64_t value, char* out) {
  hex_detail::writeHex8(static_cast<std::uint32_t>(value >> 32), out);
  hex_detail::writeHex8(static_cast<std::uint32_t>(value), out + 8);
}

}  // namespace sluice
