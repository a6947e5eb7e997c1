#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "store/memory/bucket_table.hpp"

namespace sluice::memory_detail {

/// A bucket's store key with its BucketTable::hashKey(), which the memory store has
/// computed already: the tables keyed by bucket (holds, bans) do not hash the key again.
struct HashedKey {
  std::string_view key;
  std::uint64_t hash = 0;
};

/// The hash of a std::unordered_map keyed by a bucket's store key that is looked up by
/// HashedKey (the key's own hash, BucketTable::hashKey(), for stored keys).
struct HashedKeyHash {
  using is_transparent = void;
  std::size_t operator()(const HashedKey& key) const { return key.hash; }
  std::size_t operator()(const std::string& key) const { return BucketTable::hashKey(key); }
};

/// Its equality, between stored keys and HashedKey lookups.
struct HashedKeyEqual {
  using is_transparent = void;
  bool operator()(const std::string& a, const std::string& b) const { return a == b; }
  bool operator()(const std::string& a, const HashedKey& b) const { return a == b.key; }
  bool operator()(const HashedKey& a, const std::string& b) const { return a.key == b; }
};

}  // namespace sluice::memory_detail
