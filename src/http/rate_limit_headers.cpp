#include "http/rate_limit_headers.hpp"

#include <algorithm>
#include <array>
#include <charconv>

namespace sluice::http {

std::int64_t ceilSeconds(Micros duration) {
  if (duration <= 0) {
    return 0;
  }
  return (duration + kMicrosPerSecond - 1) / kMicrosPerSecond;
}

std::int64_t retryAfterSeconds(Micros retry_after) {
  return std::max<std::int64_t>(1, ceilSeconds(retry_after));
}

std::int64_t ceilMillis(Micros duration) {
  if (duration <= 0) {
    return 0;
  }
  return (duration + kMicrosPerMilli - 1) / kMicrosPerMilli;
}

namespace {

void appendSfString(std::string& out, std::string_view text) {
  out += '"';
  std::size_t run = 0;  // start of the pending run of bytes copied as they are
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    bool plain = byte >= 0x20 && byte <= 0x7e && byte != '"' && byte != '\\';
    if (plain) {
      continue;
    }
    out.append(text.data() + run, i - run);
    run = i + 1;
    if (byte == '"' || byte == '\\') {
      out += '\\';
      out += static_cast<char>(byte);
    }  // other bytes outside printable ASCII are dropped
  }
  out.append(text.data() + run, text.size() - run);
  out += '"';
}

void appendNumber(std::string& out, std::int64_t value) {
  std::array<char, 24> digits{};
  auto result = std::to_chars(digits.data(), digits.data() + digits.size(), value);
  out.append(digits.data(), static_cast<std::size_t>(result.ptr - digits.data()));
}

void appendHeader(std::string& out, std::string_view name, std::int64_t value) {
  out += name;
  out += ": ";
  appendNumber(out, value);
  out += "\r\n";
}

}  // namespace

std::string sfString(std::string_view text) {
  std::string out;
  appendSfString(out, text);
  return out;
}

void appendRateLimitHeaders(std::string& lines, const LimitStatus& binding, bool denied) {
  const Outcome& outcome = binding.outcome;
  std::int64_t remaining = std::max<std::int64_t>(0, outcome.remaining);
  std::int64_t reset = ceilSeconds(outcome.reset_after_us);
  appendHeader(lines, "X-Ratelimit-Limit", binding.limit);
  appendHeader(lines, "X-Ratelimit-Remaining", remaining);
  appendHeader(lines, "X-Ratelimit-Reset", reset);
  lines += "RateLimit-Policy: ";
  appendSfString(lines, binding.name);
  lines += ";q=";
  appendNumber(lines, binding.limit);
  lines += ";w=";
  appendNumber(lines, ceilSeconds(binding.window_us));
  lines += "\r\nRateLimit: ";
  appendSfString(lines, binding.name);
  lines += ";r=";
  appendNumber(lines, remaining);
  lines += ";t=";
  appendNumber(lines, reset);
  lines += "\r\n";
  if (denied && !outcome.never) {
    std::int64_t retry = retryAfterSeconds(outcome.retry_after_us);
    appendHeader(lines, "X-Ratelimit-Retry-After", retry);
    appendHeader(lines, "Retry-After", retry);
  }
}

}  // namespace sluice::http
