#pragma once

#include <cstddef>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/limiter/limiter.hpp"

/// The operators' view of `concurrency` leases (docs/operations.md): one tracker per
/// process, shared by every I/O thread's decision and lease services. Thread-safe.
///
/// It follows the leases this process granted: `leases_outstanding{domain,rule}` counts
/// those neither released through this process nor expired; a lease that reaches its
/// expiry unreleased leaves it and counts in `leases_expired_total`. With one sidecar (and
/// always with the memory store) that is every lease; sidecars sharing Redis each account
/// for their own grants, so a lease released through another sidecar stays outstanding on
/// the one that granted it until its expiry, and then counts there as expired.
namespace sluice {

class LeaseTracker {
 public:
  /// At most this many leases are followed; more are counted as granted but not followed
  /// (logged once, `leases_untracked_total`).
  static constexpr std::size_t kMaxTracked = 1'000'000;

  explicit LeaseTracker(Metrics& metrics);

  /// A decision took `lease` in a limit of rule (domain, rule) whose bucket's store key is
  /// `key` (StoreLimit::key), until `expires_at`.
  void granted(std::string_view domain, std::string_view rule, LeaseNumber lease,
               std::string_view key, Micros expires_at, Micros now);
  /// `lease` was released: `by` "release" (the store held it), or "refund" (a refund named
  /// it; counted when this process still followed it).
  void released(std::string_view domain, std::string_view rule, LeaseNumber lease,
                std::string_view by, Micros now);
  /// `lease` now expires at `expires_at`.
  void renewed(std::string_view domain, std::string_view rule, LeaseNumber lease, Micros expires_at,
               Micros now);
  /// The admin reset deleted the buckets whose store keys start with one of `key_prefixes`
  /// (limit_reset.hpp), and the leases they held with them: those leave `outstanding` and
  /// count in `leases_released_total{by="reset"}`.
  void reset(const std::vector<std::string>& key_prefixes, Micros now);
  /// Moves the leases expired at `now` out of `outstanding` into `expired_total`. Every
  /// call above sweeps too, at most every 100 ms; the app also calls it every second.
  void sweep(Micros now);

 private:
  struct Live {
    Micros expires_at = 0;
    std::string key;  ///< the bucket's store key (for the admin reset)
  };

  struct Series {
    Gauge* outstanding = nullptr;
    Counter* granted = nullptr;
    Counter* released = nullptr;
    Counter* refunded = nullptr;
    Counter* reset = nullptr;
    Counter* renewed = nullptr;
    Counter* expired = nullptr;
    std::unordered_map<LeaseNumber, Live> live;
  };

  Series& seriesOf(std::string_view domain, std::string_view rule);
  void sweepLocked(Micros now);
  void maybeSweep(Micros now);

  Metrics& metrics_;
  Counter& untracked_;
  std::mutex mutex_;
  std::map<std::string, Series, std::less<>> series_;
  std::size_t tracked_ = 0;
  Micros next_sweep_ = 0;
  bool warned_ = false;
};

}  // namespace sluice
