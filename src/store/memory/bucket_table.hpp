#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/clock.hpp"
#include "sluice/limiter.hpp"

namespace sluice::memory_detail {

/// What making room for a new key removed.
struct Evictions {
  std::size_t expired = 0;
  std::size_t capacity = 0;
};

/// One shard of the memory store: a bounded map from bucket key to BucketState with
/// least-recently-used order and per-entry expiry. Not thread-safe (the shard's mutex
/// guards it).
///
/// Layout, chosen for a small per-key footprint (bench/memory_per_key.cpp measures it):
/// - entries live in fixed-size chunks (stable indices, no 2x vector slack), 56 bytes each:
///   the three scalar state fields, expiry, LRU links and the key's place in the arena;
/// - keys are packed back to back in one per-shard arena (compacted when half is garbage);
/// - the index is open addressing with linear probing over 32-bit entry indices, deleting
///   by backward shift (no tombstones);
/// - only sliding_window_log buckets carry a log, kept in a side map.
class BucketTable {
 public:
  static constexpr std::uint32_t kNone = 0xffffffffU;

  /// `capacity` >= 1: the most entries this table holds.
  explicit BucketTable(std::size_t capacity);

  /// The entry for `key` (whose 32 low hash bits are `hash`), or kNone.
  std::uint32_t find(std::string_view key, std::uint32_t hash) const;
  /// Marks an entry most recently used.
  void touch(std::uint32_t index);
  Micros expiresAt(std::uint32_t index) const;

  /// Moves the state out of an entry (its log too); give it back with save() or restore().
  BucketState load(std::uint32_t index);
  /// Puts back a log taken by load() when the state is unchanged.
  void restore(std::uint32_t index, std::vector<LogEntry>&& log);
  /// Replaces an entry's state and expiry.
  void save(std::uint32_t index, BucketState&& state, Micros expires_at);

  /// Adds an absent key, first making room when full: every expired entry goes (when one
  /// may exist), then the least recently used. Returns the new entry's index.
  std::uint32_t insert(std::string_view key, std::uint32_t hash, BucketState&& state,
                       Micros expires_at, Micros now, Evictions& evictions);
  void erase(std::uint32_t index);

  /// Removes the entries whose key starts with one of `prefixes`; returns how many.
  std::size_t erasePrefixes(const std::vector<std::string>& prefixes);
  /// Removes every entry expired at `now`; returns how many. Cheap when none can be.
  std::size_t sweep(Micros now);

  std::size_t size() const { return size_; }
  std::size_t capacity() const { return capacity_; }

 private:
  struct Entry {
    std::int64_t a = 0;
    std::int64_t b = 0;
    std::int64_t c = 0;
    Micros expires_at = 0;
    std::uint32_t prev = kNone;  // towards the most recently used
    std::uint32_t next = kNone;  // towards the least recently used; free-list link when free
    std::uint32_t hash = 0;
    std::uint32_t key_offset = 0;
    std::uint32_t key_length = 0;
    std::uint32_t has_log = 0;
  };
  static constexpr std::uint32_t kChunkBits = 10;
  static constexpr std::uint32_t kChunkSize = 1U << kChunkBits;

  Entry& at(std::uint32_t index) { return chunks_[index >> kChunkBits][index & (kChunkSize - 1)]; }
  const Entry& at(std::uint32_t index) const {
    return chunks_[index >> kChunkBits][index & (kChunkSize - 1)];
  }
  std::string_view keyOf(const Entry& entry) const {
    return std::string_view(arena_).substr(entry.key_offset, entry.key_length);
  }
  std::uint32_t allocate();
  void linkFront(std::uint32_t index);
  void unlink(std::uint32_t index);
  void indexInsert(std::uint32_t index);
  void indexErase(std::uint32_t index);
  void growIndex();
  void compactArena();
  std::size_t sweepAll(Micros now);

  std::size_t capacity_;
  std::size_t size_ = 0;
  std::vector<std::unique_ptr<Entry[]>> chunks_;
  std::uint32_t allocated_ = 0;  // entries ever handed out (high-water mark)
  std::uint32_t free_head_ = kNone;
  std::uint32_t head_ = kNone;  // most recently used
  std::uint32_t tail_ = kNone;  // least recently used
  std::vector<std::uint32_t> slots_;
  std::string arena_;
  std::size_t arena_garbage_ = 0;
  std::unordered_map<std::uint32_t, std::vector<LogEntry>> logs_;
  Micros earliest_expiry_ = 0;  // no entry expires before this (a lower bound)
  std::size_t inserts_since_sweep_ = 0;
};

}  // namespace sluice::memory_detail
