#include "http/rate_limit_headers.hpp"

#include <algorithm>

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

std::string sfString(std::string_view text) {
  std::string out = "\"";
  for (char ch : text) {
    auto byte = static_cast<unsigned char>(ch);
    if (byte < 0x20 || byte > 0x7e) {
      continue;
    }
    if (ch == '"' || ch == '\\') {
      out += '\\';
    }
    out += ch;
  }
  out += '"';
  return out;
}

std::vector<Header> rateLimitHeaders(const LimitStatus& binding, bool denied) {
  const Outcome& outcome = binding.outcome;
  std::string limit = std::to_string(binding.limit);
  std::string remaining = std::to_string(std::max<std::int64_t>(0, outcome.remaining));
  std::string reset = std::to_string(ceilSeconds(outcome.reset_after_us));
  std::string name = sfString(binding.name);

  std::vector<Header> headers{
      {"X-Ratelimit-Limit", limit},
      {"X-Ratelimit-Remaining", remaining},
      {"X-Ratelimit-Reset", reset},
      {"RateLimit-Policy",
       name + ";q=" + limit + ";w=" + std::to_string(ceilSeconds(binding.window_us))},
      {"RateLimit", name + ";r=" + remaining + ";t=" + reset},
  };
  if (denied && !outcome.never) {
    std::string retry = std::to_string(retryAfterSeconds(outcome.retry_after_us));
    headers.push_back({"X-Ratelimit-Retry-After", retry});
    headers.push_back({"Retry-After", retry});
  }
  return headers;
}

}  // namespace sluice::http
