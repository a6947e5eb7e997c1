#pragma once

#include <optional>
#include <string_view>

#include "sluice/limiter.hpp"

/// The YAML spellings of the algorithms, private to the rules layer.
///
/// Why not sluice::parseAlgorithm/algorithmName: those live in sluice_limiter and the rules
/// layer only needs the spelling, which DESIGN.md §3/§4 fixes; keeping a private table lets the
/// loader be built and tested on its own. rules_test checks that both tables agree.
namespace sluice::rules_detail {

/// The YAML spelling of `algorithm` ("fixed_window", ...).
std::string_view algorithmSpelling(Algorithm algorithm);
/// Parses the YAML spelling (exact, lower case); nullopt when unknown.
std::optional<Algorithm> algorithmFromSpelling(std::string_view text);
/// "fixed_window, sliding_window_log, ..." for error messages.
std::string_view algorithmSpellingList();

}  // namespace sluice::rules_detail
