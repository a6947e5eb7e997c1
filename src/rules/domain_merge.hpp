#pragma once

#include <vector>

#include "sluice/rules/rules.hpp"

namespace sluice::rules_detail {

/// LoadOptions::merge_domain_config: adds `from` (a later file with the same domain) to
/// `into`, as envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG does: its top-level descriptors are
/// appended in order and indexed. A composite key (key, value) already defined at the top
/// level, or a second domain-level rate limit, is reported into `errors` at its location.
void mergeDomain(DomainConfig& into, DomainConfig&& from, std::vector<RuleError>& errors);

}  // namespace sluice::rules_detail
