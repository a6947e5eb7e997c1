#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/limiter/limiter.hpp"

/// The pure part of `consistency: eventual` (docs/eventual.md): a sidecar's local view of one
/// shared counter, how a view is merged with what Redis answers, how a request is decided
/// from it, and when a key is too close to its limit to be decided locally. No I/O, no clock
/// reads: every function takes `now`. The store decorator (src/store/eventual/) owns the
/// views, the locks and the Redis calls.
namespace sluice::eventual {

/// True for the algorithms that can be eventual: fixed_window, sliding_window_counter
/// (counters add) and token_bucket (the bucket's level is rebuilt from the added counters).
/// `sketch` is eventual too, but as d counters per client (eventual_sketch.hpp), not one.
bool supportsEventual(Algorithm algorithm);
/// Why `params` cannot be eventual ("" when it can): the algorithm, or an option whose state
/// cannot be merged (token_bucket `warmup`). "" for sketch (merged cell by cell).
std::string eventualRefusal(const LimitParams& params);

/// A grow-only counter (state-based CRDT): named entries with cumulative values. Merging
/// keeps the larger value of each entry, so a replayed, reordered or duplicated update
/// changes nothing. Entries are kept sorted by name.
class GCounter {
 public:
  /// Raises entry `name` to at least `value`; returns by how much it grew (0 if not).
  std::int64_t raise(std::string_view name, std::int64_t value);
  /// Per-entry maximum with `other`; returns by how much the sum grew.
  std::int64_t merge(const GCounter& other);
  /// The value of `name` (0 when absent).
  std::int64_t value(std::string_view name) const;
  std::int64_t sum() const { return sum_; }
  /// Entries with a value above 0.
  std::size_t writers() const;
  const std::vector<std::pair<std::string, std::int64_t>>& entries() const { return entries_; }
  void clear() {
    entries_.clear();
    sum_ = 0;
  }

 private:
  std::vector<std::pair<std::string, std::int64_t>> entries_;
  std::int64_t sum_ = 0;
};

/// "No window yet".
inline constexpr std::int64_t kNoWindow = INT64_MIN;

/// One window of a key as this sidecar knows it. `own` is the truth for this sidecar's
/// own hits (they are decided here); `others` is the largest total of every other entry
/// (other sidecars, other regions) Redis has answered. Each entry only grows, so their total
/// only grows too: merging readings by maximum is the grow-only counter's per-entry maximum,
/// and a replayed, duplicated or reordered reading changes nothing.
struct WindowView {
  std::int64_t index = kNoWindow;  ///< window start / W (0 for token_bucket: one "window")
  std::int64_t others = 0;         ///< every entry but this sidecar's own, summed
  std::size_t writers = 0;         ///< other entries with hits (for the tightening)
  std::int64_t own = 0;            ///< this sidecar's cumulative hits in the window
  std::int64_t own_acked = 0;      ///< the part of `own` that Redis has confirmed

  std::int64_t total() const { return others + own; }
  std::int64_t unsent() const { return own - own_acked; }
};

/// The tuning of the local decisions and of the tightening.
struct Tuning {
  Micros sync_interval_us = 50'000;
  /// A view older than this is read again (one round trip) before it may allow, when Redis
  /// is reachable. Younger views allow locally with a margin grown by their age (see
  /// tooClose()). A key a sidecar decides at least this often is re-read by every sync that
  /// follows one of its decisions, so only keys this sidecar barely uses pay the round trip.
  Micros stale_after_us = kMicrosPerSecond;
  /// Multiplies the horizon of the tightening (>= 1): 2 covers an estimate that lags the
  /// real rate by up to a factor of two.
  double safety = 2.0;
  /// With other regions: how late their hits reach this region's Redis (their sync interval,
  /// a replication step and the link's round trip); added to the tightening horizon.
  Micros region_delay_us = 0;
  /// With other regions: a windowed key that turned tight stays tight until its window ends
  /// (its round trips are capped by the region's share, which slows the rate the margin is
  /// estimated from; going local again on that slower rate would admit at full speed).
  bool tight_until_window_ends = false;
  /// The blind allowance, as a share of a key's capacity (L; a bucket's burst): how many hits
  /// a sidecar may admit locally on a key it has not read yet (or not for stale_after_us),
  /// until the sync that follows reads it. N sidecars arriving blind at a key within 1 % of
  /// its limit over-admit at most N x this share of L (docs/eventual.md).
  double blind_share = 0.001;
  /// Quiet keys (quietUntil()): a fixed-window key far from its limit, with few unsent hits,
  /// keeps them until its window ends (they expire with it) instead of going out within
  /// stale_after. Off: every key is sent and read within stale_after of its decisions, so
  /// Redis (and every region) holds each hit within about a second.
  bool quiet_keys = true;
};

/// Estimates a key's global rate (hits per second, all sidecars and regions) from successive
/// totals, and this sidecar's own rate from its own hits.
class RateEstimate {
 public:
  /// One observation: the key's total and this sidecar's own count at `at` in window
  /// `window` (totals of different windows are not compared). Observations closer than
  /// `min_gap_us` to the previous sample are ignored (two replies a few microseconds apart
  /// say nothing about a rate).
  void observe(Micros at, std::int64_t window, std::int64_t total, std::int64_t own,
               Micros min_gap_us);
  double globalPerSecond() const { return global_; }
  double ownPerSecond() const { return own_; }
  /// True once two observations of one window have given a rate (before that the rates are
  /// 0 however busy the key is).
  bool measured() const { return measured_; }

