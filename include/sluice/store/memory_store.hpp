#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/store.hpp"

namespace sluice {

struct MemoryStoreOptions {
  /// Bound on stored buckets. A new key over the bound first drops expired entries (found
  /// by a bounded scan of its shard), else its shard's least recently used entry. The count
  /// can pass the bound by less than `shards` (when the inserting shard has nothing to drop).
  /// A shard's first such eviction sorts its buckets by last use, once (about a millisecond
  /// for the 16,000 of each shard at the defaults, 127 ms for a shard of 1,000,000); until
  /// then a decision keeps no list, only a use stamp in its own bucket.
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

/// One bucket of a memory store as its snapshot copies it (valid during the visit only).
struct BucketView {
  std::string_view key;  ///< the store key
  std::int64_t a = 0;    ///< BucketState's scalar fields
  std::int64_t b = 0;
  std::int64_t c = 0;
  Micros expires_at = 0;                       ///< when it is forgotten (whole seconds)
  const std::vector<LogEntry>* log = nullptr;  ///< a sliding_window_log bucket's log
};

/// The counters of a memory store, for its snapshots (sluice/store/memory_snapshot.hpp). The
/// rules' `sketch` limits are not buckets and are not part of them.
class MemoryCounters {
 public:
  virtual ~MemoryCounters() = default;
  /// The store's lock stripes; visitShard takes one at a time.
  virtual std::size_t shardCount() const = 0;
  /// Calls `visit` for every bucket of shard `shard` not expired at `now`, holding that
  /// shard's lock: decisions on its keys wait meanwhile, so the visit must only copy.
  /// Thread-safe.
  virtual void visitShard(std::size_t shard, Micros now,
                          const std::function<void(const BucketView&)>& visit) = 0;
  /// Puts a bucket into the store (start-up, before any decision), replacing one of the
  /// same key. False when the store holds --memory-max-keys buckets already. Thread-safe.
  virtual bool restoreBucket(std::string_view key, BucketState&& state, Micros expires_at) = 0;
};

/// The counters of `store` when it is a memory store (made by makeMemoryStore), else null.
MemoryCounters* memoryCountersOf(Store& store);

/// A memory store used by one thread alone (a replay, `sluice simulate`): the same decision
/// as Store::evaluate(), by the same code on the same buckets, taken without the shard
/// locks and written in place instead of handed to a callback.
class MemoryExclusive {
 public:
  virtual ~MemoryExclusive() = default;
  /// Store::evaluate()'s answer to `request` (at the store's clock) written into
  /// `response`, whose storage is reused. Not thread-safe: the caller must be the only
  /// thread that uses the store, for as long as it calls this.
  void evaluateExclusive(const StoreRequest& request, StoreResponse& response) {
    evaluateExclusiveHashed(request, response, nullptr);
  }
  /// evaluateExclusive() with each limit's key hash already computed by prefetchKey()
  /// (`hashes[i]` that of `request.limits[i].key`; null: none).
  virtual void evaluateExclusiveHashed(const StoreRequest& request, StoreResponse& response,
                                       const std::uint64_t* hashes) = 0;
  /// A hint that a request of bucket `key` comes soon: starts reading into the processor's
  /// cache what its lookup will read, in three steps, each called a request or so after the
  /// one before (0: the index cell; 1: the entries that cell points at; 2: their keys).
  /// Returns the key's hash, which the later steps take instead of the key. Reads only: the
  /// store and its answers are unchanged. Not thread-safe, as evaluateExclusive().
  virtual std::uint64_t prefetchKey(std::string_view key) = 0;
  virtual void prefetchStep(std::uint64_t hash, int step) = 0;
};

/// `store`'s exclusive entry when it is a memory store (made by makeMemoryStore), else null.
MemoryExclusive* memoryExclusiveOf(Store& store);

}  // namespace sluice
