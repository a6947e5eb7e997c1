#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/result.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/decision/lease_tracker.hpp"
#include "sluice/store/lease.hpp"
#include "sluice/store/store.hpp"

/// Releasing and renewing the leases of `concurrency` limits (POST /release, POST /renew;
/// docs/algorithms.md, "concurrency") behind the decision layer: the lease id names the
/// domain, client and descriptors, the current rules say which buckets they are, one store
/// call changes them all. Transports only parse the id and encode the answer.
namespace sluice {

/// What a release or renew did.
struct LeaseAnswer {
  /// One concurrency limit that held the lease.
  struct Limit {
    std::string name;
    std::int64_t max_in_flight = 0;
    std::int64_t available = 0;  ///< free leases in its bucket afterwards
  };
  LeaseOp op = LeaseOp::kRelease;
  /// Renew: the time until the soonest of the renewed holds expires (renew again before).
  Micros expires_in_us = 0;
  std::vector<Limit> limits;  ///< the limits that held it (and now released or renewed it)
};

class LeaseService {
 public:
  using Callback = std::function<void(Result<LeaseAnswer>)>;
  virtual ~LeaseService() = default;

  /// Releases or renews lease `lease_id` in every bucket that holds it. Called on an I/O
  /// thread; `done` runs on the same thread (possibly before change() returns). Errors:
  /// kInvalidArgument (not a lease id), kNotFound (no bucket holds it live: released,
  /// expired, never granted, or its rule is gone; nothing was changed), kUnavailable (rules
  /// not loaded), and the store's.
  virtual void change(LeaseOp op, const std::string& lease_id, Callback done) = 0;
};

struct LeaseServiceParts {
  RulesProvider rules;             ///< required
  StorePtr store;                  ///< required: this thread's store
  const Clock* clock = nullptr;    ///< required
  LeaseTracker* leases = nullptr;  ///< optional (metrics)
};

std::unique_ptr<LeaseService> makeLeaseService(LeaseServiceParts parts);

}  // namespace sluice
