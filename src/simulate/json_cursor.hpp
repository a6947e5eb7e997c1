#pragma once

#include <bit>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace sluice::simulate {

/// The length of the run from `p` before the first '"' or '\\' (or `end`): sixteen bytes
/// at a time with SSE2 (every x86-64 has it), else eight where eight remain (a zero-byte
/// test on the bytes xor'ed with each).
inline std::size_t plainRun(const char* p, const char* end) {
  const char* at = p;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i slash = _mm_set1_epi8('\\');
  while (end - at >= 16) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    const int found =
        _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(bytes, quote), _mm_cmpeq_epi8(bytes, slash)));
    if (found != 0) {
      return static_cast<std::size_t>(at - p) +
             static_cast<std::size_t>(std::countr_zero(static_cast<unsigned>(found)));
    }
    at += 16;
  }
#endif
  if constexpr (std::endian::native == std::endian::little) {
    constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
    constexpr std::uint64_t kHighs = 0x8080808080808080ULL;
    while (end - at >= 8) {
      std::uint64_t word = 0;
      std::memcpy(&word, at, 8);
      const std::uint64_t quotes = word ^ (kOnes * '"');
      const std::uint64_t slashes = word ^ (kOnes * '\\');
      // The lowest flagged byte is exact (a false flag only ever follows a true one).
      const std::uint64_t found =
          ((quotes - kOnes) & ~quotes & kHighs) | ((slashes - kOnes) & ~slashes & kHighs);
      if (found != 0) {
        return static_cast<std::size_t>(at - p) +
               static_cast<std::size_t>(std::countr_zero(found) / 8);
      }
      at += 8;
    }
  }
  while (at < end && *at != '"' && *at != '\\') {
    ++at;
  }
  return static_cast<std::size_t>(at - p);
}

/// A byte of a JSON number (or of what JsonCursor::skipValue takes for one).
inline bool isNumberByte(char c) {
  return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E';
}

/// A forward-only reader of one JSON text, for the log lines: no tree is built, strings are
/// decoded into caller-owned buffers (whose capacity is reused). Every method returns false
/// on malformed input and leaves the error in error(); position() is the 0-based offset.
class JsonCursor {
 public:
  explicit JsonCursor(std::string_view text) : text_(text) {}

