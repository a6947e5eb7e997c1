#include <algorithm>
#include <cstddef>

#include "limiter/algorithms.hpp"

namespace sluice::limiter_detail {

// sliding_window_log (contract: algorithms.hpp). State: log = (at, cost) oldest first; a = time of
// the last admitted request and b = 1 once there is one (for min_interval).
//   An entry counts while now < at + W, i.e. at is in (now - W, now]; older ones are dropped
//   (an entry from the future, after a wall-clock step back, keeps counting, and the log
//   stays sorted by time: a new entry goes in order, merging with an equal `at`).
//   used = sum of the costs logged; gap = (b == 1 && c > 0) ? a + min_interval - now : 0
//   never    iff c > L
//   allowed  iff used + c <= L and gap <= 0:  log (now, c) when c > 0, a = now, b = 1;
//                                             remaining = L - used - c
//   denied otherwise: remaining = max(0, L - used); with count_rejected (now, c) is logged
//     (a, b unchanged: min_interval counts from admitted requests only);
//     retry = max(gap, wait) on the state after this attempt, where wait = 0 if
//     used' + c <= L, else (at + W - now) of the oldest entry at which the running sum of
//     costs, oldest first, reaches used' + c - L (the moment enough cost has aged out).
//   reset_after = ttl = max(newest.at + W, a + min_interval (if b == 1)) - now, at least 0.
// Log hygiene, invisible in decisions: entries with the same `at` merge; while the entries
// after the oldest already sum to more than L the oldest is dropped (every later decision
// denies while those entries live, whatever the oldest adds), which bounds the log to about
// L + 1 entries even when rejected attempts are logged.
namespace {

std::int64_t loggedCost(const std::vector<LogEntry>& log) {
  std::int64_t sum = 0;
  for (const LogEntry& entry : log) {
    sum += entry.cost;
  }
  return sum;
}

void append(std::vector<LogEntry>& log, Micros at, std::int64_t cost, std::int64_t limit) {
  if (cost <= 0) {
    return;
  }
  // Kept sorted by time; only a wall-clock step back makes `at` older than the newest entry.
  auto it = std::lower_bound(log.begin(), log.end(), at,
                             [](const LogEntry& entry, Micros t) { return entry.at < t; });
  if (it != log.end() && it->at == at) {
    it->cost += cost;
  } else {
    log.insert(it, LogEntry{at, cost});
  }
  std::int64_t total = loggedCost(log);
  std::size_t drop = 0;
  while (drop + 1 < log.size() && total - log[drop].cost > limit) {
    total -= log[drop].cost;
    ++drop;
  }
  log.erase(log.begin(), log.begin() + static_cast<std::ptrdiff_t>(drop));
}

/// Smallest wait after which `need` more cost has aged out of `log` (need > 0).
Micros ageOutWait(const std::vector<LogEntry>& log, std::int64_t need, Micros window, Micros now) {
  std::int64_t freed = 0;
  for (const LogEntry& entry : log) {
    freed += entry.cost;
    if (freed >= need) {
      return entry.at + window - now;
    }
  }
  return log.empty() ? 0 : log.back().at + window - now;
}

}  // namespace

Evaluation evaluateSlidingWindowLog(const LimitParams& params, const BucketState& state, Micros now,
                                    std::int64_t cost) {
  const std::int64_t limit = params.limit;
  const Micros window = params.window_us;

  const SlidingWindowLogView old(state);
  Evaluation e;
  const SlidingWindowLogView next(e.next);
  next.lastAdmitted() = old.lastAdmitted();
  next.hasLast() = old.hasLast();
  std::vector<LogEntry>& log = e.next.log;
  log.reserve(state.log.size() + 1);
  for (const LogEntry& entry : state.log) {
    if (now < entry.at + window) {
      log.push_back(entry);
    }
  }
  const std::int64_t used = loggedCost(log);
  const bool has_last = old.hasLast() == 1;
  const Micros gap = (has_last && cost > 0 && params.min_interval_us > 0)
                         ? old.lastAdmitted() + params.min_interval_us - now
                         : 0;
  Outcome& o = e.outcome;
  if (cost > limit) {
    o.allowed = false;
    o.never = true;
    o.retry_after_us = kRetryNever;
    o.remaining = std::max<std::int64_t>(0, limit - used);
  } else if (used + cost <= limit && gap <= 0) {
    if (cost > 0) {
      append(log, now, cost, limit);
      next.lastAdmitted() = now;
      next.hasLast() = 1;
    }
    o.remaining = limit - used - cost;
  } else {
    o.allowed = false;
    o.remaining = std::max<std::int64_t>(0, limit - used);
    if (params.count_rejected) {
      append(log, now, cost, limit);
    }
    const std::int64_t need = loggedCost(log) + cost - limit;
    const Micros wait = need > 0 ? ageOutWait(log, need, window, now) : 0;
    o.retry_after_us = std::max(gap, wait);
  }

  Micros fresh_at = now;
  if (!log.empty()) {
    fresh_at = std::max(fresh_at, log.back().at + window);
  }
  if (next.hasLast() == 1 && params.min_interval_us > 0) {
    fresh_at = std::max(fresh_at, next.lastAdmitted() + params.min_interval_us);
  }
  o.reset_after_us = fresh_at - now;
  e.ttl_us = o.reset_after_us;
  return e;
}

namespace {

/// The state with only the entries still counting at `now`.
BucketState liveEntries(const LimitParams& params, const BucketState& state, Micros now) {
  BucketState next;
  const SlidingWindowLogView old(state);
  const SlidingWindowLogView view(next);
  view.lastAdmitted() = old.lastAdmitted();
  view.hasLast() = old.hasLast();
  next.log.reserve(state.log.size() + 1);
  for (const LogEntry& entry : state.log) {
    if (now < entry.at + params.window_us) {
      next.log.push_back(entry);
    }
  }
  return next;
}

}  // namespace

BucketState refundSlidingWindowLog(const LimitParams& params, const BucketState& state, Micros now,
                                   std::int64_t amount) {
  BucketState next = liveEntries(params, state, now);
  std::vector<LogEntry>& log = next.log;
  while (amount > 0 && !log.empty()) {
    LogEntry& newest = log.back();
    const std::int64_t taken = std::min(amount, newest.cost);
    newest.cost -= taken;
    amount -= taken;
    if (newest.cost == 0) {
      log.pop_back();
    }
  }
  return next;
}

BucketState chargeSlidingWindowLog(const LimitParams& params, const BucketState& state, Micros now,
                                   std::int64_t cost) {
  BucketState next = liveEntries(params, state, now);
  append(next.log, now, cost, params.limit);
  return next;
}

}  // namespace sluice::limiter_detail
