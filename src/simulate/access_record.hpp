#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/common/clock.hpp"
#include "sluice/decision/decision.hpp"

/// The replayable access log's line (docs/what-if.md, "The log"): one JSON object per
/// decision, written by the access log (`--access-log-format json`) and read back by
/// `sluice simulate`.
namespace sluice::simulate {

/// What one line holds.
struct LoggedRequest {
  Micros time_us = 0;       ///< the instant the limits were evaluated at
  DecisionRequest request;  ///< domain, client, descriptors, hits (and per-descriptor ones)
  std::string decision;     ///< allowed, denied, ...; "" when the line does not say
  std::string rule;         ///< the binding limit's name ("" when none or not said)
  std::string rules_hash;   ///< RuleSet::hash of the rules that decided ("" when not said)
};

/// Appends the JSON line of one decision (without newline):
/// {"time":"2026-11-26T03:50:14.123456Z","domain":"auth","client":"u1",
///  "descriptors":[{"user":"mallory"}],"hits":1,"rule":"login","decision":"denied",
///  "degraded":false,"latency_us":41,"rules":"9f2c..."} and, only when the request had
/// them, "descriptor_hits":[null,3] and "descriptor_limits":[null,{"requests_per_unit":5,
/// "unit":"minute"}].
void appendAccessJson(std::string& out, Micros time_us, const DecisionRequest& request,
                      std::string_view rule, std::string_view decision, bool degraded,
                      Micros latency_us, std::string_view rules_hash);

/// `micros` since the epoch as RFC 3339 UTC with microseconds: 2026-11-26T03:50:14.123456Z.
void appendRfc3339Micros(std::string& out, Micros micros);

/// Parses RFC 3339 (`Z` or `±hh:mm` offset, 0 to 9 fraction digits; a space for `T` is
/// accepted) into microseconds since the epoch; false when malformed.
bool parseRfc3339(std::string_view text, Micros& out);

/// Parses one line of the format above into `out` (whose storage is reused). Members it
/// does not know are skipped; "time" and "domain" are required. On error, false and
/// `error` says what and at which column (1-based).
bool parseAccessLine(std::string_view line, LoggedRequest& out, std::string& error);

}  // namespace sluice::simulate
