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

/// The next element of `items` to fill, reusing one left by an earlier match (its strings
/// keep their capacity); `used` counts those filled.
template <typename T>
T& reuseNext(std::vector<T>& items, std::size_t& used) {
  if (used == items.size()) {
    items.emplace_back();
  }
  return items[used++];
}

void resetMatch(DescriptorMatch& match) {
  match.matched = false;
  match.node = nullptr;
}

/// Fills `match` with the limits of `node` (null: the domain-level ones), each bucket the
/// prefix plus the limit's identity; `exact`: the prefix is the loader's (exact_prefix), and
/// so is each limit's whole bucket key.
void appendLimits(const std::vector<RateLimit>& limits, const DescriptorNode* node,
                  std::string_view prefix, bool exact, DescriptorMatch& match) {
  match.matched = true;
  match.node = node;
  std::size_t used = 0;
  for (const RateLimit& limit : limits) {
    MatchedLimit& matched = reuseNext(match.limits, used);
    matched.limit = &limit;
    matched.node = node;
    if (exact && !limit.exact_bucket_key.empty()) {
      matched.bucket_key.assign(limit.exact_bucket_key);
      continue;
    }
    matched.bucket_key.assign(prefix);
    BucketKey::appendLimit(matched.bucket_key, limit.limit_id, limit.params.algorithm);
  }
  match.limits.resize(used);
}

/// True when the loader's exact_prefix of `node` is the bucket prefix for `entry`: the
/// node has a value, and the request's is that value (a wildcard node also matches
/// others) or the node shares one counter among the values its pattern matches.
bool exactPrefixApplies(const DescriptorNode& node, const Entry& entry) {
  return !node.exact_prefix.empty() &&
         (!node.wildcard || node.share_threshold || entry.value == *node.value);
}

/// Builds the bucket of BucketKey's grammar while walking the tree: the domain, then one
/// entry per descriptor entry (the pattern instead of the value under share_threshold).
/// While the nodes met have the loader's prefix for the request's entries, nothing is built;
/// from the first that has not, `prefix` (scratch storage) is.
void matchDescriptor(const DomainConfig& domain, const Descriptor& descriptor,
                     DescriptorMatch& match, std::string& prefix) {
  resetMatch(match);
  if (descriptor.empty()) {
    match.limits.clear();
    return;
  }
  const std::vector<DescriptorNode>* level = &domain.descriptors;
  const DescriptorLevelIndex* index = &domain.descriptors_index;
  const DescriptorNode* exact = nullptr;  // the last node met whose exact_prefix applies
  bool building = false;
  for (std::size_t i = 0; i < descriptor.size(); ++i) {
    const Entry& entry = descriptor[i];
    const DescriptorNode* node = findNode(*level, *index, entry);
    if (node == nullptr) {
      break;
    }
    if (!building && exactPrefixApplies(*node, entry)) {
      exact = node;
    } else {
      if (!building) {
        building = true;
        prefix.clear();
        if (exact != nullptr) {
          prefix.assign(exact->exact_prefix);
        } else {
          BucketKey::appendDomain(prefix, domain.domain);
        }
      }
      if (node->share_threshold && node->value) {
        BucketKey::appendSharedEntry(prefix, entry.key, *node->value);
      } else {
        BucketKey::appendEntry(prefix, entry.key, entry.value);
      }
    }
    if (i + 1 == descriptor.size()) {
      // The request's depth equals this node's: its limits (if any) apply.
      if (!node->limits.empty()) {
        if (building) {
          appendLimits(node->limits, node, prefix, false, match);
        } else {
          appendLimits(node->limits, node, node->exact_prefix, true, match);
        }
        return;
      }
      break;
    }
    if (node->children.empty()) {
      // The request is deeper than the rule: no limit (as envoyproxy/ratelimit).
      break;
    }
    level = &node->children;
    index = &node->children_index;
  }
  match.limits.clear();
}

}  // namespace

RequestMatch matchRequest(const DomainConfig& domain, const std::vector<Descriptor>& descriptors) {
  RequestMatch result;
  matchRequestInto(domain, descriptors, result);
  return result;
}

void matchRequestInto(const DomainConfig& domain, const std::vector<Descriptor>& descriptors,
                      RequestMatch& out) {
  if (descriptors.empty()) {
    out.descriptors.resize(1);
    DescriptorMatch& match = out.descriptors.front();
    resetMatch(match);
    if (!domain.domain_limits.empty()) {
      out.scratch.clear();
      BucketKey::appendDomain(out.scratch, domain.domain);
      appendLimits(domain.domain_limits, nullptr, out.scratch, true, match);
    } else {
      match.limits.clear();
    }
    return;
  }
  out.descriptors.resize(descriptors.size());
  bool any_replaces = false;
  for (std::size_t d = 0; d < descriptors.size(); ++d) {
    matchDescriptor(domain, descriptors[d], out.descriptors[d], out.scratch);
    for (const MatchedLimit& matched : out.descriptors[d].limits) {
      any_replaces = any_replaces || !matched.limit->replaces.empty();
    }
  }
  if (!any_replaces) {
    return;
  }
  std::set<std::string_view> replaced;
  for (const DescriptorMatch& match : out.descriptors) {
    for (const MatchedLimit& matched : match.limits) {
      replaced.insert(matched.limit->replaces.begin(), matched.limit->replaces.end());
    }
  }
  // As envoyproxy/ratelimit: a limit named in any matched limit's `replaces` is dropped.
  for (DescriptorMatch& match : out.descriptors) {
    std::erase_if(match.limits, [&](const MatchedLimit& matched) {
      return matched.limit->explicit_name && replaced.count(matched.limit->name) > 0;
    });
  }
}

}  // namespace sluice
