#pragma once

#include <string>

#include "sluice/rules/rules.hpp"

namespace sluice::decision_detail {

/// For a calendar limit whose zone comes from the request (`calendar: {time_zone_from:
/// KEY}`): sets params.calendar.zone to the zone named by `descriptor`'s entry KEY, or to
/// the rule's fallback (`time_zone`) when that value names no zone. Returns "" when the
/// zone is set (or the rule's own), else why the request cannot be decided (the value names
/// no zone and the rule has no fallback): the decision fails as a bad request, before any
/// counter is touched (docs/algorithms.md, "Calendar windows").
std::string applyRequestTimeZone(const RateLimit& rule, const Descriptor& descriptor,
                                 LimitParams& params);

}  // namespace sluice::decision_detail
