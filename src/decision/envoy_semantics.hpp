#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sluice/decision/decision.hpp"
#include "sluice/rules/rules.hpp"

/// The parts of envoyproxy/ratelimit's behaviour that the decision service adds to the rules:
/// request-side limit overrides and the merged rules metadata of the descriptors that passed.
namespace sluice {

/// The rate limit a request-side override stands for: a fixed window of
/// `requests_per_unit` per `unit`, not shadow, not quota, without an explicit name (as
/// envoyproxy/ratelimit builds it). Its generated name is envoy's key for it,
/// `domain.key1_value1.key2_value2` (shown in logs and Sluice's own answers, never as a
/// metric label).
std::shared_ptr<const RateLimit> makeRequestLimit(const LimitOverride& limit,
                                                  std::string_view domain,
                                                  const Descriptor& descriptor);

/// The bucket of a request-side override (BucketKey grammar): the domain, every entry's key
/// and value, then the limit id "r<unit>". envoyproxy/ratelimit keys such a counter by
/// domain, entries and window only, so a request that changes requests_per_unit keeps the
/// count of its window; it never shares a bucket with a rule (whose ids start with "n" or
/// "i").
std::string requestLimitBucketKey(const DomainConfig& domain, const Descriptor& descriptor,
                                  TimeUnit unit);

/// envoyproxy/ratelimit's `dynamicMetadata.metadata`: the rules `metadata` of every
/// descriptor that passed and has an evaluated limit, merged in request order: a key
/// already present wins, objects present on both sides are merged recursively. Compact
/// JSON, "" when there is none.
std::string mergePassedMetadata(const std::vector<DescriptorStatus>& descriptors);

}  // namespace sluice
