#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/rules/rules.hpp"

/// Runtime overrides as the stores keep them (docs/overrides.md): a limit that replaces a
/// rule's for one client, or for one bucket, applied by the store inside the same atomic
/// step that decides the request, so every sidecar sharing a store sees a change on its next
/// decision. The decision layer (include/sluice/decision/limit_overrides.hpp) validates and
/// places them; the stores only keep, find and apply them.
namespace sluice {

/// One override's value.
struct StoredOverride {
  /// What the limiter applies instead of the rule's parameters: limit, window, burst,
  /// min_interval, count_rejected and warmup (the algorithm is always the rule's, so the
  /// bucket keeps its state: a client raised mid-window keeps what it used).
  LimitParams params;
  std::int64_t requests_per_unit = 0;  ///< as answers report it
  TimeUnit unit = TimeUnit::kSecond;
  std::int64_t unit_multiplier = 1;
  Micros expires_at_us = 0;  ///< 0: never; ignored from this instant on
  std::string reason;        ///< why it was set (shown in answers)
  /// The whole record as GET /limits/overrides lists it (compact JSON, one line): domain,
  /// rule, descriptors, clientId, rate_limit, expires, reason, who set it and when.
  std::string record_json;

  bool expired(Micros now) const { return expires_at_us != 0 && expires_at_us <= now; }
};
using StoredOverridePtr = std::shared_ptr<const StoredOverride>;

/// Puts an override's numbers into a limit's parameters (the rest, the algorithm first, stay
/// the rule's).
void applyOverride(LimitParams& params, const StoredOverride& value);

/// The gauge `overrides` (overrides kept, as this process last saw them), described.
Gauge& overridesGauge(Metrics& metrics);

/// Where an override is kept and found. `tag` is the hash tag of the buckets it applies to
/// (BucketKey::hashTag: escaped client "|" escaped domain); `field` names it within the tag:
/// overrideRuleField() for every bucket of a rule for that client, overrideBucketField() for
/// one bucket (one descriptor value). A bucket's own override wins over its rule's.
struct OverrideSlot {
  std::string tag;
  std::string field;
  friend bool operator==(const OverrideSlot&, const OverrideSlot&) = default;
};

/// "r:" + the rule's name (RateLimit::name).
std::string overrideRuleField(std::string_view rule_name);
/// "b:" + the bucket (BucketKey's bucket: what follows the client in a store key).
std::string overrideBucketField(std::string_view bucket);
/// The tag of a store key's override slots (BucketKey::hashTag), and the bucket after its
/// client ("" for a key without '|').
std::string_view overrideTagOf(std::string_view store_key);
std::string_view overrideBucketOf(std::string_view store_key);

/// One override with its place, as listed.
struct OverrideEntry {
  OverrideSlot slot;
  StoredOverridePtr value;
};

/// The text an override is kept as (Redis hash values, the memory store's file): one line of
/// numbers the Lua script reads (`sluice-override 1 <algorithm code> <limit> <window us>
/// <burst> <min_interval us> <count_rejected 0|1> <warmup us> <expires_at us> <requests_per_unit>
/// <unit index> <unit_multiplier>`), then the reason as a JSON string on the second line, then
/// the record JSON on the third.
std::string encodeOverride(const StoredOverride& value);
/// kInvalidArgument for text that is not such an override.
Result<StoredOverride> decodeOverride(std::string_view text);

/// What a store's override calls answer.
using OverrideSetCallback = std::function<void(Result<bool>)>;     ///< true: replaced one
using OverrideRemoveCallback = std::function<void(Result<bool>)>;  ///< false: none there
using OverrideListCallback = std::function<void(Result<std::vector<OverrideEntry>>)>;

/// One override a store applied to a limit of a request (StoreResponse::overrides).
struct AppliedOverride {
  std::size_t limit = 0;  ///< index in StoreRequest::limits
  StoredOverridePtr value;
};

}  // namespace sluice