  std::size_t position() const { return pos_; }
  const std::string& error() const { return error_; }
  bool fail(std::string message) {
    if (error_.empty()) {
      error_ = std::move(message);
    }
    return false;
  }

  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\r' || text_[pos_] == '\n')) {
      ++pos_;
    }
  }
  /// The next non-space byte, 0 at the end.
  char peek() {
    if (pos_ < text_.size() && text_[pos_] > ' ') {
      return text_[pos_];  // the usual case: no space to skip
    }
    skipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  /// `ch` (a structural byte, never a space) after any space.
  bool consume(char ch) {
    if (pos_ < text_.size() && text_[pos_] == ch) {
      ++pos_;
      return true;
    }
    if (peek() != ch) {
      return fail(std::string("expected '") + ch + "'");
    }
    ++pos_;
    return true;
  }
  bool atEnd() {
    skipSpace();
    return pos_ == text_.size();
  }
  /// After the opening brace or bracket: true when the container goes on with another item
  /// (consuming the comma), false at its end (consuming the closing byte) or on error
  /// (then error() is set). `first` is true for the first call.
  bool nextItem(char close, bool first) {
    const char ch = peek();
    if (ch == close) {
      ++pos_;
      return false;
    }
    if (!first) {
      if (ch != ',') {
        fail(std::string("expected ',' or '") + close + "'");
        return false;
      }
      ++pos_;
    }
    return true;
  }

  /// A string without escapes as a view into the text (no copy); false when it has escapes
  /// (then nothing is consumed: read it with readString) or is not a string.
  bool readPlainString(std::string_view& out) {
    if (peek() != '"') {
      return fail("expected a string");
    }
    const char* begin = text_.data() + pos_ + 1;
    const char* end = text_.data() + text_.size();
    const std::size_t plain = plainRun(begin, end);
    if (begin + plain < end && begin[plain] == '"') {
      out = std::string_view(begin, plain);
      pos_ += plain + 2;
      return true;
    }
    // A backslash first, or no closing quote.
    const auto* quote = static_cast<const char*>(std::memchr(begin, '"', end - begin));
    if (quote == nullptr) {
      return fail("unterminated string");
    }
    if (std::memchr(begin, '\\', quote - begin) != nullptr) {
      return false;
    }
    out = std::string_view(begin, static_cast<std::size_t>(quote - begin));
    pos_ = static_cast<std::size_t>(quote - text_.data()) + 1;
    return true;
  }

  bool readString(std::string& out) {
    if (peek() != '"') {
      out.clear();
      return fail("expected a string");
    }
    ++pos_;
    const char* run = text_.data() + pos_;
    const std::size_t plain = plainRun(run, text_.data() + text_.size());
    if (pos_ + plain < text_.size() && run[plain] == '"') {
      out.assign(run, plain);  // the usual case: no escape
      pos_ += plain + 1;
      return true;
    }
    out.clear();
    for (;;) {
      // The run up to the next quote or backslash is copied at once (memchr, not a loop per
      // byte: this is the replay's hottest code).
      const char* begin = text_.data() + pos_;
      const char* end = text_.data() + text_.size();
      const auto* quote = static_cast<const char*>(std::memchr(begin, '"', end - begin));
      if (quote == nullptr) {
        return fail("unterminated string");
      }
      const auto* slash = static_cast<const char*>(std::memchr(begin, '\\', quote - begin));
      const char* stop = slash != nullptr ? slash : quote;
      out.append(begin, static_cast<std::size_t>(stop - begin));
      pos_ = static_cast<std::size_t>(stop - text_.data());
      if (slash == nullptr) {
        ++pos_;
        return true;
      }
      if (++pos_ >= text_.size()) {
        return fail("unterminated string");
      }
      switch (text_[pos_++]) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          if (!readUnicodeEscape(out)) {
            return false;
          }
          break;
        default:
          return fail("bad escape in a string");
      }
    }
  }

  bool readInt(std::int64_t& out) {
    skipSpace();
    const char* begin = text_.data() + pos_;
    const char* end = text_.data() + text_.size();
    auto [ptr, ec] = std::from_chars(begin, end, out);
    if (ec != std::errc() || ptr == begin) {
      return fail("expected an integer");
    }
    if (ptr != end && (*ptr == '.' || *ptr == 'e' || *ptr == 'E')) {
      return fail("expected an integer");
    }
    pos_ += static_cast<std::size_t>(ptr - begin);
    return true;
  }

  bool readLiteral(std::string_view word) {
    skipSpace();
    if (text_.substr(pos_, word.size()) != word) {
      return fail("expected " + std::string(word));
    }
    pos_ += word.size();
    return true;
  }

  /// Skips any one value (depth-bounded).
  bool skipValue(int depth = 0) {
    if (depth > 64) {
      return fail("nested too deeply");
    }
    const char ch = peek();
    if (ch == '"') {
      return readString(scratch_);
    }
    if (ch == '{' || ch == '[') {
      const char close = ch == '{' ? '}' : ']';
      ++pos_;
      for (bool first = true; nextItem(close, first); first = false) {
        if (ch == '{') {
          if (!readString(scratch_) || !consume(':')) {
            return false;
          }
        }
        if (!skipValue(depth + 1)) {
          return false;
        }
      }
      return error_.empty();
    }
    if (ch == 't') {
      return readLiteral("true");
    }
    if (ch == 'f') {
      return readLiteral("false");
    }
    if (ch == 'n') {
      return readLiteral("null");
    }
    const std::size_t start = pos_;
    while (pos_ < text_.size() && isNumberByte(text_[pos_])) {
      ++pos_;
    }
    if (pos_ == start) {
      return fail("expected a value");
    }
    return true;
  }

 private:
  bool readHex4(std::uint32_t& out) {
    if (pos_ + 4 > text_.size()) {
      return fail("bad \\u escape");
    }
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = text_[pos_++];
      out <<= 4;
      if (c >= '0' && c <= '9') {
        out |= static_cast<std::uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        out |= static_cast<std::uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        out |= static_cast<std::uint32_t>(c - 'A' + 10);
      } else {
        return fail("bad \\u escape");
      }
    }
    return true;
  }

  bool readUnicodeEscape(std::string& out) {
    std::uint32_t cp = 0;
    if (!readHex4(cp)) {
      return false;
    }
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      std::uint32_t low = 0;
      if (text_.substr(pos_, 2) != "\\u") {
        return fail("lone surrogate in \\u escape");
      }
      pos_ += 2;
      if (!readHex4(low) || low < 0xDC00 || low > 0xDFFF) {
        return fail("lone surrogate in \\u escape");
      }
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return true;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  std::string error_;
  std::string scratch_;
};

}  // namespace sluice::simulate
