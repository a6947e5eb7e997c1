#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/request_shape.hpp"

/// Envoy's Rate Limit Service v3 messages to and from Sluice's decisions. Pure functions:
/// no gRPC, no I/O.
namespace sluice::grpc {

namespace rls = ::envoy::service::ratelimit::v3;

/// Bounds on one call: the decision layer's, the same as on an HTTP body.
using RequestBounds = ::sluice::RequestBounds;

/// A RateLimitRequest as a DecisionRequest: `hits_addend` 0 means 1 (as envoy does); a
/// descriptor's own `hits_addend` (even 0) overrides it for that descriptor; its `limit`
/// (RateLimitOverride) replaces the rules for it (DecisionRequest::descriptor_limits). Errors
/// (kInvalidArgument, answered INVALID_ARGUMENT) name the field: an override's unknown unit
/// here, the rest (an empty domain, no descriptors, an empty key, more descriptors or entries
/// or longer strings than the bounds) from checkDecisionRequest(), in the words /json uses.
Result<DecisionRequest> toDecisionRequest(const rls::RateLimitRequest& request,
                                          const RequestBounds& bounds = kRequestBounds);

/// The usual RateLimitRequest (its domain, descriptors of key/value entries and hits_addend,
/// every string ASCII, no other field) read straight from its bytes into a decision request,
/// with the result toDecisionRequest() gives for the message protobuf parses from them.
/// nullopt for any other message (unknown fields, a descriptor's limit or hits_addend,
/// non-ASCII strings, more descriptors than the bounds, malformed bytes): protobuf's parser
/// and toDecisionRequest() read those.
std::optional<Result<DecisionRequest>> readUsualRequest(
    std::string_view message, const RequestBounds& bounds = kRequestBounds);

/// toDecisionRequest() into `out`, a request cleared for reuse
/// (DecisionRequest::clearForReuse()); its error, if any.
Status fillDecisionRequest(const rls::RateLimitRequest& request, DecisionRequest& out,
                           const RequestBounds& bounds = kRequestBounds);

/// readUsualRequest() into `out`, a request cleared for reuse: its result (OK, or
/// toDecisionRequest()'s error), or nullopt for another message, after which `out` holds
/// part of it (clear it again before filling it otherwise).
std::optional<Status> readUsualRequestInto(std::string_view message, DecisionRequest& out,
                                           const RequestBounds& bounds = kRequestBounds);

/// The unit and requests_per_unit that describe a limit in envoy's terms. A window that is
/// exactly one envoy unit is that unit (60 x second is MINUTE, 7 x day is WEEK); any other
/// Sluice-only window (`unit_multiplier`, e.g. 30 x second) is UNKNOWN with the limit per
/// window, because no envoy unit describes it; its exact length is in the RateLimit-Policy
/// response header (`w=` seconds) and duration_until_reset.
rls::RateLimitResponse::RateLimit::Unit envoyUnit(const LimitStatus& limit);

/// Fills `response` from a decision: overall_code OK or OVER_LIMIT (never UNKNOWN); one
/// status per request descriptor in order (its own binding limit: code, current_limit,
/// limit_remaining, duration_until_reset; an unlimited-only descriptor answers OK with
/// limit_remaining 4294967295; no rule: OK alone); dynamic_metadata the same object as
/// /json's dynamicMetadata (envoyDynamicMetadataJson(): the request, and the rules `metadata`
/// of the descriptors that passed under `metadata`); when `headers` is true,
/// response_headers_to_add carries the same rate-limit headers as /shouldAllowRequest
/// (rateLimitHeaderFields() of Decision::binding()).
void toResponse(const Decision& decision, bool headers, rls::RateLimitResponse& response);

/// The same response, serialised behind its 5-byte gRPC prefix in `framed` (its capacity
/// reused) without building the message: the bytes protobuf's serializer writes for what
/// toResponse() fills. False (nothing written) when the decision carries dynamic metadata,
/// which toResponse() converts from JSON.
bool encodeResponse(const Decision& decision, bool headers, std::string& framed);

}  // namespace sluice::grpc
