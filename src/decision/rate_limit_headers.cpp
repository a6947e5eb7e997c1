#include "sluice/decision/rate_limit_headers.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>

#include "sluice/common/json_writer.hpp"

namespace sluice {

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

/// `Name: value\r\n` for a literal name (copied in place, its length known here).
template <std::size_t N>
[[gnu::always_inline]] inline void appendHeader(Appender& out, const char (&name)[N],
                                                std::int64_t value) {
  char* p = out.reserve(N + 1);
  std::memcpy(p, name, N - 1);
  p[N - 1] = ':';
  p[N] = ' ';
  out.advance(N + 1);
  out.number(value);
  out.put("\r\n", 2);
}

/// The decimal digits of a number, formatted once for the headers that repeat it.
class Digits {
 public:
  explicit Digits(std::int64_t value)
      : size_(static_cast<std::size_t>(std::to_chars(text_, text_ + sizeof text_, value).ptr -
                                       text_)) {}
  std::string_view view() const { return {text_, size_}; }

 private:
  char text_[20];
  std::size_t size_;
};

/// The parts of the headers that depend only on the limit (its name, limit and window),
/// prepared once and reused while the thread answers for the same limit: the
/// `X-Ratelimit-Limit` and `RateLimit-Policy` lines and the start of the `RateLimit` one. One entry
/// per thread: answers for other limits rebuild it (the cost of building it each time, as before).
struct PreparedLimit {
  std::string name;
  std::int64_t limit = -1;
  std::int64_t window_s = -1;
  std::string limit_line;       // X-Ratelimit-Limit: L\r\n
  std::string policy_line;      // RateLimit-Policy: "name";q=L;w=W\r\n
  std::string ratelimit_start;  // RateLimit: "name";r=
};

thread_local PreparedLimit t_prepared;

const PreparedLimit& prepared(const LimitStatus& binding) {
  PreparedLimit& p = t_prepared;
  std::int64_t window_s = ceilSeconds(binding.window_us);
  if (p.limit == binding.limit && p.window_s == window_s && p.name == binding.name) {
    return p;
  }
  p.name.assign(binding.name);
  p.limit = binding.limit;
  p.window_s = window_s;
  p.limit_line.clear();
  p.policy_line.clear();
  p.ratelimit_start.clear();
  {
    Appender out(p.limit_line);
    appendHeader(out, "X-Ratelimit-Limit", binding.limit);
  }
  {
    Appender out(p.policy_line);
    out.put("RateLimit-Policy: ");
    appendSfString(out, binding.name);
    out.put(";q=");
    out.number(binding.limit);
    out.put(";w=");
    out.number(window_s);
    out.put("\r\n");
  }
  {
    Appender out(p.ratelimit_start);
    out.put("RateLimit: ");
    appendSfString(out, binding.name);
    out.put(";r=");
  }
  return p;
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
  // Each number is formatted once, though the headers carry it twice.
  const Digits remaining(std::max<std::int64_t>(0, outcome.remaining));
  const Digits reset(ceilSeconds(outcome.reset_after_us));
  const PreparedLimit& limit = prepared(binding);
  Appender out(lines);
  out.put(limit.limit_line);
  out.put("X-Ratelimit-Remaining: ");
  out.put(remaining.view());
  out.put("\r\nX-Ratelimit-Reset: ");
  out.put(reset.view());
  out.put("\r\n");
  out.put(limit.policy_line);
  out.put(limit.ratelimit_start);
  out.put(remaining.view());
  out.put(";t=");
  out.put(reset.view());
  out.put("\r\n");
  if (denied && !outcome.never) {
    std::int64_t retry = retryAfterSeconds(outcome.retry_after_us);
    appendHeader(out, "X-Ratelimit-Retry-After", retry);
    appendHeader(out, "Retry-After", retry);
  }
  out.finish();
}

}  // namespace sluice
