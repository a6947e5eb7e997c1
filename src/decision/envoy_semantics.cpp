#include "decision/envoy_semantics.hpp"

#include <nlohmann/json.hpp>

#include "sluice/rules/bucket_key.hpp"

namespace sluice {
namespace {

using Json = nlohmann::json;

/// The limit id of a request-side limit: "r" + the unit. A rule's id starts with "n" or "i"
/// (BucketKey::limitId), so no rule shares its bucket.
std::string requestLimitId(TimeUnit unit) { return "r" + std::string(unitName(unit)); }

/// Adds what `src` has and `dest` lacks; objects on both sides merge recursively
/// (envoyproxy/ratelimit's mergeMetadata: the first value of a key wins).
void mergeInto(Json& dest, const Json& src) {
  for (const auto& [key, value] : src.items()) {
    auto it = dest.find(key);
    if (it == dest.end()) {
      dest[key] = value;
    } else if (it->is_object() && value.is_object()) {
      mergeInto(*it, value);
    }
  }
}

}  // namespace

std::shared_ptr<const RateLimit> makeRequestLimit(const LimitOverride& limit,
                                                  std::string_view domain,
                                                  const Descriptor& descriptor) {
  auto rule = std::make_shared<RateLimit>();
  rule->name = std::string(domain) + ".";
  for (std::size_t i = 0; i < descriptor.size(); ++i) {
    rule->name += i == 0 ? "" : ".";
    rule->name += descriptor[i].key;
    if (!descriptor[i].value.empty()) {
      rule->name += "_" + descriptor[i].value;
    }
  }
  rule->unit = limit.unit;
  rule->requests_per_unit = limit.requests_per_unit;
  rule->params.algorithm = Algorithm::kFixedWindow;
  rule->params.limit = limit.requests_per_unit;
  rule->params.window_us = unitMicros(limit.unit);
  rule->limit_id = requestLimitId(limit.unit);
  return rule;
}

std::string requestLimitBucketKey(const DomainConfig& domain, const Descriptor& descriptor,
                                  TimeUnit unit) {
  std::string bucket;
  BucketKey::appendDomain(bucket, domain.domain);
  for (const Entry& entry : descriptor) {
    BucketKey::appendEntry(bucket, entry.key, entry.value);
  }
  BucketKey::appendLimit(bucket, requestLimitId(unit), Algorithm::kFixedWindow);
  return bucket;
}

std::string mergePassedMetadata(const std::vector<DescriptorStatus>& descriptors) {
  Json merged;
  for (const DescriptorStatus& d : descriptors) {
    if (d.metadata_json.empty() || !d.passed()) {
      continue;
    }
    bool evaluated = false;
    for (const LimitStatus& l : d.limits) {
      evaluated = evaluated || !l.unlimited;
    }
    if (!evaluated) {
      continue;  // envoy drops unlimited limits before they are checked
    }
    Json metadata = Json::parse(d.metadata_json, nullptr, /*allow_exceptions=*/false);
    if (!metadata.is_object()) {
      continue;
    }
    if (merged.is_null()) {
      merged = std::move(metadata);
    } else {
      mergeInto(merged, metadata);
    }
  }
  if (merged.is_null() || merged.empty()) {
    return {};
  }
  return merged.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace sluice