 private:
  Micros at_ = 0;
  std::int64_t window_ = kNoWindow;
  std::int64_t total_ = 0;
  std::int64_t own_total_ = 0;
  double global_ = 0;
  double own_ = 0;
  bool has_sample_ = false;
  bool measured_ = false;
};

/// Everything a sidecar knows about one eventual key.
struct View {
  WindowView cur;   ///< the current window (token_bucket: its only counter)
  WindowView prev;  ///< the previous window (sliding_window_counter reads it; fixed_window
                    ///< keeps it only to send its unsent hits)
  /// token_bucket: the theoretical arrival time as Redis computed it from every counter it
  /// had (a = us, b = remainder in 1/L us), merged by maximum, and the local one that adds
  /// this sidecar's own admissions since.
  BucketState redis_tat;
  BucketState local_tat;
  Micros refreshed_at = -1;  ///< when Redis last answered for this key (-1: never)
  Micros latency_us = 0;     ///< the last round trip that refreshed the view
  RateEstimate rate;
  /// The allowance left below which the key is decided by round trips (see tightenAt()).
  std::int64_t tight_below = 0;
  bool tight = false;  ///< the last look found the key within tight_below of its limit
  /// Hits admitted locally since the last reading while the view was unknown or stale (the
  /// blind allowance used; a reading resets it, and so does a new fixed window).
  std::int64_t blind = 0;
};

/// Moves the view to the window of `now` (windowed algorithms). Returns the unsent own hits
/// that fell out of the two kept windows (dropped: they can no longer change a decision). A
/// fixed window keeps no previous window: no decision reads one that has ended, so its unsent
/// hits expire with it, not sent and not counted as dropped (0 is returned).
std::int64_t roll(View& view, const LimitParams& params, Micros now);

/// The bucket state the limiter evaluates: this sidecar's best knowledge of the global
/// state at `now` (call roll() first).
BucketState merged(const View& view, const LimitParams& params, Micros now);

/// How a request on this key must be decided.
enum class Route : std::uint8_t {
  kLocal,    ///< from the view, no round trip
  kUnknown,  ///< never read: one round trip first
  kStale,    ///< not refreshed for Tuning::stale_after_us: one round trip
  kTight,    ///< too close to the limit: one round trip (strict) per request
};
/// `reachable`: Redis answers; without it every key is decided locally (degraded). An unknown
/// or stale key is still decided locally while its blind allowance covers `cost`
/// (View::blind + cost <= blindAllowance()).
Route route(const View& view, const LimitParams& params, Micros now, std::int64_t cost,
            const Tuning& tuning, bool reachable);
/// True when the view is unknown or stale (a local decision on it uses the blind allowance).
bool blindView(const View& view, Micros now, const Tuning& tuning);
/// floor(capacity x Tuning::blind_share), capacity = L (token_bucket: its burst).
std::int64_t blindAllowance(const LimitParams& params, const Tuning& tuning);
/// True when the key must go out with the next sync whatever its wait: it is tight, has
/// unsent hits of the previous window, more unsent hits than its blind allowance, or has used
/// more than half of that allowance blind (the sync that follows reads it before it is used up
/// and the key's decisions would take round trips).
bool mustGoOut(const View& view, const LimitParams& params, const Tuning& tuning);
/// The end of the key's window when it is a **quiet** key ("Quiet keys", docs/eventual.md): a
/// fixed window (read or not: a view never read is blind), that need not go out before its window
/// ends because its unsent hits expire with it: it has a blind allowance, nothing must go out
/// (mustGoOut(): so its unsent hits are within that allowance), and it is far from its limit
/// (farFromLimit()) over the rest of the window. Otherwise -1. Other sidecars then never see its
/// hits of that window, at most its blind allowance (a decision past it makes the key go out),
/// which is the bound's cold-key term.
Micros quietUntil(const View& view, const LimitParams& params, Micros now, const Tuning& tuning);
/// Until when a key queued for the sync may wait for a later one ("cold keys",
/// docs/eventual.md); a time <= `now` means it goes out with this one. A key may wait when it
/// was sent (at `synced_at` >= 0), has been read, and nothing must go out (mustGoOut()); then
/// until its window has ended (sliding_window_counter, whose next window reads them: the end, plus
/// up to near_wait below, spread by the offset of the last send in its window), and at most:
/// - far from its limit (farFromLimit()): stale_after after it was sent (it is read again by
///   the next sync, its view stale for at most that interval);
/// - otherwise min(stale_after / 2, W / 4) after it was sent.
/// A quiet key (quietUntil(), which the caller asks first) waits longer.
Micros deferUntil(const View& view, const LimitParams& params, Micros synced_at, Micros now,
                  const Tuning& tuning);
/// The previous window's own count a sync sends: its cumulative hits when the window just
/// before the current one has hits Redis has not confirmed, else 0 (nothing to send).
std::int64_t previousToSend(const View& view);
/// True when a sync that goes out for another reason than the current window's own hits (the
/// key's first reading, with `synced_at` < 0; or a sliding window's previous unsent hits) may
/// read the current window without writing it: a windowed key that is not tight and whose
/// unsent hits of the current window are within its blind allowance. They then go out with the
/// key's next sync (deferUntil()), so a new key's first sync is a read, and a cold sliding
/// window is written once, when it has ended, not also when its first hits arrive.
bool mayWithholdCurrent(const View& view, const LimitParams& params, Micros synced_at,
                        const Tuning& tuning);
/// deferUntil(...) > now.
bool mayDefer(const View& view, const LimitParams& params, Micros synced_at, Micros now,
              const Tuning& tuning);
/// True when the view leaves at least half of the key's capacity (L; a bucket's burst) once
/// everything the key may spend before its next reading `wait_us` from now is counted: the
/// global rate times Tuning::safety over that time, and a blind allowance for every writer
/// (this sidecar and the others with hits) whose unsent hits nobody has read.
bool farFromLimit(const View& view, const LimitParams& params, Micros now, Micros wait_us,
                  const Tuning& tuning);

/// Evaluates a request of `cost` from the view (no change to it).
Evaluation decide(const View& view, const LimitParams& params, Micros now, std::int64_t cost);

/// True when an allowed local decision leaves less than the key's tightening margin (grown by
/// the hits the key's global rate adds over the view's age, times Tuning::safety): the
/// request must instead be decided by a round trip (and the key turns tight).
bool tooClose(const View& view, const Evaluation& evaluation, Micros now, const Tuning& tuning);

/// Records this sidecar's charge of a decision made from `state` = merged(view, ...) at `now`
/// (the hits it adds to its own counter, and for token_bucket its local arrival time).
/// Returns the hits added to the own counter.
std::int64_t charge(View& view, const LimitParams& params, const BucketState& state,
                    const Evaluation& evaluation, std::int64_t cost);

/// What Redis returned for one key: for the current and the previous window, the total of
/// every entry but this sidecar's own, this sidecar's own entry, and the number of other
/// entries with hits; for token_bucket the arrival time it holds.
struct KeyReading {
  std::int64_t window = kNoWindow;  ///< index of `cur` (0 for token_bucket)
  std::int64_t others = 0;
  std::int64_t own = 0;
  std::int64_t prev_others = 0;
  std::int64_t prev_own = 0;
  std::size_t writers = 0;
  BucketState tat;
};

/// Merges a reading taken `latency_us` after it was asked for, at `now`, into the view:
/// the other entries' total by maximum, the own counter's acknowledgement, the arrival time by
/// maximum, the rate estimate and the tightening margin. A reading of an older window than
/// the view's only adds to `prev`; of a newer one rolls the view first.
void merge(View& view, const LimitParams& params, const KeyReading& reading, Micros now,
           Micros latency_us, const Tuning& tuning);

/// The tightening margin (docs/eventual.md): the hits all sidecars may admit before this
/// sidecar sees them, estimated as rate x horizon, where rate = max(global rate, own rate x
/// writers) and horizon = safety x (2 sync intervals + 2 round trips + the regions' delay).
/// A key with less allowance left than this is decided by round trips.
std::int64_t tightenAt(double global_per_second, double own_per_second, std::size_t writers,
                       Micros latency_us, const Tuning& tuning);

/// Regions, near the limit (docs/eventual.md, "Regions: each region's share near the
/// limit"): on a key decided by round trips, a region may hold, beyond what every other region
/// has confirmed holding of its count, the larger of this cap and its share of what remains
/// (regionHoldLimit()). floor(L / 200 / (regions - 1)) for fixed_window,
/// floor(L / 400 / (regions - 1)) for sliding_window_counter (its previous window's hits count
/// too), at least 1. 0 (no cap) for one region and for token_bucket and sketch (their regions
/// keep the rate x delay bound).
std::int64_t regionCap(const LimitParams& params, std::size_t regions);
/// How many hits of the window a region may hold beyond `confirmed` (its count that every
/// other region confirmed, settled: see RegionConfirmations): max(cap, its share of what
/// remains, floor((L - before - confirmed - elsewhere) / regions)), where `elsewhere` is the
/// other regions' counts in its Redis and `before` what the previous window still weighs
/// (sliding_window_counter: ceil(previous total x (W - elapsed) / W); 0 for fixed_window).
/// The script computes the same on the values it holds.
std::int64_t regionHoldLimit(const LimitParams& params, std::size_t regions, std::int64_t cap,
                             std::int64_t confirmed, std::int64_t elsewhere,
                             std::int64_t before = 0);
/// True when a region holding `region_count` hits of the window (its sidecars' fields in its
/// own Redis), of which every other region confirmed `confirmed`, may add `added` within
/// `hold` (regionHoldLimit(); 0 = no cap).
bool withinRegionCap(std::int64_t region_count, std::int64_t confirmed, std::int64_t added,
                     std::int64_t hold);

/// Regions: this region's count in one window of a key that every other region confirmed
/// holding, as the confirmations arrive. The share of what remains may count a confirmation
/// only once it has settled (arrived `settle_us` ago, settle_us >= the longest a region's hits
/// take to reach the other regions' Redis): by then every hit the other regions admitted
/// before they confirmed it is in this region's Redis (docs/eventual.md).
class RegionConfirmations {
 public:
  /// A confirmation of `value` in `window` arriving at `now` (an older window is ignored, a
  /// newer one starts over).
  void note(std::int64_t window, std::int64_t value, Micros now, Micros settle_us);
  /// The largest confirmed value of `window` that arrived at least `settle_us` before `now`.
  std::int64_t settled(std::int64_t window, Micros now, Micros settle_us) const;

 private:
  static constexpr std::size_t kPending = 4;
  std::int64_t window_ = kNoWindow;
  std::int64_t settled_ = 0;
  std::pair<std::int64_t, Micros> pending_[kPending] = {};
  std::size_t count_ = 0;
};
/// Regions, a local decision: true when this sidecar's hits that the other regions have not
/// confirmed (`unconfirmed`), plus `cost`, exceed its region's share of what remains
/// (remaining_after + unconfirmed + cost, split between `regions`): the request must go to
/// a round trip (the key turns tight, and regionCap() applies). Keeps the regions' local
/// bursts (before a key's rate is known) within L together.
bool beyondRegionShare(std::int64_t unconfirmed, std::int64_t cost, std::int64_t remaining_after,
                       std::size_t regions);

/// Token bucket: the arrival time `tat` advanced by `hits` applied at `now`
/// (max(tat, now) + hits x W / L, exact in 1/L microseconds).
BucketState advanceTat(const BucketState& tat, const LimitParams& params, Micros now,
                       std::int64_t hits);
/// The later of two arrival times.
BucketState laterTat(const BucketState& a, const BucketState& b, std::int64_t limit);

}  // namespace sluice::eventual
