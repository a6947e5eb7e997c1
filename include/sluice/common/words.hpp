#pragma once

#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

/// Text eight bytes at a time: a word of 8 characters is read or written in one load or
/// store and converted with a few multiplications, where a loop would take one step per
/// character. Used where a request's cost is counted in instructions (the reservation id,
/// the fast request parser, the JSON writer's numbers).
namespace sluice::words {

inline constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
inline constexpr std::uint64_t kHighs = 0x8080808080808080ULL;

/// The 8 bytes at `p` as a word whose lowest byte is p[0], whatever the machine's order.
inline std::uint64_t load(const char* p) {
  std::uint64_t word = 0;
  std::memcpy(&word, p, sizeof word);
  if constexpr (std::endian::native == std::endian::big) {
    word = __builtin_bswap64(word);
  }
  return word;
}

/// `word` (lowest byte first) into the 8 bytes at `p`.
inline void store(std::uint64_t word, char* p) {
  if constexpr (std::endian::native == std::endian::big) {
    word = __builtin_bswap64(word);
  }
  std::memcpy(p, &word, sizeof word);
}

/// The 8 decimal digits of `value` (under 10^8, leading zeros included) as their values,
/// one a byte, the most significant in the lowest byte. Two lanes of 4 digits, then of 2,
/// then of 1: the divisions by 100 and by 10 are multiplications, exact in these ranges
/// (under 10^4 and under 100), and no lane's product reaches the next lane.
inline std::uint64_t decimalDigits(std::uint32_t value) {
  std::uint64_t x = value / 10000 | static_cast<std::uint64_t>(value % 10000) << 32;
  std::uint64_t q = ((x * 10486) >> 20) & 0x0000007f0000007fULL;
  x = q | (x - q * 100) << 16;
  q = ((x * 103) >> 10) & 0x000f000f000f000fULL;
  return q | (x - q * 10) << 8;
}

/// `value` (under 10^8) as exactly 8 decimal digits at `out`, leading zeros included.
inline void writeDecimal8(std::uint32_t value, char* out) {
  store(decimalDigits(value) | kOnes * '0', out);
}

/// `value` (under 10^8) in decimal at `out`, as std::to_chars writes it; returns its length.
/// Writes 8 bytes whatever the length: `out` must have room for 8.
inline std::size_t writeDecimalShort(std::uint32_t value, char* out) {
  if (value < 10) {
    *out = static_cast<char>('0' + value);
    return 1;
  }
  const std::uint64_t digits = decimalDigits(value);
  // The leading zeros are the lowest bytes that are 0 (value > 0: some byte is not).
  const int zeros = std::countr_zero(digits) / 8;
  store((digits >> (8 * zeros)) | kOnes * '0', out);
  return static_cast<std::size_t>(8 - zeros);
}

/// The most bytes writeDecimal() writes: "-9223372036854775808".
inline constexpr std::size_t kMaxDecimalBytes = 20;

/// `value` in decimal at `out`, as std::to_chars writes it; returns the end of the digits.
/// `out` must have room for kMaxDecimalBytes. Numbers under 10^8 (counts, seconds,
/// milliseconds: the usual ones) take writeDecimalShort()'s way.
inline char* writeDecimal(std::int64_t value, char* out) {
  if (value >= 0 && value < 100'000'000) {
    return out + writeDecimalShort(static_cast<std::uint32_t>(value), out);
  }
  return std::to_chars(out, out + kMaxDecimalBytes, value).ptr;
}

/// A number's decimal digits, held where they are used: `Decimal(n).view()` (a length, an
/// argument, a key's suffix) without a string.
class Decimal {
 public:
  explicit Decimal(std::int64_t value)
      : size_(static_cast<std::uint8_t>(writeDecimal(value, digits_) - digits_)) {}
  std::string_view view() const { return {digits_, size_}; }

 private:
  char digits_[kMaxDecimalBytes];
  std::uint8_t size_;
};

/// The 8 decimal digits at `p` -> their value; false if a byte is not a digit (each
/// byte's high nibble is 3, and adding 6 leaves it 3: '0'..'9').
inline bool readDecimal8(const char* p, std::uint64_t& value) {
  std::uint64_t x = load(p);
  constexpr std::uint64_t kHighNibbles = 0xf0f0f0f0f0f0f0f0ULL;
  if (((x & kHighNibbles) | (((x + kOnes * 6) & kHighNibbles) >> 4)) != kOnes * 0x33) {
    return false;
  }
  // Digit pairs, then quads, then the eight, each step one multiplication.
  x -= kOnes * '0';
  x = x * 10 + (x >> 8);
  x = ((x & 0x000000ff000000ffULL) * (100 + (1000000ULL << 32)) +
       ((x >> 16) & 0x000000ff000000ffULL) * (1 + (10000ULL << 32))) >>
      32;
  value = x;
  return true;
}

/// Writes at a cursor into room made beforehand: the answer's writers resize their string
/// once to the most they may write, write through a Cursor, then trim to at(). Nothing is
/// checked: the caller sized the room.
class Cursor {
 public:
  explicit Cursor(char* at) : at_(at) {}
  /// A string literal, without its terminating NUL.
  template <std::size_t N>
  void literal(const char (&text)[N]) {
    std::memcpy(at_, text, N - 1);
    at_ += N - 1;
  }
  void text(std::string_view t) {
    std::memcpy(at_, t.data(), t.size());
    at_ += t.size();
  }
  /// `t` without CR and LF.
  void clean(std::string_view t) {
    for (char c : t) {
      *at_ = c;
      at_ += c != '\r' && c != '\n' ? 1 : 0;
    }
  }
  /// `t` between double quotes, as it is.
  void quoted(std::string_view t) {
    *at_++ = '"';
    text(t);
    *at_++ = '"';
  }
  void flag(bool value) {
    if (value) {
      literal("true");
    } else {
      literal("false");
    }
  }
  /// std::to_chars's digits (room for kMaxDecimalBytes).
  void number(std::int64_t value) { at_ = writeDecimal(value, at_); }
  /// Digits written once into a buffer of kMaxDecimalBytes, `size` of them used: the whole
  /// buffer is copied (room for kMaxDecimalBytes), the cursor moves by `size`.
  void digits(const char (&text)[kMaxDecimalBytes], std::size_t size) {
    std::memcpy(at_, text, sizeof text);
    at_ += size;
  }
  char* at() const { return at_; }

 private:
  char* at_;
};

}  // namespace sluice::words
