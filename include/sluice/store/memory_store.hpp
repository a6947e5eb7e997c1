#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/store.hpp"

namespace sluice {

struct MemoryStoreOptions {
  /// Bound on stored buckets. A new key over the bound first drops expired entries (found
  /// by a bounded scan of its shard), else its shard's least recently used entry. The count
  /// can pass the bound by less than `shards` (when the inserting shard has nothing to drop).
  std::size_t max_keys = 1'000'000;
  std::size_t shards = 64;  ///< lock striping; no global lock on the request path
  /// Seed of the `sketch` algorithm's keyed hash, 32 hex digits; empty: random per process
  /// (a sketch's counters live only in this process). Tests fix it to compare stores.
  std::string sketch_seed;
  /// Where runtime overrides are kept (limit_override.hpp; `--overrides-file`): written
  /// atomically after every change, read by openMemoryStore(). Empty: in memory only.
  std::string overrides_file;
};

/// The embedded store: thread-safe, one instance shared by all I/O threads; evaluate()
/// calls back inline (after releasing its locks) and never fails. Reads time from `clock`
/// (which must outlive the store, as must `metrics`).
///
/// A request locks the shards of its keys in ascending order, evaluates every limit, then
/// charges per the Store contract, so concurrent requests are serialised per key and
/// multi-limit requests are all-or-nothing. A bucket is kept for its Evaluation::ttl_us after
/// the last charge and then forgotten (each request advances an incremental expiry sweep).
/// About 40 bytes per bucket plus its key (bench/memory_per_key.cpp); sliding_window_log
/// buckets add their log.
///
/// `sketch` limits are kept apart: one sketch per rule shared by all its clients
/// (store/memory/sketch_registry.hpp), 2 x depth x width counters whatever the number of
/// clients, locked after the shards (in address order) for the whole request.
///
/// Metrics: gauge `memory_store_keys`, counter `memory_store_evictions_total{reason}` with
/// reason "expired" (idle past its ttl) or "capacity" (dropped for max_keys while live);
/// per sketch rule `sketch_load`, `sketch_saturated_ratio`, `sketch_memory_bytes`.
StorePtr makeMemoryStore(const MemoryStoreOptions& options, const Clock& clock, Metrics& metrics);

/// makeMemoryStore() with its overrides read from MemoryStoreOptions::overrides_file (a
/// missing file is none). kInvalidArgument names the file and what is wrong with it.
Result<StorePtr> openMemoryStore(const MemoryStoreOptions& options, const Clock& clock,
                                 Metrics& metrics);

}  // namespace sluice
