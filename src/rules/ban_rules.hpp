#pragma once

#include "rules/yaml_reader.hpp"
#include "sluice/rules/rules.hpp"

/// A rate limit's `ban:` block, the penalty box (docs/bans.md):
///   ban: {after: 5, duration: 10m, backoff: 2, max: 24h, forgive_after: 24h}
/// Private to the rules loader.
namespace sluice::rules_detail {

/// Reads `field` (the `ban:` of `limit`, whose window, algorithm and consistency are already
/// read) into limit.params.ban; every problem is reported through `reader`.
void readBan(YamlReader& reader, const Field& field, RateLimit& limit);

}  // namespace sluice::rules_detail
