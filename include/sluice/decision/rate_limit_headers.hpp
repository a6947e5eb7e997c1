#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/decision/decision.hpp"

/// The rate-limit response headers of README.md ("HTTP API"), computed from the binding limit.
namespace sluice {

/// Whole seconds, rounded up; 0 stays 0, negative durations count as 0.
std::int64_t ceilSeconds(Micros duration);

/// Whole seconds for Retry-After: rounded up and at least 1.
std::int64_t retryAfterSeconds(Micros retry_after);

/// Whole milliseconds, rounded up (for the JSON bodies).
std::int64_t ceilMillis(Micros duration);

/// A structured-field string (RFC 8941 sf-string) for the IETF headers: quoted, with '"'
/// and '\' escaped and bytes outside printable ASCII dropped.
std::string sfString(std::string_view text);

/// X-Ratelimit-Limit/-Remaining/-Reset, RateLimit-Policy and RateLimit; when `denied`
/// also X-Ratelimit-Retry-After and Retry-After (unless the request can never pass, where
/// a retry time would be a lie).
/// Appended to `lines` as `Name: value\r\n` (the HTTP answers' header lines).
void appendRateLimitHeaders(std::string& lines, const LimitStatus& binding, bool denied);

/// One header as a name and a value.
struct HeaderField {
  std::string_view name;
  std::string_view value;
};

/// The headers of appendRateLimitHeaders(), in its order, as names and values: for a protocol
/// that carries each header as a field of its own (Envoy's RLS: response_headers_to_add),
/// without writing lines to split again. The views are into the thread's buffers, valid
/// until the thread's next call.
std::span<const HeaderField> rateLimitHeaderFields(const LimitStatus& binding, bool denied);

}  // namespace sluice
