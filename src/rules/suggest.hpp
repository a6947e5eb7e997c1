#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

/// "Did you mean" for near-miss spellings in rules files.
namespace sluice::rules_detail {

/// The candidate closest to `word` when it is a near miss: equal once case, '_' and '-' are
/// ignored (`ratelimit`, `requestsPerUnit`), or within a small edit distance (`desciptors`).
/// nullopt when nothing is close enough.
std::optional<std::string> closestMatch(std::string_view word,
                                        std::span<const std::string_view> candidates);

}  // namespace sluice::rules_detail
