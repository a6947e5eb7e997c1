#include "sluice/limiter/eventual.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "limiter/algorithms.hpp"

namespace sluice::eventual {
namespace {

using limiter_detail::floorDiv;
__extension__ using Wide = __int128;

std::int64_t windowIndex(const LimitParams& params, Micros now) {
  return params.algorithm == Algorithm::kTokenBucket ? 0 : floorDiv(now, params.window_us);
}

/// Normalises a TAT pair so that 0 <= b < L.
BucketState normalTat(BucketState tat, std::int64_t limit) {
  if (limit <= 0) {
    return tat;
  }
  const std::int64_t k = floorDiv(tat.b, limit);
  tat.a += k;
  tat.b -= k * limit;
  return tat;
}

bool tatLess(const BucketState& x, const BucketState& y) {
  return x.a < y.a || (x.a == y.a && x.b < y.b);
}

}  // namespace

bool supportsEventual(Algorithm algorithm) {
  return algorithm == Algorithm::kFixedWindow || algorithm == Algorithm::kSlidingWindowCounter ||
         algorithm == Algorithm::kTokenBucket;
}

std::string eventualRefusal(const LimitParams& params) {
  if (params.calendar.enabled()) {
    return "'consistency: eventual' does not apply with 'calendar' (the sidecars' local views "
           "count epoch-aligned windows; a calendar window is decided in the store)";
  }
  if (params.algorithm == Algorithm::kSketch) {
    // Merged cell by cell: every cell is a grow-only counter (docs/eventual.md, "sketch").
    return {};
  }
  if (params.algorithm == Algorithm::kConcurrency) {
    return "'consistency: eventual' does not apply to algorithm 'concurrency': a lease must be "
           "taken and released in one place that every sidecar sees at once, and an eventual "
           "limit lets each sidecar admit on its own view (several sidecars would each grant "
           "the last free lease)";
  }
  if (!supportsEventual(params.algorithm)) {
    return "'consistency: eventual' does not apply to algorithm '" +
           std::string(algorithmName(params.algorithm)) +
           "' (only to fixed_window, sliding_window_counter, token_bucket, sketch: their "
           "state is counters that add up across sidecars; a " +
           std::string(algorithmName(params.algorithm)) + "'s state does not merge)";
  }
  if (params.warmup_us > 0) {
    return "'consistency: eventual' does not apply with 'warmup' (the warm-up store is "
           "one sidecar's history and does not merge across sidecars)";
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// GCounter

std::int64_t GCounter::raise(std::string_view name, std::int64_t value) {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& entry, std::string_view n) { return entry.first < n; });
  if (it != entries_.end() && it->first == name) {
    if (value <= it->second) {
      return 0;
    }
    const std::int64_t grew = value - it->second;
    it->second = value;
    sum_ += grew;
    return grew;
  }
  if (value <= 0) {
    return 0;
  }
  entries_.emplace(it, std::string(name), value);
  sum_ += value;
  return value;
}

std::int64_t GCounter::merge(const GCounter& other) {
  std::int64_t grew = 0;
  for (const auto& [name, value] : other.entries_) {
    grew += raise(name, value);
  }
  return grew;
}

std::int64_t GCounter::value(std::string_view name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const auto& entry, std::string_view n) { return entry.first < n; });
  return it != entries_.end() && it->first == name ? it->second : 0;
}

std::size_t GCounter::writers() const {
  return static_cast<std::size_t>(std::count_if(
      entries_.begin(), entries_.end(), [](const auto& entry) { return entry.second > 0; }));
}

// ---------------------------------------------------------------------------------------
// RateEstimate

void RateEstimate::observe(Micros at, std::int64_t window, std::int64_t total, std::int64_t own,
                           Micros min_gap_us) {
  if (!has_sample_ || window != window_ || at < at_) {
    // A new window restarts the counts; keep the last rates as the best guess.
    has_sample_ = true;
    at_ = at;
    window_ = window;
    total_ = total;
    own_total_ = own;
    return;
  }
  const Micros gap = at - at_;
  if (gap < std::max<Micros>(min_gap_us, 1)) {
    return;
  }
  const double seconds = static_cast<double>(gap) / static_cast<double>(kMicrosPerSecond);
  const double global = static_cast<double>(std::max<std::int64_t>(total - total_, 0)) / seconds;
  const double own_rate =
      static_cast<double>(std::max<std::int64_t>(own - own_total_, 0)) / seconds;
  // A rising rate is believed at once (it is what over-admits); a falling one halves the
  // difference per sample (a lull between bursts must not drop the guard).
  global_ = global >= global_ ? global : (global_ + global) / 2;
  own_ = own_rate >= own_ ? own_rate : (own_ + own_rate) / 2;
  measured_ = true;
  at_ = at;
  total_ = total;
  own_total_ = own;
}

