#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/rules/rules.hpp"

/// envoyproxy/ratelimit's RateLimitConfig (the xDS resource of
/// proto/ratelimit/config/ratelimit/v3/rls_conf.proto) as plain data, and its conversion into
/// the rules model. Pure: the xDS client fills these from the protobuf message; the rules
/// module validates them with the same loader as a YAML file.
namespace sluice {

/// RateLimitPolicy. `unit` is the proto enum's number (UNKNOWN 0, SECOND 1, MINUTE 2, HOUR 3,
/// DAY 4, MONTH 5, YEAR 6, WEEK 7).
struct RateLimitPolicyConfig {
  int unit = 0;
  std::uint32_t requests_per_unit = 0;
  bool unlimited = false;
  std::string name;                   ///< "" = no name (proto3's default)
  std::vector<std::string> replaces;  ///< RateLimitReplace names
};

/// RateLimitDescriptor.
struct RateLimitDescriptorConfig {
  std::string key;
  std::string value;  ///< "" = key-only node, as in a rules file
  std::optional<RateLimitPolicyConfig> rate_limit;
  std::vector<RateLimitDescriptorConfig> descriptors;
  bool shadow_mode = false;
  bool detailed_metric = false;
  bool quota_mode = false;
  std::string metadata_json;  ///< google.protobuf.Struct as JSON text; "" when absent
};

/// RateLimitConfig: one domain.
struct RateLimitConfigResource {
  std::string name;
  std::string domain;
  std::vector<RateLimitDescriptorConfig> descriptors;
};

/// The proto enum's name for a unit number ("SECOND", ...), "UNKNOWN" for 0, "" for a number
/// the enum does not have.
std::string rateLimitUnitName(int unit);

/// Converts every resource (one domain each) and validates them as one set, with the loader and
/// validator of rules files (loadRulesFromStrings) and `options` (merge_domain_config). Every
/// field is honoured; what the validator refuses is an error whose location names the resource
/// and the path inside it, e.g. `RateLimitConfig "gw/policy" descriptors[0].descriptors[1].
/// rate_limit: invalid unit 'UNKNOWN' ...` (line 0: no file position). The RuleSet's `files`
/// are "xds:<resource name>", its `loaded_at_ms` is `loaded_at_ms`.
LoadResult loadRateLimitConfigs(const std::vector<RateLimitConfigResource>& resources,
                                std::int64_t loaded_at_ms, const LoadOptions& options);

}  // namespace sluice
