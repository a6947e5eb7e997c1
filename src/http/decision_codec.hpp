#pragma once

#include <string>
#include <string_view>

#include "sluice/common/json_writer.hpp"
#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/request_shape.hpp"
#include "sluice/http/message.hpp"

/// JSON in and out of the decision endpoints: Sluice's own `POST /shouldAllowRequest`
/// (README.md, "HTTP API") and envoyproxy/ratelimit's `POST /json`. Pure functions; every parse
/// error is kInvalidArgument with a message that starts with the offending field's path,
/// e.g. `descriptors[0].entries[1].key: must be a non-empty string`.
namespace sluice::http {

/// Parses a /shouldAllowRequest body. A missing `domain` becomes `default_domain`.
/// Common bodies take a single-pass fast path (fast_decision_parser.hpp); everything else,
/// errors included, goes through parseDecisionRequestComplete().
Result<DecisionRequest> parseDecisionRequest(std::string_view body,
                                             std::string_view default_domain);

/// parseDecisionRequest() into `request` (cleared for reuse), in place.
Status parseDecisionRequestInto(std::string_view body, std::string_view default_domain,
                                DecisionRequest& request);

/// The complete parser (a JSON document, then field checks): every accepted body and every
/// error message is defined here. parseDecisionRequest() answers the same.
Result<DecisionRequest> parseDecisionRequestComplete(std::string_view body,
                                                     std::string_view default_domain);

/// The /shouldAllowRequest answer: 200 or 429 with the JSON body and the headers of the
/// binding limit; 200 without limit headers when no limit was evaluated. `hold` is set
/// for an allowed request whose shaped leaky bucket asks for a delay.
/// `leading`, when given, writes fields of the caller's own first in the object (a
/// reservation step's: reservation_routes.cpp).
using LeadingFields = void (*)(JsonWriter& writer, const Decision& decision);
Response decisionResponse(const DecisionRequest& request, const Decision& decision,
                          LeadingFields leading = nullptr);

/// Parses envoyproxy/ratelimit's RateLimitRequest in proto3 JSON (`hits_addend` and
/// `hitsAddend` both accepted; a request-level 0 means 1, as envoy does). As envoy: an
/// entry without `value` has the value "", a descriptor without entries matches nothing,
/// and a descriptor's `limit` ({"requestsPerUnit", "unit"}) replaces the rules for it.
/// Common bodies take a single-pass fast path (parseEnvoyRequestFast()); everything else,
/// errors included, goes through parseEnvoyRequestComplete().
Result<DecisionRequest> parseEnvoyRequest(std::string_view body);
/// parseEnvoyRequest() into `request` (cleared for reuse), in place.
Status parseEnvoyRequestInto(std::string_view body, DecisionRequest& request);

/// The complete parser of POST /json bodies: every accepted body and every error message is
/// defined here. parseEnvoyRequest() answers the same.
Result<DecisionRequest> parseEnvoyRequestComplete(std::string_view body);

/// envoyproxy/ratelimit's RateLimitResponse: `overallCode`, `statuses[]`; 200 or 429. The
/// dynamic metadata (written when a matched rule node has `metadata`) reads the request
/// from Decision::request.
Response envoyResponse(const Decision& decision);

/// True for an ISO-8601 / RFC 3339 date-time: `YYYY-MM-DDTHH:MM:SS[.frac][Z|±HH:MM]`
/// with calendar ranges checked (leap years included).
bool isIso8601DateTime(std::string_view text);

/// The hold for an allowed request: the longest delay among its shaped leaky buckets.
Micros shapingDelay(const Decision& decision);

}  // namespace sluice::http