// ---------------------------------------------------------------------------------------
// Views

std::int64_t roll(View& view, const LimitParams& params, Micros now) {
  if (params.algorithm == Algorithm::kTokenBucket) {
    if (view.cur.index == kNoWindow) {
      view.cur.index = 0;
    }
    return 0;
  }
  const std::int64_t index = windowIndex(params, now);
  if (view.cur.index == kNoWindow) {
    view.cur.index = index;
    return 0;
  }
  if (index <= view.cur.index) {
    return 0;
  }
  // No decision reads a fixed window that has ended: its unsent hits expire with it (not lost:
  // nobody needed them) and its counts are not kept. A sliding window keeps the one before.
  const bool fixed = params.algorithm == Algorithm::kFixedWindow;
  std::int64_t dropped = view.prev.unsent();
  if (!fixed && index == view.cur.index + 1) {
    view.prev = std::move(view.cur);
  } else {
    dropped += view.cur.unsent();
    view.prev = WindowView{};
    view.prev.index = index - 1;
  }
  view.cur = WindowView{};
  view.cur.index = index;
  view.tight = false;
  if (fixed) {
    // The blind allowance bounds what a window may admit unseen: a new fixed window starts
    // with all of it (what the last one admitted blind counts against that one's limit only).
    view.blind = 0;
  }
  return fixed ? 0 : dropped;
}

BucketState merged(const View& view, const LimitParams& params, Micros now) {
  BucketState state;
  switch (params.algorithm) {
    case Algorithm::kFixedWindow:
      state.a = limiter_detail::windowStart(now, params.window_us);
      state.b = view.cur.index == windowIndex(params, now) ? view.cur.total() : 0;
      break;
    case Algorithm::kSlidingWindowCounter: {
      const std::int64_t index = windowIndex(params, now);
      state.a = index * params.window_us;
      state.b = view.cur.index == index ? view.cur.total() : 0;
      state.c = view.prev.index == index - 1  ? view.prev.total()
                : view.cur.index == index - 1 ? view.cur.total()
                                              : 0;
      break;
    }
    case Algorithm::kTokenBucket:
      state = laterTat(view.redis_tat, view.local_tat, params.limit);
      break;
    default:
      break;
  }
  return state;
}

bool blindView(const View& view, Micros now, const Tuning& tuning) {
  return view.refreshed_at < 0 || now - view.refreshed_at > tuning.stale_after_us;
}

std::int64_t blindAllowance(const LimitParams& params, const Tuning& tuning) {
  const std::int64_t capacity =
      params.algorithm == Algorithm::kTokenBucket && params.burst > 0 ? params.burst : params.limit;
  const double allowance = std::floor(static_cast<double>(std::max<std::int64_t>(capacity, 0)) *
                                      std::max(tuning.blind_share, 0.0));
  return allowance >= 9.0e18 ? std::numeric_limits<std::int64_t>::max()
                             : static_cast<std::int64_t>(allowance);
}

bool farFromLimit(const View& view, const LimitParams& params, Micros now, Micros wait_us,
                  const Tuning& tuning) {
  const std::int64_t capacity =
      params.algorithm == Algorithm::kTokenBucket && params.burst > 0 ? params.burst : params.limit;
  const double spend = tuning.safety * view.rate.globalPerSecond() *
                           static_cast<double>(std::max<Micros>(wait_us, 0)) /
                           static_cast<double>(kMicrosPerSecond) +
                       static_cast<double>(view.cur.writers + 1) *
                           static_cast<double>(blindAllowance(params, tuning));
  const Evaluation look = decide(view, params, now, 0);
  return static_cast<double>(look.outcome.remaining) - spend >= static_cast<double>(capacity) / 2.0;
}

