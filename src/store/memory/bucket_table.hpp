#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/limiter/limiter.hpp"

namespace sluice::memory_detail {

/// What making room for a new key removed.
struct Evictions {
  std::size_t expired = 0;
  std::size_t capacity = 0;
};

/// One shard of the memory store: a map from bucket key to BucketState with
/// least-recently-used order and per-entry expiry. Not thread-safe (the shard's mutex
/// guards it); the store decides when to make room.
///
/// Layout, chosen for a small per-key footprint (bench/memory_per_key.cpp measures it):
/// - entries live in fixed-size chunks (stable indices, no 2x vector slack), 40 bytes each:
///   the three scalar state fields, expiry in whole seconds (rounded up: an entry read after
///   its ttl but before its second ends is indistinguishable from a fresh bucket anyway),
///   the recency (below) and the key's place and length;
/// - recency: until the table first evicts its least recently used entry, each entry keeps
///   a 40-bit use stamp (a use writes its own entry only); that first eviction sorts the
///   entries by stamp into a doubly linked list (24-bit links, in the stamp's bits), kept
///   from then on (a use relinks its entry: it writes its two neighbours). Either way the
///   entry evicted is exactly the least recently used one; the sort is the one step that is
///   not bounded (about a millisecond for 16,000 entries, 127 ms for 1,000,000), once in a
///   table's life;
/// - keys are packed back to back in 32 KiB arena chunks, compacted when half is garbage
///   (keys of 16 KiB and more are kept apart);
/// - the index is open addressing with linear probing over any table size (grown by 1.5x,
///   load at most 0.8); a cell (8 bytes) holds a 24-bit entry index and 40 bits of the
///   key's hash: the 32 that place it (its home cell) and the top 8, so a probe reads an
///   entry and its key only when all 40 match (a different key almost never), and deletion
///   (backward shift, no tombstones) and growth move cells without reading an entry or
///   hashing a key;
/// - only sliding_window_log buckets carry a log, kept in a side map.
class BucketTable {
 public:
  static constexpr std::uint32_t kNone = 0x00ffffffU;
  /// Use stamps stay below 2^40 (a stamp and an index fit in 64 bits for the sort that
  /// orders the table): running out orders the table (after 10^12 uses).
  static constexpr std::uint64_t kStampLimit = std::uint64_t{1} << 40;
  /// Entries one table can hold (24-bit indices).
  static constexpr std::size_t kMaxEntries = kNone - 1;

  /// Use stamps run out at `stamp_limit` (tests lower it).
  explicit BucketTable(std::uint64_t stamp_limit = kStampLimit);

  /// The hash every caller uses for a key (shard choice, index cells, tags).
  static std::uint64_t hashKey(std::string_view key);

  /// The entry for `key` (whose hashKey() is `hash`), or kNone.
  std::uint32_t find(std::string_view key, std::uint64_t hash) const;
  /// Hints for a find() of a key of hash `hash` to come, in three steps each taken a while
  /// after the one before (once what it asked for is in the cache): its index cell; the
  /// entry whose cell carries its hash bits; its key and (ordered) neighbours. Reads only:
  /// no state changes.
  void prefetchCell(std::uint64_t hash) const { __builtin_prefetch(&cells_[homeCell(hash)]); }
  void prefetchEntries(std::uint64_t hash) const;
  void prefetchKeys(std::uint64_t hash) const;
  /// Hint: the entry an insert() would take now (a find() that found nothing is followed by
  /// one when the key is charged).
  void prefetchSlot() const;
  /// Marks an entry most recently used (writes that entry only until the table is ordered).
  void touch(std::uint32_t index);
  Micros expiresAt(std::uint32_t index) const;

  /// Moves the state out of an entry (its log too); give it back with save() or restore().
  BucketState load(std::uint32_t index);
  /// Puts back a log taken by load() when the state is unchanged.
  void restore(std::uint32_t index, std::vector<LogEntry>&& log);
  /// Replaces an entry's state and expiry.
  void save(std::uint32_t index, BucketState&& state, Micros expires_at);

  /// Adds an absent key (size() < kMaxEntries) as the most recently used entry. `hash` is
  /// hashKey(key): erase(index), makeRoom() and the sweeps hash the key again to find its
  /// cell (the table's own tests give other hashes to force collisions, and avoid those).
  std::uint32_t insert(std::string_view key, std::uint64_t hash, BucketState&& state,
                       Micros expires_at);
  void erase(std::uint32_t index);
  /// erase() of an entry inserted with `hash` (spares hashing its key again).
  void erase(std::uint32_t index, std::uint64_t hash);

  /// Frees at least one entry if there is one: the expired entries among the next
  /// kRoomScan of the sweep, else the least recently used one (counted as expired if it
  /// is). Bounded work, but for the table's first eviction of its least recently used
  /// entry, which sorts the entries by last use once (see the layout above). Returns how
  /// many entries went.
  std::size_t makeRoom(Micros now, Evictions& evictions);
  /// Removes the entries whose key starts with one of `prefixes`; returns how many.
  std::size_t erasePrefixes(const std::vector<std::string>& prefixes);
  /// Advances the incremental expiry sweep over at most `budget` entries, removing those
  /// expired at `now`; returns how many. O(1) while no entry can have expired yet.
  std::size_t sweep(Micros now, std::size_t budget);
  /// Removes every entry expired at `now`.
  std::size_t sweepAll(Micros now) { return sweep(now, allocated_); }

  /// Entries makeRoom() looks at for an expired one before evicting the LRU.
  static constexpr std::size_t kRoomScan = 64;

  std::size_t size() const { return size_; }

