#pragma once

#include <string>
#include <string_view>

#include "sluice/limiter/limiter.hpp"

/// `consistency:` of a rate limit (docs/eventual.md). Kept apart from the loader so that the
/// loader only calls these two functions.
namespace sluice::rules_detail {

/// "strict" or "eventual".
std::string_view consistencyName(Consistency consistency);

/// Reads the value of a `consistency:` key into `params`. Returns "" when accepted, else the
/// error message (the caller adds the location).
std::string applyConsistency(std::string_view text, LimitParams& params);

/// Checked once every other parameter of the limit is known: "" when `params` may have its
/// consistency, else why not (an eventual limit with an algorithm or option whose state
/// does not merge across sidecars).
std::string checkConsistency(const LimitParams& params);

}  // namespace sluice::rules_detail
