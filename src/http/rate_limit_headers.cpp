#include "http/rate_limit_headers.hpp"

#include <algorithm>

#include "http/json_writer.hpp"

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

void appendSfString(Appender& out, std::string_view text) {
  out.put('"');
  std::size_t run = 0;  // start of the pending run of bytes copied as they are
  for (std::size_t i = 0; i < text.size(); ++i) {
    auto byte = static_cast<unsigned char>(text[i]);
    bool plain = byte >= 0x20 && byte <= 0x7e && byte != '"' && byte != '\\';
    if (plain) {
      continue;
    }
    out.put(text.data() + run, i - run);
    run = i + 1;
    if (byte == '"' || byte == '\\') {
      out.put('\\');
      out.put(static_cast<char>(byte));
    }  // other bytes outside printable ASCII are dropped
  }
  out.put(text.data() + run, text.size() - run);
  out.put('"');
}

void appendHeader(Appender& out, std::string_view name, std::int64_t value) {
  out.put(name);
  out.put(": ", 2);
  out.number(value);
  out.put("\r\n", 2);
}

}  // namespace

std::string sfString(std::string_view text) {
  std::string out;
  Appender appender(out);
  appendSfString(appender, text);
  appender.finish();
  return out;
}

void appendRateLimitHeaders(std::string& lines, const LimitStatus& binding, bool denied) {
  const Outcome& outcome = binding.outcome;
  std::int64_t remaining = std::max<std::int64_t>(0, outcome.remaining);
  std::int64_t reset = ceilSeconds(outcome.reset_after_us);
  Appender out(lines);
  appendHeader(out, "X-Ratelimit-Limit", binding.limit);
  appendHeader(out, "X-Ratelimit-Remaining", remaining);
  appendHeader(out, "X-Ratelimit-Reset", reset);
  out.put("RateLimit-Policy: ");
  appendSfString(out, binding.name);
  out.put(";q=");
  out.number(binding.limit);
  out.put(";w=");
  out.number(ceilSeconds(binding.window_us));
  out.put("\r\nRateLimit: ");
  appendSfString(out, binding.name);
  out.put(";r=");
  out.number(remaining);
  out.put(";t=");
  out.number(reset);
  out.put("\r\n");
  if (denied && !outcome.never) {
    std::int64_t retry = retryAfterSeconds(outcome.retry_after_us);
    appendHeader(out, "X-Ratelimit-Retry-After", retry);
    appendHeader(out, "Retry-After", retry);
  }
  out.finish();
}

}  // namespace sluice::http
