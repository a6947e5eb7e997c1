#pragma once

#include "sluice/decision/decision.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice {

/// Fills `status` with what a matched rule says of its limit, its outcome still empty: the one
/// definition the decision service and the replay's direct path share, so that a replay
/// answers every field as the live service does. Inline: both call it once per matched
/// limit of every decision.
inline void fillLimitStatus(LimitStatus& status, const MatchedLimit& matched) {
  const RateLimit& rule = *matched.limit;
  status.name.assign(rule.name);
  status.limit = rule.requests_per_unit;
  status.unit = rule.unit;
  status.unit_multiplier = rule.unit_multiplier;
  status.window_us = rule.params.window_us;
  status.algorithm = rule.params.algorithm;
  status.shadow = rule.shadow_mode;
  status.unlimited = rule.unlimited;
  status.shape = rule.params.shape;
  status.detailed_metric = matched.node != nullptr && matched.node->detailed_metric;
  status.explicit_name = rule.explicit_name;
  status.quota = rule.quota_mode;
  status.rule = matched.limit;
  status.from_request = false;
  status.override_value.reset();
  status.holds_expired = 0;
  status.outcome = Outcome{};
}

}  // namespace sluice
