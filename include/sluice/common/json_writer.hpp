#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "sluice/common/words.hpp"

/// Appends compact JSON to a string without building a tree: the decision answers are
/// written straight into the buffer that goes on the wire. The output is what
/// nlohmann::json::dump() writes (no spaces, UTF-8 kept as is), with invalid UTF-8 replaced
/// by U+FFFD, so both encoders can be mixed and compared.
///
/// Writes go through an Appender: call finish() (or let the destructor do it) before
/// touching the string directly.
/// The writer tracks commas only; nesting correctness is the caller's (every begin has its
/// end, keys only inside objects). Misuse shows in the unit tests, not at run time.
namespace sluice {

/// Appends to a string through a small inline buffer: one string append per 512 bytes
/// instead of one per piece. Call finish() (or let the destructor do it) before using the
/// string.
class Appender {
 public:
  explicit Appender(std::string& out) : out_(out) {}
  ~Appender() { finish(); }
  Appender(const Appender&) = delete;
  Appender& operator=(const Appender&) = delete;

  void put(char c) {
    if (length_ == kBufferSize) {
      finish();
    }
    buffer_[length_++] = c;
  }
  void put(const char* data, std::size_t n) {
    if (n > kBufferSize - length_) {
      finish();
      if (n > kBufferSize) {
        out_.append(data, n);
        return;
      }
    }
    std::memcpy(buffer_ + length_, data, n);
    length_ += n;
  }
  void put(std::string_view text) { put(text.data(), text.size()); }
  /// Room for `n` more bytes at cursor() (n <= kBufferSize), then advance(n) past those
  /// written: small pieces of known size are copied in place, without a call to memcpy.
  char* reserve(std::size_t n) {
    if (n > kBufferSize - length_) {
      finish();
    }
    return buffer_ + length_;
  }
  void advance(std::size_t n) { length_ += n; }
  /// Decimal digits of `number`.
  void number(std::int64_t number);
  /// Decimal digits of a number under 10^8 (a count, milliseconds), eight at a time.
  void smallNumber(std::uint32_t number) {
    char* p = reserve(8);
    advance(words::writeDecimalShort(number, p));
  }

  /// Moves what is buffered into the string.
  void finish() {
    out_.append(buffer_, length_);
    length_ = 0;
  }

 private:
  static constexpr std::size_t kBufferSize = 512;

  std::string& out_;
  char buffer_[kBufferSize];
  std::size_t length_ = 0;
};

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void beginObject() { open('{'); }
  void endObject() { close('}'); }
  void beginArray() { open('['); }
  void endArray() { close(']'); }

  /// `"name":` inside an object; the next call writes its value. `name` is one of our own
  /// field names (plain ASCII, nothing to escape) and is written as it is.
  void key(std::string_view name) {
    separate();
    put('"');
    put(name);
    put("\":", 2);
    after_key_ = true;
  }
  /// The same for a literal name: its length is known here, so the comma, the quoted name
  /// and the colon are copied in place in one step.
  template <std::size_t N>
  [[gnu::always_inline]] void key(const char (&name)[N]) {
    static_assert(N >= 1 && N + 3 <= 64);
    char* p = out_.reserve(N + 3);
    std::size_t i = 0;
    if (!first_ && !after_key_) {
      p[i++] = ',';
    }
    p[i++] = '"';
    std::memcpy(p + i, name, N - 1);
    i += N - 1;
    p[i++] = '"';
    p[i++] = ':';
    out_.advance(i);
    first_ = false;
    after_key_ = true;
  }

  void value(std::string_view text) {
    separate();
    string(text);
  }
  void value(const char* text) { value(std::string_view(text)); }
  void value(bool flag) {
    separate();
    flag ? put("true", 4) : put("false", 5);
  }
  void value(std::int64_t number) {
    if (number >= 0 && number < 100000000) {
      // The usual number, written here (the same text as std::to_chars).
      separate();
      out_.smallNumber(static_cast<std::uint32_t>(number));
      return;
    }
    largeValue(number);
  }
  void value(int number) { value(static_cast<std::int64_t>(number)); }
  /// Text that is already valid JSON (e.g. the rules' compact `metadata`).
  void raw(std::string_view json) {
    separate();
    put(json);
  }

  template <typename T>
  void field(std::string_view name, const T& v) {
    key(name);
    value(v);
  }
  template <std::size_t N, typename T>
  [[gnu::always_inline]] void field(const char (&name)[N], const T& v) {
    key(name);
    value(v);
  }

  /// Appends text as it is, with no separator (e.g. the final newline).
  void text(std::string_view t) { put(t); }

  /// Moves what is buffered into the string.
  void finish() { out_.finish(); }

 private:
  void put(char c) { out_.put(c); }
  void put(const char* data, std::size_t n) { out_.put(data, n); }
  void put(std::string_view text) { out_.put(text); }

  void separate() {
    if (after_key_) {
      after_key_ = false;
    } else if (!first_) {
      put(',');
    }
    first_ = false;
  }
  void open(char bracket) {
    separate();
    put(bracket);
    first_ = true;
  }
  void close(char bracket) {
    put(bracket);
    first_ = false;
  }
  /// A JSON string literal, quotes included, in nlohmann's escaping.
  void string(std::string_view text);
  /// value() of a number that is negative or has more than 8 digits.
  void largeValue(std::int64_t number);

  Appender out_;
  bool first_ = true;       // nothing written yet at this nesting level
  bool after_key_ = false;  // a key was written: its value needs no comma
};

}  // namespace sluice
