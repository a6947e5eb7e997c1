#include "simulate/log_source.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>

namespace sluice::simulate {
namespace {
constexpr std::size_t kChunk = 1 << 20;
/// Bytes read at a time: what was read is scanned and parsed while it is still in the
/// processor's level 2 cache (a whole buffer of two chunks at a time would not be).
constexpr std::size_t kReadBytes = 128 * 1024;
}  // namespace

Result<std::unique_ptr<LogSource>> LogSource::open(const std::string& path) {
  std::unique_ptr<LogSource> source(new LogSource(path));
  gzFile file = path == "-" ? gzdopen(dup(STDIN_FILENO), "rb") : gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return makeError(ErrorKind::kInvalidArgument, path + ": cannot open: " + std::strerror(errno));
  }
  // A quarter of a read: zlib reads a plain file (and inflates a compressed one) straight
  // into our buffer, with no copy through its own, when a read asks for twice its buffer or
  // more after what its buffer still holds (a read of kReadBytes always does).
  gzbuffer(file, kReadBytes / 4);
  source->file_ = file;
  source->buffer_.resize(kChunk * 2);
  return source;
}

LogSource::~LogSource() {
  if (file_ != nullptr) {
    gzclose(static_cast<gzFile>(file_));
  }
}

bool LogSource::refill() {
  if (eof_) {
    return false;
  }
  // Keep the unfinished line at the front, then read behind it.
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) {
    return false;
  }
  const int n = gzread(static_cast<gzFile>(file_), buffer_.data() + end_,
                       static_cast<unsigned>(std::min(buffer_.size() - end_, kReadBytes)));
  if (n < 0) {
    int code = 0;
    error_ = path_ + ": read error: " + gzerror(static_cast<gzFile>(file_), &code);
    eof_ = true;
    return false;
  }
  if (n == 0) {
    eof_ = true;
    return false;
  }
  end_ += static_cast<std::size_t>(n);
  return true;
}

bool LogSource::next(std::string_view& line) {
  truncated_ = false;
  std::size_t scanned = begin_;
  for (;;) {
    const void* found = std::memchr(buffer_.data() + scanned, '\n', end_ - scanned);
    if (found != nullptr) {
      const auto at = static_cast<std::size_t>(static_cast<const char*>(found) - buffer_.data());
      std::size_t stop = at;
      if (stop > begin_ && buffer_[stop - 1] == '\r') {
        --stop;
      }
      line = std::string_view(buffer_.data() + begin_, stop - begin_);
      begin_ = at + 1;
      ++line_number_;
      if (line.size() > kMaxLineBytes) {
        line = line.substr(0, kMaxLineBytes);
        truncated_ = true;
      }
      return true;
    }
    const std::size_t pending = end_ - begin_;
    if (pending >= kMaxLineBytes) {
      // A line longer than the bound: keep its start, drop the rest up to its newline.
      long_line_.assign(buffer_.data() + begin_, kMaxLineBytes);
      begin_ = end_ = 0;
      for (;;) {
        if (!refill()) {
          break;
        }
        const void* nl = std::memchr(buffer_.data(), '\n', end_);
        if (nl != nullptr) {
          begin_ = static_cast<std::size_t>(static_cast<const char*>(nl) - buffer_.data()) + 1;
          break;
        }
        begin_ = end_ = 0;
      }
      ++line_number_;
      truncated_ = true;
      line = long_line_;
      return true;
    }
    scanned = end_;
    const std::size_t before = begin_;
    if (!refill()) {
      if (end_ > begin_) {
        // The last line has no newline.
        line = std::string_view(buffer_.data() + begin_, end_ - begin_);
        begin_ = end_;
        ++line_number_;
        return true;
      }
      return false;
    }
    scanned -= before;  // refill moved the pending bytes to the front
  }
}

}  // namespace sluice::simulate
