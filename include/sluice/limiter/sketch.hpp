#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/limiter/sketch_params.hpp"

/// The `sketch` algorithm (docs/algorithms.md, docs/sketch.md): approximate sliding-window limiting
/// in memory that does not grow with the number of clients. Per rule, two count-min sketches
/// of d rows x w counters, the previous and the current epoch-aligned window of W. A client's
/// estimate is P x (W - elapsed) / W + C, P and C the minimum of its d counters in each
/// sketch, with sliding_window_counter's double expression; a request is allowed iff
/// estimate + cost <= L. Conservative update: an admitted request raises each of the client's
/// counters in the current sketch to at least C + cost, never more. Every counter of a client
/// is at least the client's true count, so the sketch never admits what the exact
/// sliding_window_counter (fed the same admitted requests) would deny.
///
/// Pure: no I/O, no clock reads, no locks. The stores hash the client's key with a
/// SketchHasher (their own seed) into SketchCells, read the cells' counters, call
/// evaluateSketch(), and write back. The Redis script gets the cells (row indices) from C++,
/// so both stores decide identically for one seed.
namespace sluice {

inline constexpr std::uint32_t kMaxSketchDepth = 16;
inline constexpr std::uint32_t kMaxBloomHashes = 16;
/// Columns per row at most (2^28): a sketch of 16 rows of 32-bit counters stays below 4 GiB.
inline constexpr std::uint32_t kMaxSketchWidth = 1U << 28;
/// A saturated counter (at the largest value its width holds) is read as this many requests:
/// "at least the counter's maximum, unknown how many", so that it can only deny more.
inline constexpr std::int64_t kSketchSaturatedCount = std::int64_t{1} << 53;

/// The narrowest counter width (8, 16, 32) whose largest value exceeds `limit`, so that no
/// admitted request ever saturates a counter; 0 when `limit` needs more than 32 bits.
std::uint32_t sketchCounterBits(std::int64_t limit);
/// The largest value a counter of `bits` holds (saturation).
inline std::int64_t sketchCounterMax(std::uint32_t bits) {
  return bits >= 63 ? INT64_MAX : (std::int64_t{1} << bits) - 1;
}
/// Width for `expected_requests` admitted per window: the number of counters per row that
/// keeps the sketch's load (admitted per window / (w x L)) at kSketchTargetLoad; at least 64.
std::uint32_t sketchWidthFor(std::int64_t expected_requests, std::int64_t limit);
inline constexpr double kSketchTargetLoad = 0.05;
/// Bloom filter size for `expected_clients` distinct clients per window at a 1 % false
/// positive rate: m = ceil(-n ln(0.01) / ln(2)^2) bits (at least 64), k = 7.
std::uint32_t sketchBloomBits(std::int64_t expected_clients);
inline constexpr std::uint32_t kSketchBloomHashes = 7;
/// Bytes of one rule's state: 2 x (d x w x counter bytes + m / 8) plus a small header.
std::size_t sketchStateBytes(const SketchParams& params);

/// Where one client's counts live: its column in each row, its bits in the Bloom filter.
struct SketchCells {
  std::array<std::uint32_t, kMaxSketchDepth> columns{};  ///< [0, depth): 0 <= column < width
  std::array<std::uint32_t, kMaxBloomHashes> bloom{};    ///< [0, bloom_hashes): < bloom_bits
};

/// One keyed 64-bit hash of the client's bucket key (SipHash-2-4 under a 128-bit seed), then
/// an independent mixing per row: column_r = fastrange(fmix64(h ^ K_r), w) with per-row keys
/// K_r drawn from the seed (not h1 + r x h2, under which two keys that collide in two rows
/// collide in all of them). Bloom bits likewise with their own keys. Immutable, thread-safe.
class SketchHasher {
 public:
  SketchHasher(std::uint64_t k0, std::uint64_t k1);
  /// Parses 32 hex digits (k0 then k1, big-endian); nullptr-like empty optional when malformed.
  static bool parseSeed(std::string_view hex, std::uint64_t& k0, std::uint64_t& k1);
  /// 32 hex digits.
  static std::string formatSeed(std::uint64_t k0, std::uint64_t k1);

  std::uint64_t hash(std::string_view key) const;
  /// The cells of `key` in a sketch of `width` columns and `depth` rows (and a Bloom filter of
  /// `bloom_bits` bits with `bloom_hashes` bits per client when bloom_bits > 0).
  SketchCells cells(std::string_view key, std::uint32_t width, std::uint32_t depth,
                    std::uint32_t bloom_bits, std::uint32_t bloom_hashes) const;
  SketchCells cells(std::string_view key, const SketchParams& params) const {
    return cells(key, params.width, params.depth, params.bloom_bits, params.bloom_hashes);
  }
  /// 8 hex digits identifying the seed (part of the Redis key names): sidecars with different
  /// seeds never read each other's counters.
  const std::string& fingerprint() const { return fingerprint_; }

