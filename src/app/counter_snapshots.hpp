#pragma once

#include <memory>

#include "sluice/common/clock.hpp"
#include "sluice/common/event_loop_thread.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/memory_snapshot.hpp"
#include "sluice/store/store.hpp"

namespace sluice::app {

/// --memory-snapshot: the memory store's counters restored at start-up, snapshotted every
/// --snapshot-interval on a thread of their own, and once more when the server stops
/// (docs/operations.md, "Counters across restarts").
class CounterSnapshots {
 public:
  /// Restores the snapshot into `memory` (judged against `current`, the rules the server
  /// starts with) and starts the periodic snapshots. Errors (a snapshot that cannot be read
  /// with --memory-snapshot-on-error fail) name the file and the offset.
  static Result<std::unique_ptr<CounterSnapshots>> start(const MemorySnapshotOptions& options,
                                                         Store& memory,
                                                         std::function<RuleSetPtr()> rules,
                                                         const Clock& clock, Metrics& metrics);
  ~CounterSnapshots();

  /// Stops the periodic snapshots and writes the last one (after the I/O threads stopped,
  /// so it holds every decision). Idempotent.
  void finish();

 private:
  CounterSnapshots() = default;

  EventLoopThread thread_;
  std::unique_ptr<MemorySnapshotter> snapshotter_;
  bool finished_ = false;
};

}  // namespace sluice::app