  /// Calls visit(key, a, b, c, expires_at, log) for every entry not expired at `now` (log:
  /// null unless a sliding_window_log bucket's), in index order. For snapshots: the caller
  /// holds the shard's lock, so the visit should be quick.
  template <typename Visit>
  void forEachLive(Micros now, Visit&& visit) const {
    for (std::uint32_t index = 0; index < allocated_; ++index) {
      const Entry& entry = at(index);
      if (entry.live == 0 || toMicros(entry.expires_s) <= now) {
        continue;
      }
      const std::vector<LogEntry>* log = nullptr;
      if (entry.has_log != 0) {
        if (const auto it = logs_.find(index); it != logs_.end()) {
          log = &it->second;
        }
      }
      visit(keyOf(index), entry.a, entry.b, entry.c, toMicros(entry.expires_s), log);
    }
  }

 private:
  struct Entry {
    std::int64_t a = 0;
    std::int64_t b = 0;
    std::int64_t c = 0;
    std::uint32_t expires_s = 0;   // seconds since the epoch, rounded up
    std::uint32_t key_offset = 0;  // chunk << 15 | offset
    // Ordered: the links (prev towards the most recently used); else the use stamp's low
    // and high 24 bits.
    std::uint64_t prev : 24 = kNone;
    std::uint64_t next : 24 = kNone;
    std::uint64_t key_length : 14 = 0;  // kLongKey: the key is in long_keys_
    std::uint64_t has_log : 1 = 0;      // a sliding_window_log bucket: logs_ has its log
    std::uint64_t live : 1 = 0;         // 0: on the free list
  };
  static_assert(sizeof(Entry) == 40);
  static constexpr std::uint32_t kChunkBits = 10;
  static constexpr std::uint32_t kChunkSize = 1U << kChunkBits;
  /// A cell: bits 0-31 the hash's low 32 (homeCell()), 32-55 the entry index, 56-63 the
  /// hash's top 8. kEmptyCell's index, kNone, is never an entry's.
  using Cell = std::uint64_t;
  static constexpr Cell kEmptyCell = ~Cell{0};
  static constexpr Cell kFingerprintMask = 0xff000000ffffffffULL;
  static constexpr std::size_t kArenaChunkBytes = 32 * 1024;
  static constexpr std::uint32_t kLongKey = 0x3fff;

  Entry& at(std::uint32_t index) { return chunks_[index >> kChunkBits][index & (kChunkSize - 1)]; }
  const Entry& at(std::uint32_t index) const {
    return chunks_[index >> kChunkBits][index & (kChunkSize - 1)];
  }
  std::string_view keyOf(std::uint32_t index) const;
  std::size_t homeCell(std::uint64_t hash) const {
    return static_cast<std::size_t>(((hash & 0xffffffffU) * cells_.size()) >> 32);
  }
  std::size_t nextCell(std::size_t i) const { return i + 1 == cells_.size() ? 0 : i + 1; }
  static Cell fingerprint(std::uint64_t hash) { return hash & kFingerprintMask; }
  static Cell cellValue(std::uint64_t hash, std::uint32_t index) {
    return fingerprint(hash) | static_cast<Cell>(index) << 32;
  }
  static std::uint32_t indexOf(Cell cell) { return static_cast<std::uint32_t>(cell >> 32) & kNone; }
  static Micros toMicros(std::uint32_t seconds) {
    return static_cast<Micros>(seconds) * kMicrosPerSecond;
  }
  static std::uint32_t toSeconds(Micros at);
  std::uint32_t allocate();
  void linkFront(std::uint32_t index);
  void unlink(std::uint32_t index);
  /// Gives an entry the next use stamp (not ordered).
  void stamp(std::uint32_t index);
  /// Turns the use stamps into the ordered list (ordered_ becomes true).
  void order();
  void indexInsert(Cell cell);
  void indexErase(std::uint32_t index, std::uint64_t hash);
  void growIndex();
  void storeKey(std::uint32_t index, std::string_view key);
  void releaseKey(std::uint32_t index);
  void compactArena();
  /// The entry insert() would take now, or null (a new chunk).
  const char* nextSlot() const;
  /// Erases `count` (at most kSweepBatch) entries, hashing their keys first.
  std::size_t eraseBatch(const std::uint32_t* batch, std::size_t count);
  static constexpr std::size_t kSweepBatch = 8;

  std::size_t size_ = 0;
  std::vector<std::unique_ptr<Entry[]>> chunks_;
  std::uint32_t allocated_ = 0;      // entries ever handed out (high-water mark)
  std::vector<std::uint32_t> free_;  // erased entries, the last erased taken first
  // Recency: ordered_ false: the entries carry use stamps (the next one next_stamp_, below
  // stamp_limit_), head_ the last stamped; true: the list from head_ (most recently used)
  // to tail_.
  bool ordered_ = false;
  std::uint64_t next_stamp_ = 0;
  std::uint64_t stamp_limit_;
  std::uint32_t head_ = kNone;
  std::uint32_t tail_ = kNone;
  std::vector<Cell> cells_;
  std::vector<std::unique_ptr<char[]>> arena_;  // kArenaChunkBytes each
  std::size_t arena_used_ = 0;                  // bytes used in the last chunk
  std::size_t arena_garbage_ = 0;               // bytes of erased keys
  std::unordered_map<std::uint32_t, std::string> long_keys_;
  std::unordered_map<std::uint32_t, std::vector<LogEntry>> logs_;
  // The sweep walks entry indices round-robin. No live entry expires before
  // earliest_expiry_; a full round recomputes it from what it saw and what was saved.
  Micros earliest_expiry_;
  std::uint32_t sweep_cursor_ = 0;
  Micros round_min_seen_;
  Micros round_min_saved_;
};

}  // namespace sluice::memory_detail
