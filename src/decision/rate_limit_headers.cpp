#include "sluice/decision/rate_limit_headers.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "sluice/common/json_writer.hpp"
#include "sluice/common/words.hpp"

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

using words::Cursor;

/// The decimal digits of a number, written once for the headers that repeat it.
struct Digits {
  explicit Digits(std::int64_t value)
      : size(static_cast<std::size_t>(words::writeDecimal(value, text) - text)) {}
  char text[words::kMaxDecimalBytes];
  std::size_t size;
};

/// The parts of the headers that depend only on the limit (its name, limit and window),
/// prepared once and reused while the thread answers for the same limit: the
/// `X-Ratelimit-Limit` line with the name of the next, and the `RateLimit-Policy` line with
/// the start of the `RateLimit` one. One entry per thread: answers for other limits rebuild
/// it (the cost of building it each time, as before).
struct PreparedLimit {
  std::string name;
  std::int64_t limit = -1;
  std::int64_t window_s = -1;
  std::string head;            // X-Ratelimit-Limit: L\r\nX-Ratelimit-Remaining:<SP>
  std::string middle;          // RateLimit-Policy: "name";q=L;w=W\r\nRateLimit: "name";r=
  std::size_t policy_end = 0;  // where the RateLimit-Policy value ends in `middle`

  // The line pieces around the values, and the values inside the lines (for
  // rateLimitHeaderFields()).
  static constexpr std::string_view kLimitLine = "X-Ratelimit-Limit: ";
  static constexpr std::string_view kRemainingLine = "\r\nX-Ratelimit-Remaining: ";
  static constexpr std::string_view kPolicyLine = "RateLimit-Policy: ";
  static constexpr std::string_view kRateLine = "\r\nRateLimit: ";

  std::string_view limitValue() const {
    return std::string_view(head).substr(kLimitLine.size(),
                                         head.size() - kLimitLine.size() - kRemainingLine.size());
  }
  std::string_view policyValue() const {
    return std::string_view(middle).substr(kPolicyLine.size(), policy_end - kPolicyLine.size());
  }
  std::string_view rateStart() const {
    return std::string_view(middle).substr(policy_end + kRateLine.size());
  }
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
  p.head.clear();
  p.middle.clear();
  {
    Appender out(p.head);
    out.put(PreparedLimit::kLimitLine);
    out.number(binding.limit);
    out.put(PreparedLimit::kRemainingLine);
  }
  {
    Appender out(p.middle);
    out.put(PreparedLimit::kPolicyLine);
    appendSfString(out, binding.name);
    out.put(";q=");
    out.number(binding.limit);
    out.put(";w=");
    out.number(window_s);
    out.finish();
    p.policy_end = p.middle.size();
    out.put(PreparedLimit::kRateLine);
    appendSfString(out, binding.name);
    out.put(";r=");
  }
  return p;
}

// The bytes around the numbers beyond the prepared parts, and the four numbers (remaining and
// reset twice each), with the two retry lines and their numbers: an upper bound.
constexpr std::size_t kFixedRoom =
    sizeof "\r\nX-Ratelimit-Reset: \r\n;t=\r\n" + 4 * words::kMaxDecimalBytes +
    sizeof "X-Ratelimit-Retry-After: \r\nRetry-After: \r\n" + 2 * words::kMaxDecimalBytes;

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
  const Digits remaining(std::max<std::int64_t>(0, outcome.remaining));
  const Digits reset(ceilSeconds(outcome.reset_after_us));
  const PreparedLimit& limit = prepared(binding);
  // One resize for all the lines (then trimmed to what was written), instead of an append
  // for each piece.
  const std::size_t at = lines.size();
  lines.resize(at + limit.head.size() + limit.middle.size() + kFixedRoom);
  Cursor out(lines.data() + at);
  out.text(limit.head);
  out.digits(remaining.text, remaining.size);
  out.literal("\r\nX-Ratelimit-Reset: ");
  out.digits(reset.text, reset.size);
  out.literal("\r\n");
  out.text(limit.middle);
  out.digits(remaining.text, remaining.size);
  out.literal(";t=");
  out.digits(reset.text, reset.size);
  out.literal("\r\n");
  if (denied && !outcome.never) {
    const std::int64_t retry = retryAfterSeconds(outcome.retry_after_us);
    out.literal("X-Ratelimit-Retry-After: ");
    out.number(retry);
    out.literal("\r\nRetry-After: ");
    out.number(retry);
    out.literal("\r\n");
  }
  lines.resize(static_cast<std::size_t>(out.at() - lines.data()));
}

std::span<const HeaderField> rateLimitHeaderFields(const LimitStatus& binding, bool denied) {
  // appendRateLimitHeaders()'s names and values, byte for byte
  // (RateLimitHeadersTest.FieldsAreTheLinesNameByName), from the same prepared parts.
  // The thread's values (numbers, and the RateLimit value that joins them), valid until its
  // next call.
  struct Fields {
    std::array<HeaderField, 7> fields;
    Digits remaining{0};
    Digits reset{0};
    Digits retry{0};
    std::string rate;
  };
  thread_local Fields t;
  const Outcome& outcome = binding.outcome;
  t.remaining = Digits(std::max<std::int64_t>(0, outcome.remaining));
  t.reset = Digits(ceilSeconds(outcome.reset_after_us));
  const PreparedLimit& limit = prepared(binding);
  const std::string_view start = limit.rateStart();
  t.rate.resize(start.size() + sizeof ";t=" + 2 * words::kMaxDecimalBytes);
  Cursor out(t.rate.data());
  out.text(start);
  out.digits(t.remaining.text, t.remaining.size);
  out.literal(";t=");
  out.digits(t.reset.text, t.reset.size);
  t.rate.resize(static_cast<std::size_t>(out.at() - t.rate.data()));
  std::size_t n = 0;
  t.fields[n++] = {"X-Ratelimit-Limit", limit.limitValue()};
  t.fields[n++] = {"X-Ratelimit-Remaining", std::string_view(t.remaining.text, t.remaining.size)};
  t.fields[n++] = {"X-Ratelimit-Reset", std::string_view(t.reset.text, t.reset.size)};
  t.fields[n++] = {"RateLimit-Policy", limit.policyValue()};
  t.fields[n++] = {"RateLimit", t.rate};
  if (denied && !outcome.never) {
    t.retry = Digits(retryAfterSeconds(outcome.retry_after_us));
    const std::string_view retry(t.retry.text, t.retry.size);
    t.fields[n++] = {"X-Ratelimit-Retry-After", retry};
    t.fields[n++] = {"Retry-After", retry};
  }
  return {t.fields.data(), n};
}

}  // namespace sluice
