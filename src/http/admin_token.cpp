#include "http/admin_token.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace sluice::http {
namespace {

constexpr std::string_view kBearer = "Bearer ";

std::string_view trim(std::string_view text) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!text.empty() && space(text.front())) {
    text.remove_prefix(1);
  }
  while (!text.empty() && space(text.back())) {
    text.remove_suffix(1);
  }
  return text;
}

}  // namespace

bool constantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of the longer one is visited whatever differs, so the time leaks only the
  // lengths.
  const std::size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

Status AdminToken::load() {
  std::lock_guard lock(mutex_);
  return readLocked();
}

Status AdminToken::readLocked() {
  struct stat status {};
  if (::stat(path_.c_str(), &status) != 0) {
    return makeError(ErrorKind::kInvalidArgument,
                     "--admin-token-file " + path_ + ": " + std::strerror(errno));
  }
  std::ifstream in(path_, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) {
    return makeError(ErrorKind::kInvalidArgument,
                     "--admin-token-file " + path_ + ": cannot be read");
  }
  const std::string content = text.str();
  const std::string_view token = trim(content);
  if (token.empty()) {
    return makeError(ErrorKind::kInvalidArgument,
                     "--admin-token-file " + path_ + ": holds no token");
  }
  token_ = std::string(token);
  mtime_ = status.st_mtim;
  size_ = static_cast<long long>(status.st_size);
  return {};
}

bool AdminToken::accepts(std::string_view authorization) {
  std::string token;
  {
    std::lock_guard lock(mutex_);
    struct stat status {};
    if (::stat(path_.c_str(), &status) == 0 &&
        (status.st_mtim.tv_sec != mtime_.tv_sec || status.st_mtim.tv_nsec != mtime_.tv_nsec ||
         static_cast<long long>(status.st_size) != size_)) {
      if (auto reread = readLocked(); !reread) {
        // Keep the last good token; say so once for this version of the file.
        mtime_ = status.st_mtim;
        size_ = static_cast<long long>(status.st_size);
        spdlog::warn("admin: {}; keeping the previous token", reread.error().message);
      } else {
        spdlog::info("admin: the token of --admin-token-file {} changed", path_);
      }
    }
    token = token_;
  }
  if (authorization.substr(0, kBearer.size()) != kBearer) {
    return false;
  }
  return constantTimeEquals(trim(authorization.substr(kBearer.size())), token);
}

}  // namespace sluice::http