bool mustGoOut(const View& view, const LimitParams& params, const Tuning& tuning) {
  const std::int64_t allowance = blindAllowance(params, tuning);
  return view.tight || view.prev.unsent() > 0 || view.cur.unsent() > allowance ||
         view.blind > allowance / 2;
}

Micros quietUntil(const View& view, const LimitParams& params, Micros now, const Tuning& tuning) {
  if (!tuning.quiet_keys || params.algorithm != Algorithm::kFixedWindow || params.window_us <= 0 ||
      view.cur.index == kNoWindow || mustGoOut(view, params, tuning)) {
    return -1;
  }
  // Without a blind allowance a stale view takes a round trip: such a key is read by syncs.
  if (blindAllowance(params, tuning) <= 0) {
    return -1;
  }
  const Micros end = (view.cur.index + 1) * params.window_us;
  return end > now && farFromLimit(view, params, now, end - now, tuning) ? end : -1;
}

Micros deferUntil(const View& view, const LimitParams& params, Micros synced_at, Micros now,
                  const Tuning& tuning) {
  if (synced_at < 0 || view.refreshed_at < 0 || mustGoOut(view, params, tuning)) {
    return now;
  }
  const Micros near_wait =
      std::min<Micros>(tuning.stale_after_us / 2, std::max<Micros>(params.window_us / 4, 0));
  // A far key waits until its view is about to go stale: the sync that then reads it comes
  // within one more interval, and meanwhile its decisions use the blind allowance, which
  // covers what a key that may wait admits in an interval.
  const Micros far_wait = std::max(near_wait, tuning.stale_after_us);
  Micros until =
      synced_at + (farFromLimit(view, params, now, far_wait, tuning) ? far_wait : near_wait);
  if (params.algorithm == Algorithm::kSlidingWindowCounter && params.window_us > 0 &&
      view.cur.index != kNoWindow) {
    // The hits of a sliding window go out once it has ended (the next one reads them; a
    // fixed window's expire with it, and nothing unsent from the previous one is left):
    // with the next decision (the engine wakes a waiting key then), or within the next
    // window's first near_wait, at the offset the last send had in its own window (keys
    // that all waited for one window's end do not all go out in one sync).
    const Micros into = synced_at - floorDiv(synced_at, params.window_us) * params.window_us;
    const auto spread =
        static_cast<Micros>(static_cast<double>(near_wait) * static_cast<double>(into) /
                            static_cast<double>(params.window_us));
    until = std::min(until, (view.cur.index + 1) * params.window_us + spread);
  }
  return until;
}

std::int64_t previousToSend(const View& view) {
  return view.prev.index == view.cur.index - 1 && view.prev.unsent() > 0 ? view.prev.own : 0;
}

bool mayWithholdCurrent(const View& view, const LimitParams& params, Micros synced_at,
                        const Tuning& tuning) {
  if (params.algorithm == Algorithm::kTokenBucket || params.window_us <= 0 || view.tight) {
    return false;
  }
  const bool other_reason = synced_at < 0 || previousToSend(view) > 0;
  return other_reason && view.cur.unsent() <= blindAllowance(params, tuning);
}

bool mayDefer(const View& view, const LimitParams& params, Micros synced_at, Micros now,
              const Tuning& tuning) {
  return deferUntil(view, params, synced_at, now, tuning) > now;
}

Route route(const View& view, const LimitParams& params, Micros now, std::int64_t cost,
            const Tuning& tuning, bool reachable) {
  if (!reachable) {
    return Route::kLocal;
  }
  if (view.tight) {
    return Route::kTight;
  }
  if (!blindView(view, now, tuning)) {
    return Route::kLocal;
  }
  if (view.blind + std::max<std::int64_t>(cost, 0) <= blindAllowance(params, tuning)) {
    return Route::kLocal;
  }
  return view.refreshed_at < 0 ? Route::kUnknown : Route::kStale;
}

Evaluation decide(const View& view, const LimitParams& params, Micros now, std::int64_t cost) {
  return sluice::evaluate(params, merged(view, params, now), now, cost);
}

