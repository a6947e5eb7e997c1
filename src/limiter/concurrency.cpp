#include <algorithm>
#include <cstddef>
#include <vector>

#include "limiter/algorithms.hpp"

namespace sluice::limiter_detail {

// concurrency (contract: algorithms.hpp; docs/algorithms.md). N = limit, T = window_us (the
// lease time). State: log = the leases, (at = expiry, cost = lease number), sorted by expiry.
//   A lease counts while now < at; the others are dropped whenever the state is read.
//   used = the live leases; take = 1 when c > 0 (one lease per admitted request, whatever
//   its cost), 0 for a check.
//   allowed  iff used + take <= N: with take, (now + T, lease) is added in expiry order;
//                                  remaining = N - used - take
//   denied otherwise: remaining = max(0, N - used), nothing recorded (count_rejected does
//     not apply); retry = the soonest expiry - now: the latest moment a lease comes back
//     by itself (a release may come earlier).
//   reset_after = ttl = the latest expiry - now (0 without leases).
// A refund releases the lease it names (nothing when the bucket does not hold it, or when it
// names none: the hits of a refund that shares the descriptor with a token limit are not
// leases). A charge that lands whatever the limit says (a report, envoy's counting) takes no
// lease: only an admitted request holds one.
namespace {

/// The live leases of `state` at `now`, soonest expiry first.
std::vector<LogEntry> liveLeases(const BucketState& state, Micros now) {
  std::vector<LogEntry> leases;
  leases.reserve(state.log.size() + 1);
  for (const LogEntry& lease : state.log) {
    if (lease.at > now) {
      leases.push_back(lease);
    }
  }
  std::stable_sort(leases.begin(), leases.end(),
                   [](const LogEntry& x, const LogEntry& y) { return x.at < y.at; });
  return leases;
}

void addLease(std::vector<LogEntry>& leases, Micros expiry, LeaseNumber lease) {
  auto it = std::upper_bound(leases.begin(), leases.end(), expiry,
                             [](Micros t, const LogEntry& entry) { return t < entry.at; });
  leases.insert(it, LogEntry{expiry, lease});
}

/// The answer on `leases` (already live at `now`) for a request that takes `take` leases.
Evaluation decide(const LimitParams& params, std::vector<LogEntry>&& leases, Micros now,
                  std::int64_t take, LeaseNumber lease) {
  const std::int64_t limit = params.limit;
  const auto used = static_cast<std::int64_t>(leases.size());
  Evaluation e;
  if (used + take <= limit) {
    if (take > 0) {
      addLease(leases, now + params.window_us, lease);
    }
    e.outcome.allowed = true;
    e.outcome.remaining = limit - used - take;
  } else {
    e.outcome.allowed = false;
    e.outcome.remaining = std::max<std::int64_t>(0, limit - used);
    e.outcome.retry_after_us = std::max<Micros>(1, leases.front().at - now);
  }
  e.ttl_us = leases.empty() ? 0 : leases.back().at - now;
  e.outcome.reset_after_us = e.ttl_us;
  e.next.log = std::move(leases);
  return e;
}

std::vector<LogEntry>::iterator findLease(std::vector<LogEntry>& leases, LeaseNumber lease) {
  return std::find_if(leases.begin(), leases.end(),
                      [lease](const LogEntry& entry) { return entry.cost == lease; });
}

}  // namespace

Evaluation evaluateConcurrency(const LimitParams& params, const BucketState& state, Micros now,
                               std::int64_t cost, LeaseNumber lease) {
  return decide(params, liveLeases(state, now), now, cost > 0 ? 1 : 0, lease);
}

Evaluation refundConcurrency(const LimitParams& params, const BucketState& state, Micros now,
                             std::int64_t amount, LeaseNumber lease) {
  std::vector<LogEntry> leases = liveLeases(state, now);
  if (auto it = findLease(leases, lease); lease > 0 && amount > 0 && it != leases.end()) {
    leases.erase(it);
  }
  return decide(params, std::move(leases), now, 0, 0);
}

Evaluation checkConcurrency(const LimitParams& params, const BucketState& state, Micros now) {
  return decide(params, liveLeases(state, now), now, 0, 0);
}

}  // namespace sluice::limiter_detail

namespace sluice {

LeaseChange releaseLease(const LimitParams& params, const BucketState& state, Micros now,
                         LeaseNumber lease) {
  LeaseChange change;
  for (const LogEntry& entry : state.log) {
    if (lease > 0 && entry.cost == lease) {
      change.found = entry.at > now ? LeaseFound::kHeld : LeaseFound::kExpired;
      change.expires_at = entry.at;
      break;
    }
  }
  if (change.found == LeaseFound::kHeld) {
    change.evaluation = limiter_detail::refundConcurrency(params, state, now, 1, lease);
  }
  return change;
}

LeaseChange renewLease(const LimitParams& params, const BucketState& state, Micros now,
                       LeaseNumber lease) {
  LeaseChange change;
  std::vector<LogEntry> leases = limiter_detail::liveLeases(state, now);
  for (const LogEntry& entry : state.log) {
    if (lease > 0 && entry.cost == lease && entry.at <= now) {
      change.found = LeaseFound::kExpired;
      change.expires_at = entry.at;
    }
  }
  auto it = limiter_detail::findLease(leases, lease);
  if (lease <= 0 || it == leases.end()) {
    return change;
  }
  change.found = LeaseFound::kHeld;
  change.expires_at = std::max(it->at, now + params.window_us);
  leases.erase(it);
  limiter_detail::addLease(leases, change.expires_at, lease);
  change.evaluation = limiter_detail::decide(params, std::move(leases), now, 0, 0);
  return change;
}

}  // namespace sluice
