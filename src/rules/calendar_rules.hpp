#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "rules/yaml_reader.hpp"
#include "sluice/rules/rules.hpp"

/// A rate limit's `calendar:` block (docs/algorithms.md, "Calendar windows"):
///   calendar: {time_zone: Europe/Paris}           every window in one zone
///   calendar: {time_zone_from: tz}                the zone named by the request's `tz` entry
///   calendar: {time_zone_from: tz, time_zone: UTC}  ... or UTC when it names no zone
/// Private to the rules loader.
namespace sluice::rules_detail {

/// Reads `field` (the `calendar:` of `limit`, whose unit and multiplier are already read)
/// into limit.params.calendar, limit.calendar_zone_from and limit.calendar_zone_fallback;
/// every problem is reported through `reader`.
void readCalendar(YamlReader& reader, const Field& field, RateLimit& limit);

/// Checks a calendar limit's `time_zone_from` against the keys of the descriptors on the
/// way to its node (`path_keys`, outermost first; empty for a domain-level limit).
void checkCalendarZoneKey(YamlReader& reader, const RateLimit& limit,
                          const std::vector<std::string>& path_keys);

}  // namespace sluice::rules_detail