bool tooClose(const View& view, const Evaluation& evaluation, Micros now, const Tuning& tuning) {
  if (!evaluation.outcome.allowed) {
    return false;
  }
  const Micros age = view.refreshed_at < 0 ? 0 : std::max<Micros>(now - view.refreshed_at, 0);
  const double unseen = tuning.safety * view.rate.globalPerSecond() * static_cast<double>(age) /
                        static_cast<double>(kMicrosPerSecond);
  return static_cast<double>(evaluation.outcome.remaining) <
         static_cast<double>(view.tight_below) + unseen;
}

std::int64_t charge(View& view, const LimitParams& params, const BucketState& state,
                    const Evaluation& evaluation, std::int64_t cost) {
  if (params.algorithm == Algorithm::kTokenBucket) {
    if (!evaluation.outcome.allowed || cost <= 0) {
      return 0;
    }
    view.local_tat = normalTat(evaluation.next, params.limit);
    view.local_tat.c = 0;
    view.cur.own += cost;
    return cost;
  }
  const std::int64_t added = evaluation.next.b - state.b;
  if (added > 0) {
    view.cur.own += added;
  }
  return std::max<std::int64_t>(added, 0);
}

void merge(View& view, const LimitParams& params, const KeyReading& reading, Micros now,
           Micros latency_us, const Tuning& tuning) {
  // `own` stays this sidecar's own truth. Redis can hold more only for a round trip whose
  // reply was lost after Redis applied it; taking that value would count twice the charges of
  // round trips whose replies are still on their way (they arrive in any order on the I/O
  // threads' connections), so it is left to Redis's maximum.
  auto absorb = [](WindowView& window, std::int64_t others, std::int64_t own, std::size_t writers) {
    window.others = std::max(window.others, others);
    window.writers = std::max(window.writers, writers);
    window.own_acked = std::max(window.own_acked, std::min(own, window.own));
  };
  if (params.algorithm == Algorithm::kTokenBucket) {
    roll(view, params, now);
    absorb(view.cur, reading.others, reading.own, reading.writers);
    BucketState tat = normalTat(reading.tat, params.limit);
    tat.c = 0;
    view.redis_tat = laterTat(view.redis_tat, tat, params.limit);
    // Own hits Redis has not seen yet are applied again, now (later is conservative).
    const std::int64_t unseen = view.cur.own - reading.own;
    view.local_tat =
        laterTat(view.local_tat, advanceTat(view.redis_tat, params, now, unseen), params.limit);
  } else {
    if (reading.window != kNoWindow && reading.window > view.cur.index) {
      roll(view, params, reading.window * params.window_us);
    }
    if (reading.window == view.cur.index) {
      absorb(view.cur, reading.others, reading.own, reading.writers);
      if (view.prev.index == kNoWindow) {
        view.prev.index = view.cur.index - 1;
      }
      if (view.prev.index == reading.window - 1) {
        absorb(view.prev, reading.prev_others, reading.prev_own, 0);
      }
    } else if (reading.window == view.cur.index - 1 && view.prev.index == reading.window) {
      absorb(view.prev, reading.others, reading.own, reading.writers);
    }
  }
  view.refreshed_at = std::max(view.refreshed_at, now);
  view.blind = 0;
  view.latency_us = latency_us;
  view.rate.observe(now, view.cur.index, view.cur.total(), view.cur.own,
                    tuning.sync_interval_us / 2);
  view.tight_below = tightenAt(view.rate.globalPerSecond(), view.rate.ownPerSecond(),
                               view.cur.writers + 1, latency_us, tuning);
  // The key stays tight while its allowance is below the margin: one look at cost 0.
  const Evaluation look = decide(view, params, now, 0);
  const bool stays =
      tuning.tight_until_window_ends && view.tight && params.algorithm != Algorithm::kTokenBucket;
  view.tight = stays || look.outcome.remaining < view.tight_below;
}

std::int64_t tightenAt(double global_per_second, double own_per_second, std::size_t writers,
                       Micros latency_us, const Tuning& tuning) {
  const double rate = std::max(
      global_per_second, own_per_second * static_cast<double>(std::max<std::size_t>(writers, 1)));
  const double horizon_us =
      tuning.safety * (2.0 * static_cast<double>(tuning.sync_interval_us) +
                       2.0 * static_cast<double>(std::max<Micros>(latency_us, 0)) +
                       static_cast<double>(std::max<Micros>(tuning.region_delay_us, 0)));
  const double margin = std::ceil(rate * horizon_us / static_cast<double>(kMicrosPerSecond));
  if (!(margin > 0)) {
    return 0;
  }
  return margin >= 9.0e18 ? std::numeric_limits<std::int64_t>::max()
                          : static_cast<std::int64_t>(margin);
}

