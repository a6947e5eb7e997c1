#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/common/json_writer.hpp"
#include "sluice/decision/decision.hpp"

/// What envoyproxy/ratelimit's answers mean, written once for every transport that speaks
/// its API (POST /json and gRPC): the unit names, the remaining count of an unlimited
/// descriptor, and the response's dynamic metadata. The transports only encode these
/// (docs/architecture.md, "Envoy's semantics").
namespace sluice {

/// envoyproxy/ratelimit's limitRemaining for an unlimited descriptor (math.MaxUint32).
inline constexpr std::int64_t kEnvoyUnlimitedRemaining = 4294967295;

/// envoy's RateLimitResponse.RateLimit.Unit name of a unit ("SECOND" ... "YEAR").
std::string_view envoyUnitName(TimeUnit unit);

/// A rule node's `metadata` as the loader stores it (compact JSON) written as a JSON value;
/// a text that is not JSON is written as a string.
void writeRulesMetadata(JsonWriter& w, const std::string& text);

/// Whether a decision has envoy dynamic metadata: some matched rule node has `metadata`, or
/// the decision took a lease.
bool hasEnvoyDynamicMetadata(const Decision& decision);

/// envoyproxy/ratelimit's response dynamic metadata as one JSON object: `domain`,
/// `descriptors` (the request's: entries as "key=value", the request-side `limit`, the
/// descriptor's `hitsAddend`), `hitsAddend` when the request's is not 1, and `metadata`
/// (Decision::metadata_json: the rules `metadata` of the descriptors that passed, first
/// wins), and `lease_id` when the decision took a lease (lease_id.hpp). The request is
/// Decision::request.
void writeEnvoyDynamicMetadata(JsonWriter& w, const Decision& decision);

/// writeEnvoyDynamicMetadata() as compact JSON; "" when hasEnvoyDynamicMetadata() is false.
/// /json's `dynamicMetadata` and gRPC's dynamic_metadata are this object.
std::string envoyDynamicMetadataJson(const Decision& decision);

}  // namespace sluice
