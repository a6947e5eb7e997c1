#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/executor.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/memory_store.hpp"

/// The memory store's counters on disk, so that a restart keeps them (--memory-snapshot;
/// docs/operations.md, "Counters across restarts"). A snapshot is written periodically and
/// once more at shutdown, atomically (a temporary file written and fsynced, renamed over
/// the snapshot, the directory fsynced), and read back at start-up, dropping the buckets that
/// expired meanwhile and those whose limit no longer exists with the same parameters.
namespace sluice {

/// What start-up does with a snapshot it cannot read (corrupt, truncated, foreign):
/// --memory-snapshot-on-error.
enum class SnapshotOnError { kFail, kStartEmpty };

struct MemorySnapshotOptions {
  std::string path;                            ///< the snapshot file; "" : snapshots off
  std::chrono::milliseconds interval{10'000};  ///< between periodic snapshots
  SnapshotOnError on_error = SnapshotOnError::kFail;
};

/// What a start-up restore did.
struct SnapshotRestore {
  bool found = false;          ///< there was a snapshot file
  bool started_empty = false;  ///< it could not be read and on_error said start-empty
  Micros written_at = 0;       ///< when it was written
  std::size_t restored = 0;    ///< buckets back in the store
  std::size_t expired = 0;     ///< dropped: expired since the snapshot
  std::size_t rule_gone = 0;   ///< dropped: their limit is gone or has other parameters
  std::size_t capacity = 0;    ///< dropped: the store was full (--memory-max-keys)
  std::size_t invalid = 0;     ///< dropped: a state its algorithm never writes
};

/// Reads the snapshot at options.path into `counters`, at start-up before any decision,
/// judging each bucket's limit against `rules` (the rules the server starts with) and its
/// expiry against `now`. No file: nothing to restore (a first start). A file that cannot be
/// read is an error naming the file and the byte offset ("/var/lib/sluice/counters.snap:
/// offset 4124: truncated: ..."), or, with SnapshotOnError::kStartEmpty, a warning and an
/// empty store (the file renamed to PATH.unreadable). Without `rules` (rules over xDS that
/// have not arrived yet) every unexpired bucket is restored. Metrics:
/// memory_snapshot_restored_buckets_total{outcome}.
Result<SnapshotRestore> restoreMemorySnapshot(MemoryCounters& counters,
                                              const MemorySnapshotOptions& options,
                                              const RuleSetPtr& rules, Micros now,
                                              Metrics& metrics);

/// Writes the snapshots of one memory store. The periodic ones run on `executor` (its own
/// thread in production): each copies one shard at a time under that shard's lock (the only
/// moment decisions on its keys wait), then identifies and writes what it copied with no
/// lock held. Metrics: memory_snapshots_total{result="written"|"failed"},
/// memory_snapshot_duration_seconds, memory_snapshot_buckets (the last one's).
class MemorySnapshotter {
 public:
  virtual ~MemorySnapshotter() = default;
  /// Schedules the periodic snapshots, the first one interval from now. Call on the
  /// executor's thread or before it runs.
  virtual void start() = 0;
  /// Stops scheduling; a snapshot in progress finishes. Thread-safe.
  virtual void stop() = 0;
  /// Writes a snapshot now on the calling thread (the shutdown's last one, once decisions
  /// have stopped), after the one in progress if any. Errors name the file.
  virtual Status writeNow() = 0;
};

/// `rules` gives the rules in force when a snapshot is taken (each bucket is written with
/// its limit's identity under them). `counters`, `clock`, `executor` and `metrics` must
/// outlive the snapshotter.
std::unique_ptr<MemorySnapshotter> makeMemorySnapshotter(MemoryCounters& counters,
                                                         MemorySnapshotOptions options,
                                                         std::function<RuleSetPtr()> rules,
                                                         const Clock& clock, Executor& executor,
                                                         Metrics& metrics);

}  // namespace sluice
