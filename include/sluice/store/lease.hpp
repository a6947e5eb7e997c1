#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sluice/limiter/limiter.hpp"

/// The lease operations of `concurrency` limits that are not decisions: release and renew
/// (docs/algorithms.md, "concurrency"). A decision takes a lease through Store::evaluate
/// (StoreRequest::lease); these give it back or extend it.
namespace sluice {

enum class LeaseOp : std::uint8_t {
  kRelease,  ///< the lease is given back: its slot is free at once
  kRenew,    ///< the lease is extended to now + its limit's lease time
};

/// One bucket that holds (or held) the lease.
struct LeaseHold {
  std::string key;     ///< the bucket's store key (as StoreLimit::key)
  LimitParams params;  ///< its concurrency limit (the lease time is params.window_us)
};

/// One lease operation on every bucket of one lease, applied atomically.
struct LeaseRequest {
  LeaseOp op = LeaseOp::kRelease;
  LeaseNumber lease = 0;
  std::vector<LeaseHold> holds;
};

/// What happened in one bucket.
struct LeaseHoldResult {
  LeaseFound found = LeaseFound::kNotHeld;
  /// Renewed: the new expiry; expired: when it expired (0 when the store does not say);
  /// released: when it would have expired. Microseconds since the epoch.
  Micros expires_at = 0;
  /// The bucket afterwards (a check's answer: remaining = free leases).
  Outcome outcome;
};

struct LeaseResponse {
  std::vector<LeaseHoldResult> holds;  ///< one per LeaseRequest::holds, same order
  Micros at_us = 0;                    ///< when it was applied (0 when the store does not say)
};

}  // namespace sluice