std::int64_t regionCap(const LimitParams& params, std::size_t regions) {
  if (regions < 2 || params.limit <= 0 ||
      (params.algorithm != Algorithm::kFixedWindow &&
       params.algorithm != Algorithm::kSlidingWindowCounter)) {
    return 0;
  }
  const std::int64_t divisor = params.algorithm == Algorithm::kFixedWindow ? 200 : 400;
  const std::int64_t others = static_cast<std::int64_t>(regions - 1);
  return std::max<std::int64_t>(params.limit / divisor / others, 1);
}

std::int64_t regionHoldLimit(const LimitParams& params, std::size_t regions, std::int64_t cap,
                             std::int64_t confirmed, std::int64_t elsewhere, std::int64_t before) {
  if (cap <= 0 || regions < 2) {
    return cap;
  }
  const std::int64_t left = params.limit - before - confirmed - elsewhere;
  return std::max(cap, left > 0 ? left / static_cast<std::int64_t>(regions) : 0);
}

bool withinRegionCap(std::int64_t region_count, std::int64_t confirmed, std::int64_t added,
                     std::int64_t hold) {
  if (hold <= 0 || added <= 0) {
    return true;
  }
  return region_count + added - std::min(confirmed, region_count) <= hold;
}

void RegionConfirmations::note(std::int64_t window, std::int64_t value, Micros now,
                               Micros settle_us) {
  if (window < window_) {
    return;
  }
  if (window > window_) {
    window_ = window;
    settled_ = 0;
    count_ = 0;
  }
  // Settle what has aged, then keep the new value (a full list: the newest entry takes it,
  // later, which only settles it later).
  settled_ = settled(window, now, settle_us);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    if (pending_[i].first > settled_ && now - pending_[i].second < settle_us) {
      pending_[kept++] = pending_[i];
    }
  }
  count_ = kept;
  if (value <= settled_ || (count_ > 0 && value <= pending_[count_ - 1].first)) {
    return;
  }
  if (count_ == kPending) {
    pending_[count_ - 1] = {value, now};
  } else {
    pending_[count_++] = {value, now};
  }
}

std::int64_t RegionConfirmations::settled(std::int64_t window, Micros now, Micros settle_us) const {
  if (window != window_) {
    return 0;
  }
  std::int64_t best = settled_;
  for (std::size_t i = 0; i < count_; ++i) {
    if (now - pending_[i].second >= settle_us) {
      best = std::max(best, pending_[i].first);
    }
  }
  return best;
}

bool beyondRegionShare(std::int64_t unconfirmed, std::int64_t cost, std::int64_t remaining_after,
                       std::size_t regions) {
  if (regions < 2) {
    return false;
  }
  const Wide spent =
      static_cast<Wide>(std::max<std::int64_t>(unconfirmed, 0)) + std::max<std::int64_t>(cost, 0);
  return spent * static_cast<Wide>(regions - 1) > static_cast<Wide>(remaining_after);
}

BucketState advanceTat(const BucketState& tat, const LimitParams& params, Micros now,
                       std::int64_t hits) {
  BucketState base = normalTat(tat, params.limit);
  base.c = 0;
  if (base.a < now) {
    base.a = now;
    base.b = 0;
  }
  if (hits <= 0 || params.limit <= 0) {
    return base;
  }
  const std::int64_t q = params.window_us / params.limit;
  const std::int64_t r = params.window_us % params.limit;
  const Wide nr = static_cast<Wide>(hits) * r;
  base.a += hits * q + static_cast<std::int64_t>(nr / params.limit);
  base.b += static_cast<std::int64_t>(nr % params.limit);
  return normalTat(base, params.limit);
}

BucketState laterTat(const BucketState& a, const BucketState& b, std::int64_t limit) {
  BucketState x = normalTat(a, limit);
  BucketState y = normalTat(b, limit);
  return tatLess(x, y) ? y : x;
}

}  // namespace sluice::eventual
