#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sluice {

/// The heaviest keys of a stream in fixed memory: the Space-Saving algorithm (Metwally,
/// Agrawal, El Abbadi, "Efficient Computation of Frequent and Top-k Elements in Data
/// Streams", ICDT 2005).
///
/// It keeps at most `capacity` counters. A key that has a counter adds its weight to it; a
/// new key takes a free counter, or else replaces the key with the smallest count, inheriting
/// that count as its error. Hence, with N the total weight added and k the capacity:
/// - every reported count over-estimates: true <= count, and count - error <= true;
/// - error <= min count <= N / k, so every count is within N / k of the truth;
/// - every key whose true weight exceeds N / k holds a counter (it is never missed).
///
/// Memory: `capacity` counters, each with a key of at most `max_key_bytes` bytes (a longer
/// key is counted under its first `max_key_bytes` bytes). An update costs one hash lookup and
/// O(log k) moves in a min-heap. Pure and not thread-safe.
class SpaceSaving {
 public:
  struct Entry {
    std::string key;
    std::uint64_t count = 0;  ///< upper bound of the key's weight
    std::uint64_t error = 0;  ///< count - error is a lower bound
  };

  /// What a summary knows, for merging: its entries (unsorted), N, and the most weight a key
  /// without a counter can have had (the smallest count when full, else 0).
  struct Snapshot {
    std::vector<Entry> entries;
    std::uint64_t total = 0;
    std::uint64_t absent_bound = 0;
  };

  static constexpr std::size_t kDefaultMaxKeyBytes = 256;

  /// `capacity` >= 1.
  explicit SpaceSaving(std::size_t capacity, std::size_t max_key_bytes = kDefaultMaxKeyBytes);
  SpaceSaving(const SpaceSaving&) = delete;
  SpaceSaving& operator=(const SpaceSaving&) = delete;
  SpaceSaving(SpaceSaving&&) = delete;
  SpaceSaving& operator=(SpaceSaving&&) = delete;

  /// Adds `weight` (>= 1) to `key`.
  void add(std::string_view key, std::uint64_t weight = 1);

  /// Forgets everything (the counters' memory stays allocated).
  void clear();

  /// The `n` largest counts, largest first (ties: smaller error first, then by key).
  std::vector<Entry> top(std::size_t n) const;

  Snapshot snapshot() const;

  std::size_t capacity() const { return slots_.size(); }
  std::size_t size() const { return used_; }
  std::uint64_t total() const { return total_; }
  /// The smallest count when every counter is taken, else 0.
  std::uint64_t absentBound() const;

  /// Merges summaries of disjoint parts of one stream (other threads, other windows): a key's
  /// count and error are the sums over the parts of its count and error where it has a
  /// counter, and of the part's absent_bound where it has none. The bounds stay true for the
  /// whole stream: true <= count, count - error <= true, error <= sum of N_i / k_i. Returns
  /// the `n` largest, ordered as top().
  static std::vector<Entry> merge(const std::vector<Snapshot>& parts, std::size_t n);

 private:
  struct Slot {
    std::string key;
    std::uint64_t count = 0;
    std::uint64_t error = 0;
    std::size_t heap_pos = 0;
  };

  bool less(std::size_t a, std::size_t b) const;  // heap order of two slot ids
  void swapHeap(std::size_t i, std::size_t j);
  void siftUp(std::size_t pos);
  void siftDown(std::size_t pos);

  std::size_t max_key_bytes_;
  std::vector<Slot> slots_;        // fixed size: capacity; slots [0, used_) hold keys
  std::vector<std::size_t> heap_;  // slot ids, a min-heap by count
  std::size_t used_ = 0;
  std::uint64_t total_ = 0;
  // Views into slots_[i].key: slots never move (slots_ is never resized after construction).
  std::unordered_map<std::string_view, std::size_t> index_;
};

/// Sorts entries as SpaceSaving::top() orders them and keeps the first `n`.
void sortAndTruncate(std::vector<SpaceSaving::Entry>& entries, std::size_t n);

}  // namespace sluice
