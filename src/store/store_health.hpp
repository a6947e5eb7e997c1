#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/store.hpp"

/// Private to the stores: the process-wide view of one kind of store whose instances live
/// on several I/O threads (one Redis connection per thread).
namespace sluice::store {

/// The stores of one kind ("redis", "redis_cluster") that share one Metrics registry form a
/// group. Each store reports its own health; the group's health is the worst of theirs
/// (failing, then connecting, then healthy), and each change of the group's health is
/// logged once (one line, with the reason and the time spent in the previous state) and
/// counted, however many I/O threads saw it. Faults (an error reply, a lost connection, a
/// missed deadline) are counted by kind on every occurrence and logged once per episode: the
/// first occurrence of a kind is logged, and the episode ends, logged with its duration and
/// the number of calls it failed, at the next successful call. Thread-safe.
///
/// Metrics: store_health{store,state} (1 for the current state, 0 otherwise),
/// store_health_transitions_total{store,to}, redis_faults_total{store,kind}.
class StoreHealthGroup {
 public:
  /// The group of `kind` in `metrics` (created on first use, kept while referenced); its
  /// durations (time in a state, a fault episode's length) are read from `clock` (the
  /// creator's; monotonicMicros()), which must outlive the group.
  static std::shared_ptr<StoreHealthGroup> of(Metrics& metrics, std::string_view kind,
                                              const Clock& clock = systemClock());

  StoreHealthGroup(Metrics& metrics, std::string kind, const Clock& clock = systemClock());

  /// A store's membership: reports its health; leaves the group when destroyed.
  class Member {
   public:
    explicit Member(std::shared_ptr<StoreHealthGroup> group);
    ~Member();
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;

    /// Records this member's health (any thread); `reason` says why (logged on a change
    /// of the group's health).
    void report(StoreHealth health, const std::string& reason);
    StoreHealthGroup& group() { return *group_; }

   private:
    std::shared_ptr<StoreHealthGroup> group_;
    std::size_t id_;
  };

  /// One failed call; `kind` from redis::faultKind ("oom", "timeout", "connection", ...).
  void fault(std::string_view fault_kind, const std::string& message);
  /// One successful call: ends the fault episodes in progress. Cheap when there is none.
  void success() {
    if (faults_active_.load(std::memory_order_acquire)) {
      endFaults();
    }
  }

  StoreHealth health() const;

 private:
  struct ActiveFault {
    Micros since = 0;  ///< clock_.monotonicMicros() of its first fault
    std::uint64_t calls = 0;
  };

  std::size_t join();
  void leave(std::size_t id);
  void update(std::size_t id, StoreHealth health, const std::string& reason);
  /// Recomputes the group's health; logs and counts a change. Called with mutex_ held.
  void recompute(const std::string& reason);
  void endFaults();
  Counter& faultCounter(std::string_view fault_kind);

  /// Seconds since `since` (a monotonicMicros() reading).
  double secondsSince(Micros since) const;

  Metrics& metrics_;
  std::string kind_;
  const Clock& clock_;
  mutable std::mutex mutex_;
  std::map<std::size_t, StoreHealth> members_;
  std::size_t next_id_ = 0;
  StoreHealth health_ = StoreHealth::kConnecting;
  Micros since_ = clock_.monotonicMicros();
  std::map<std::string, ActiveFault, std::less<>> active_faults_;
  std::atomic<bool> faults_active_{false};
};

}  // namespace sluice::store
