#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sluice/common/result.hpp"

namespace sluice::simulate {

/// Reads one log file line by line, in constant memory: plain text or gzip (detected from
/// the content, so `.gz` and `-` for stdin both work). Lines longer than kMaxLineBytes are
/// returned cut, flagged by truncated().
class LogSource {
 public:
  static constexpr std::size_t kMaxLineBytes = 1 << 20;

  /// Opens `path` ("-": standard input). kInvalidArgument when it cannot be opened.
  static Result<std::unique_ptr<LogSource>> open(const std::string& path);
  ~LogSource();
  LogSource(const LogSource&) = delete;
  LogSource& operator=(const LogSource&) = delete;

  /// The next line without its newline (valid until the next call); false at the end or on
  /// a read error (then error() is not empty).
  bool next(std::string_view& line);
  std::uint64_t lineNumber() const { return line_number_; }
  bool truncated() const { return truncated_; }
  const std::string& error() const { return error_; }
  const std::string& path() const { return path_; }

 private:
  explicit LogSource(std::string path) : path_(std::move(path)) {}
  bool refill();

  std::string path_;
  void* file_ = nullptr;  // gzFile: zlib reads plain files as they are
  std::string buffer_;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  bool eof_ = false;
  bool truncated_ = false;
  std::string long_line_;
  std::uint64_t line_number_ = 0;
  std::string error_;
};

}  // namespace sluice::simulate