 private:
  std::uint64_t k0_;
  std::uint64_t k1_;
  std::array<std::uint64_t, kMaxSketchDepth> row_keys_{};
  std::array<std::uint64_t, kMaxBloomHashes> bloom_keys_{};
  std::string fingerprint_;
};

/// What a store read for one client in the two windows' sketches.
struct SketchRead {
  std::int64_t curr = 0;  ///< min of its counters in the current window (kSketchSaturatedCount
                          ///< when one is saturated; 0 when the sketch is of another window)
  std::int64_t prev = 0;  ///< the same in the previous window's sketch
  /// Bloom gate only: false when the client is in neither window's filter, so it has made no
  /// counted request in either window and its counts are exactly 0.
  bool seen = true;
};

/// A counter as read: saturated counters count as kSketchSaturatedCount.
inline std::int64_t sketchCounterValue(std::int64_t stored, std::uint32_t bits) {
  return stored >= sketchCounterMax(bits) ? kSketchSaturatedCount : stored;
}

struct SketchEvaluation {
  Outcome outcome;
  /// When this attempt is recorded (the request is allowed and this limit allowed, or
  /// count_rejected): each of the client's counters in the current sketch is raised to at
  /// least raise_to (saturating), its Bloom bits are set, `cost` is added to the window's
  /// charged total. record = false when there is nothing to write (a check, or never).
  bool record = false;
  std::int64_t raise_to = 0;
  /// Until the current sketch is no longer read (the end of the next window), for the store's
  /// key expiry.
  Micros ttl_us = 0;
};

/// Evaluates one sketch limit for a client whose counters read `read`, at `now`, for `cost`
/// (<= 0 checks). Outcome fields as for sliding_window_counter on the counts (C, P): remaining
/// is a lower bound of the exact limiter's, retry_after never earlier than its, never iff
/// cost > L. Requires params.limit > 0 and params.window_us > 0 (evaluate() checks).
SketchEvaluation evaluateSketch(const LimitParams& params, const SketchRead& read, Micros now,
                                std::int64_t cost);

/// The epoch-aligned window index floor(now / W).
std::int64_t sketchWindowIndex(Micros now, Micros window);

/// Ablations for bench/sketch only; production rules always use the defaults.
struct SketchVariant {
  bool conservative = true;  ///< false: plain count-min updates (every counter += cost)
  bool sliding = true;       ///< false: hard reset each window (no previous sketch: P = 0)
};

/// One rule's state in process: two windows (indexed by the parity of the window index), each
/// a window stamp, d x w counters, an optional Bloom filter, the window's charged total and
/// the number of counters at or above L. Not thread-safe (the memory store locks it). The
/// Redis script keeps the same state in two strings with the same rules.
class SketchTable {
 public:
  SketchTable(const SketchParams& params, std::int64_t limit, SketchVariant variant = {});

  /// The client's counts at window index `window_index`.
  SketchRead read(const SketchCells& cells, std::int64_t window_index) const;
  /// Records an attempt at `window_index`: starts the window's sketch afresh if it holds an
  /// older window, raises the client's counters to at least `raise_to` (conservative) or adds
  /// `cost` (plain variant), sets its Bloom bits, adds `cost` to the charged total.
  void record(const SketchCells& cells, std::int64_t window_index, std::int64_t raise_to,
              std::int64_t cost);

  /// The current window's charged total / (w x L) at `window_index` (0 when it has none).
  double load(std::int64_t window_index) const;
  /// The share of the current window's counters at or above L (a client all of whose counters
  /// are there is denied whatever its own count).
  double saturatedShare(std::int64_t window_index) const;
  /// Bytes of counters and filters held (both windows).
  std::size_t bytes() const;
  const SketchParams& params() const { return params_; }

 private:
  struct Window {
    std::int64_t stamp = INT64_MIN;
    std::int64_t charged = 0;
    std::int64_t saturated = 0;
    std::vector<std::uint8_t> counters;  ///< d x w counters of counter_bits, little-endian
    std::vector<std::uint64_t> bloom;    ///< bloom_bits bits
  };
  std::int64_t counter(const Window& window, std::size_t index) const;
  void setCounter(Window& window, std::size_t index, std::int64_t value);
  const Window* windowAt(std::int64_t window_index) const;

  SketchParams params_;
  std::int64_t limit_;
  SketchVariant variant_;
  std::uint32_t bytes_per_counter_;
  std::array<Window, 2> windows_;
};

}  // namespace sluice
