#pragma once

#include <optional>
#include <string_view>

#include "sluice/decision/decision.hpp"

/// The fast path of parseDecisionRequest(): a single pass over the body for the shape that
/// clients send (ASCII strings without escapes, plain integers, each field once), with no
/// JSON tree and no allocation beyond the request itself. Anything else — an escape, a
/// non-ASCII byte, a duplicate or unknown field, a null, any error — returns nullopt and
/// the caller parses the body again with the complete parser, which owns every error
/// message. So the fast path never changes an answer: where it answers, it answers what
/// the complete parser would (tests/unit/http/fast_decision_parser_test.cpp and the
/// fuzz_decision_json target compare the two).
namespace sluice::http {

std::optional<DecisionRequest> parseDecisionRequestFast(std::string_view body,
                                                        std::string_view default_domain);

/// The same into `request` (a spare from takeSpareRequest(), whose storage it reuses):
/// false where the complete parser is needed (`request` is then left half-filled).
bool parseDecisionRequestFastInto(std::string_view body, std::string_view default_domain,
                                  DecisionRequest& request);

/// The same for POST /reserve, /commit and /release (parseReservationRequest(),
/// reservation_routes.hpp): the fields of /shouldAllowRequest but `hits`, and the step's
/// own: /reserve's `amount` (required) and `ttl_ms`, /commit's `reservation_id` and `actual`
/// (both required), /release's `reservation_id`. A value out of the step's range, `hits`,
/// `refund`, `report` and anything the plain fast path leaves go to the complete parser.
bool parseReservationRequestFastInto(std::string_view body, HoldOp op,
                                     std::string_view default_domain, DecisionRequest& request);

/// The same for POST /json (parseEnvoyRequest(), envoyproxy/ratelimit's RateLimitRequest in
/// proto3 JSON): `domain`, `descriptors` as `{"entries": [...]}` objects with an optional
/// integer `hits_addend`, and an optional integer `hits_addend`. Strings for integers, a
/// descriptor's `limit`, an entry without `value`, an empty descriptor and anything the
/// complete parser would refuse go to the complete parser.
std::optional<DecisionRequest> parseEnvoyRequestFast(std::string_view body);
bool parseEnvoyRequestFastInto(std::string_view body, DecisionRequest& request);

}  // namespace sluice::http
