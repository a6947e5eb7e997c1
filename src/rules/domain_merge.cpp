#include "rules/domain_merge.hpp"

#include <string>
#include <utility>

namespace sluice::rules_detail {
namespace {

std::string where(const SourceLocation& location) {
  return location.file + ":" + std::to_string(location.line) + ":" +
         std::to_string(location.column);
}

/// The node of `level` with the same composite key (key, value), or null.
const DescriptorNode* sameCompositeKey(const DomainConfig& domain, const DescriptorNode& node) {
  const auto it = domain.descriptors_index.by_key.find(node.key);
  if (it == domain.descriptors_index.by_key.end()) {
    return nullptr;
  }
  const DescriptorLevelIndex::ForKey& for_key = it->second;
  if (!node.value) {
    return for_key.key_only ? &domain.descriptors[*for_key.key_only] : nullptr;
  }
  const auto exact = for_key.exact.find(*node.value);
  return exact == for_key.exact.end() ? nullptr : &domain.descriptors[exact->second];
}

}  // namespace

void mergeDomain(DomainConfig& into, DomainConfig&& from, std::vector<RuleError>& errors) {
  if (!from.domain_limits.empty()) {
    if (!into.domain_limits.empty()) {
      errors.push_back(RuleError{from.domain_limits.front().location,
                                 "domain '" + from.domain +
                                     "' already has a domain-level rate limit (at " +
                                     where(into.domain_limits.front().location) +
                                     "); merged files may give it only once"});
    } else {
      into.domain_limits = std::move(from.domain_limits);
    }
  }
  for (DescriptorNode& node : from.descriptors) {
    if (const DescriptorNode* first = sameCompositeKey(into, node)) {
      errors.push_back(
          RuleError{node.location, "duplicate descriptor composite key '" + from.domain + "." +
                                       node.key + (node.value ? "_" + *node.value : std::string()) +
                                       "' in merged domain (first defined at " +
                                       where(first->location) + ")"});
      continue;
    }
    const std::size_t position = into.descriptors.size();
    auto& for_key = into.descriptors_index.by_key[node.key];
    if (!node.value) {
      for_key.key_only = position;
    } else {
      for_key.exact.emplace(*node.value, position);
      if (node.wildcard) {
        for_key.wildcards.push_back(position);
      }
    }
    into.descriptors.push_back(std::move(node));
  }
}

}  // namespace sluice::rules_detail
