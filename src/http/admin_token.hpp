#pragma once

#include <ctime>
#include <mutex>
#include <string>
#include <string_view>

#include "sluice/common/result.hpp"

namespace sluice::http {

/// The admin listener's shared secret (`--admin-token-file`): requests must carry
/// `Authorization: Bearer <token>`. The file holds the token (surrounding whitespace
/// ignored) and is read again when its modification time or size changes, so a rotated
/// token takes effect on the next request without a restart. Thread-safe.
class AdminToken {
 public:
  explicit AdminToken(std::string path) : path_(std::move(path)) {}

  /// Reads the file now. kInvalidArgument when it cannot be read or holds no token.
  Status load();

  /// True when `authorization` (the header's value) is `Bearer <the token>`, compared in
  /// constant time. Re-reads the file first if it changed; a file that became unreadable
  /// or empty keeps the last good token (logged once per change).
  bool accepts(std::string_view authorization);

 private:
  Status readLocked();

  const std::string path_;
  std::mutex mutex_;
  std::string token_;
  std::timespec mtime_{};
  long long size_ = -1;
};

/// Compares two strings in time that depends only on their lengths, not their contents.
bool constantTimeEquals(std::string_view a, std::string_view b);

}  // namespace sluice::http
