#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/rules/rules.hpp"

/// Which limit a memory-store bucket belongs to, so that a snapshot taken under one rule set
/// restores under another only the buckets whose limits still exist with the same
/// parameters (docs/operations.md, "Counters across restarts"). Private to the store.
namespace sluice::memory_detail {

/// A hash of what decides how a limit reads its bucket: algorithm, L, window, burst,
/// min_interval, count_rejected, warm-up, shape, consistency and calendar (unit, zone or
/// the entry naming it). Never 0.
std::uint64_t limitFingerprint(const RateLimit& limit);

/// Resolves store keys against one rule set: the bucket is matched as a request of its own
/// entries would be (the matcher), and it is the limit's when the matcher builds the very
/// same bucket for it. Not thread-safe: one per snapshot or restore.
class SnapshotRules {
 public:
  explicit SnapshotRules(RuleSetPtr rules) : rules_(std::move(rules)) {}

  /// limitFingerprint() of the limit whose bucket `store_key` is under these rules; 0 when
  /// no limit of the rules has that bucket (a request-side limit, a removed rule, a key
  /// that is not a bucket).
  std::uint64_t ruleOf(std::string_view store_key);

 private:
  std::uint64_t resolve(std::string_view bucket);

  RuleSetPtr rules_;
  /// By bucket (a store key without its client): the clients of one rule share it.
  std::unordered_map<std::string, std::uint64_t> cache_;
  std::vector<Descriptor> descriptors_;
  RequestMatch match_;
};

}  // namespace sluice::memory_detail
