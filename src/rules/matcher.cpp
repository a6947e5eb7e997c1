#include <set>
#include <string>

#include "sluice/rules/rules.hpp"

namespace sluice {
namespace {

/// Glob match where '*' stands for any run of bytes, the empty one included.
bool wildcardMatch(std::string_view pattern, std::string_view text) {
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::string_view::npos;
  std::size_t star_text = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_text = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_text;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') {
    ++p;
  }
  return p == pattern.size();
}

/// envoyproxy/ratelimit's lookup at one level: the node whose value is exactly the request's
/// (a wildcard node's literal text included), else the first wildcard node (file order) whose
/// pattern matches, else the key-only node.
const DescriptorNode* findNode(const std::vector<DescriptorNode>& level,
                               const DescriptorLevelIndex& index, const Entry& entry) {
  if (!index.by_key.empty() || level.empty()) {
    const auto it = index.by_key.find(entry.key);
    if (it == index.by_key.end()) {
      return nullptr;
    }
    const DescriptorLevelIndex::ForKey& for_key = it->second;
    if (const auto exact = for_key.exact.find(entry.value); exact != for_key.exact.end()) {
      return &level[exact->second];
    }
    for (const std::size_t position : for_key.wildcards) {
      if (wildcardMatch(*level[position].value, entry.value)) {
        return &level[position];
      }
    }
    return for_key.key_only ? &level[*for_key.key_only] : nullptr;
  }
  // A tree built by hand has no index: scan the level, with the same precedence.
  for (const DescriptorNode& node : level) {
    if (node.key == entry.key && node.value && *node.value == entry.value) {
      return &node;
    }
  }
  for (const DescriptorNode& node : level) {
    if (node.key == entry.key && node.value && node.wildcard &&
        wildcardMatch(*node.value, entry.value)) {
      return &node;
    }
  }
  for (const DescriptorNode& node : level) {
    if (node.key == entry.key && !node.value) {
      return &node;
    }
  }
  return nullptr;
}

void appendLimits(const std::vector<RateLimit>& limits, const DescriptorNode* node,
                  const std::string& prefix, DescriptorMatch& match) {
  match.matched = true;
  match.node = node;
  match.limits.reserve(limits.size());
  for (const RateLimit& limit : limits) {
    std::string key = prefix;
    BucketKey::appendLimit(key, limit.limit_id, limit.params.algorithm);
    match.limits.push_back(MatchedLimit{&limit, node, std::move(key)});
  }
}

/// Builds the bucket of BucketKey's grammar while walking the tree: the domain, then one
/// entry per descriptor entry (the pattern instead of the value under share_threshold).
DescriptorMatch matchDescriptor(const DomainConfig& domain, const Descriptor& descriptor) {
  DescriptorMatch match;
  if (descriptor.empty()) {
    return match;
  }
  const std::vector<DescriptorNode>* level = &domain.descriptors;
  const DescriptorLevelIndex* index = &domain.descriptors_index;
  std::string prefix;
  BucketKey::appendDomain(prefix, domain.domain);
  for (std::size_t i = 0; i < descriptor.size(); ++i) {
    const Entry& entry = descriptor[i];
    const DescriptorNode* node = findNode(*level, *index, entry);
    if (node == nullptr) {
      return match;
    }
    if (node->share_threshold && node->value) {
      BucketKey::appendSharedEntry(prefix, entry.key, *node->value);
    } else {
      BucketKey::appendEntry(prefix, entry.key, entry.value);
    }
    if (i + 1 == descriptor.size()) {
      // The request's depth equals this node's: its limits (if any) apply.
      if (!node->limits.empty()) {
        appendLimits(node->limits, node, prefix, match);
      }
      return match;
    }
    if (node->children.empty()) {
      // The request is deeper than the rule: no limit (as envoyproxy/ratelimit).
      return match;
    }
    level = &node->children;
    index = &node->children_index;
  }
  return match;
}

}  // namespace

RequestMatch matchRequest(const DomainConfig& domain, const std::vector<Descriptor>& descriptors) {
  RequestMatch result;
  if (descriptors.empty()) {
    DescriptorMatch match;
    if (!domain.domain_limits.empty()) {
      std::string bucket;
      BucketKey::appendDomain(bucket, domain.domain);
      appendLimits(domain.domain_limits, nullptr, bucket, match);
    }
    result.descriptors.push_back(std::move(match));
    return result;
  }
  result.descriptors.reserve(descriptors.size());
  std::set<std::string_view> replaced;
  for (const Descriptor& descriptor : descriptors) {
    result.descriptors.push_back(matchDescriptor(domain, descriptor));
    for (const MatchedLimit& matched : result.descriptors.back().limits) {
      replaced.insert(matched.limit->replaces.begin(), matched.limit->replaces.end());
    }
  }
  if (!replaced.empty()) {
    // As envoyproxy/ratelimit: a limit named in any matched limit's `replaces` is dropped.
    for (DescriptorMatch& match : result.descriptors) {
      std::erase_if(match.limits, [&](const MatchedLimit& matched) {
        return matched.limit->explicit_name && replaced.count(matched.limit->name) > 0;
      });
    }
  }
  return result;
}

}  // namespace sluice
