#pragma once

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/common/words.hpp"

namespace sluice::redis {

/// Appends `bytes` as one RESP bulk string: `$<length>\r\n<bytes>\r\n`.
inline void appendBulkString(std::string& out, std::string_view bytes) {
  out += '$';
  out += words::Decimal(static_cast<std::int64_t>(bytes.size())).view();
  out.append("\r\n", 2);
  out.append(bytes.data(), bytes.size());
  out.append("\r\n", 2);
}

/// Appends the header of a RESP array of `count` elements: `*<count>\r\n`.
inline void appendArrayHeader(std::string& out, std::size_t count) {
  out += '*';
  out += words::Decimal(static_cast<std::int64_t>(count)).view();
  out.append("\r\n", 2);
}

/// Arguments of a Redis command already encoded as RESP bulk strings, back to back in one
/// buffer: a script call of thousands of arguments (the eventual engine's sync) is built
/// without a string per argument, and sent without encoding it again.
class RespArgs {
 public:
  RespArgs() = default;
  RespArgs(const RespArgs& other) { *this = other; }
  RespArgs(RespArgs&& other) noexcept { *this = std::move(other); }
  RespArgs& operator=(const RespArgs& other) {
    if (this != &other) {
      clear();
      append(other);
    }
    return *this;
  }
  RespArgs& operator=(RespArgs&& other) noexcept {
    buffer_ = std::move(other.buffer_);
    capacity_ = std::exchange(other.capacity_, 0);
    used_ = std::exchange(other.used_, 0);
    count_ = std::exchange(other.count_, 0);
    return *this;
  }
  ~RespArgs() = default;

  /// The arguments `list`, encoded.
  static RespArgs of(const std::vector<std::string>& list) {
    RespArgs out;
    for (const std::string& item : list) {
      out.add(item);
    }
    return out;
  }

  /// One argument: `bytes`.
  void add(std::string_view bytes) { addJoined(bytes, {}, {}); }
  /// One argument: `value` in decimal.
  void addInt(std::int64_t value) { addJoined(words::Decimal(value).view(), {}, {}); }
  /// One argument made of `a`, `b` and `c` back to back (a key and its suffixes).
  void addJoined(std::string_view a, std::string_view b, std::string_view c) {
    const std::size_t length = a.size() + b.size() + c.size();
    const words::Decimal digits(static_cast<std::int64_t>(length));
    char* p = grow(1 + digits.view().size() + 2 + length + 2);
    *p++ = '$';
    p = put(p, digits.view());
    p = put(p, "\r\n");
    p = put(p, a);
    p = put(p, b);
    p = put(p, c);
    put(p, "\r\n");
    ++count_;
  }
  /// Appends `other`'s arguments after these.
  void append(const RespArgs& other) {
    put(grow(other.used_), other.wire());
    count_ += other.count_;
  }
  /// Makes room for `bytes` of arguments in all without growing again.
  void reserve(std::size_t bytes) {
    if (bytes > capacity_) {
      resize(bytes);
    }
  }
  void clear() {
    used_ = 0;
    count_ = 0;
  }

  /// The number of arguments.
  std::size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  /// The encoded arguments (no `*<count>` header).
  std::string_view wire() const { return {buffer_.get(), used_}; }

  /// Calls fn(std::string_view) with each argument in order (a router reads the keys).
  template <class Fn>
  void forEach(Fn&& fn) const {
    const std::string_view all = wire();
    std::size_t at = 0;
    for (std::size_t i = 0; i < count_; ++i) {
      // Written by this class only: `$<length>\r\n<bytes>\r\n`.
      const std::size_t digits = all.find('\r', at) - (at + 1);
      std::size_t length = 0;
      std::from_chars(all.data() + at + 1, all.data() + at + 1 + digits, length);
      const std::size_t start = at + 1 + digits + 2;
      fn(all.substr(start, length));
      at = start + length + 2;
    }
  }

 private:
  /// The next `n` bytes of the buffer, counted as used.
  char* grow(std::size_t n) {
    if (used_ + n > capacity_) {
      resize(std::max(2 * capacity_, used_ + n + 256));
    }
    char* at = buffer_.get() + used_;
    used_ += n;
    return at;
  }
  void resize(std::size_t capacity) {
    // Not zeroed: only the used bytes are ever read.
    std::unique_ptr<char[]> bigger(new char[capacity]);
    put(bigger.get(), wire());
    buffer_ = std::move(bigger);
    capacity_ = capacity;
  }
  static char* put(char* at, std::string_view bytes) {
    if (!bytes.empty()) {
      std::memcpy(at, bytes.data(), bytes.size());
    }
    return at + bytes.size();
  }

  /// The arguments are its first used_ bytes; the rest is room to grow.
  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;
  std::size_t used_ = 0;
  std::size_t count_ = 0;
};

}  // namespace sluice::redis
