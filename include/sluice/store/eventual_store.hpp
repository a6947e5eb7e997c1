#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/store/redis_store.hpp"
#include "sluice/store/store.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice {

/// One other region of `--regions NAME=URL`: its name and its Redis (one Redis, or a Redis
/// Cluster reached through its seeds).
struct EventualRegion {
  std::string name;
  /// Its Redis; for a cluster, the first seed (credentials, timeouts, key prefix).
  RedisOptions redis;
  /// `NAME=cluster:URL[+URL...]`: the region's Redis Cluster seeds. Empty: one Redis.
  std::vector<RedisOptions> cluster_seeds;
};

/// Settings of `consistency: eventual` (docs/eventual.md).
struct EventualOptions {
  /// `--sync-interval`: how often this sidecar sends the hits it admitted and reads the totals.
  std::chrono::milliseconds sync_interval{50};
  /// `--region`: this sidecar's region (the entry it writes in other regions' Redis).
  std::string region = "local";
  /// `--regions`: the other regions (their Redis receives this region's counters).
  std::vector<EventualRegion> regions;
  /// Bound on the eventual keys a sidecar holds (with their unsent hits); past it the key
  /// with the oldest window is dropped, its unsent hits counted in
  /// eventual_dropped_hits_total.
  std::size_t max_keys = 200'000;
  /// Bound on the keys waiting to be replicated to one other region; past it an update is
  /// dropped (counted; a later update of the same key covers it: values are cumulative).
  std::size_t replication_queue = 100'000;
  /// Horizon factor of the tightening (>= 1), see eventual::Tuning::safety.
  double safety = 2.0;
  /// `--eventual-quiet-keys`: see eventual::Tuning::quiet_keys.
  bool quiet_keys = true;
  /// `--store redis_cluster`: the cluster's seeds (`--redis`). Empty: the region's Redis is
  /// the one Redis given to makeEventualEngine(). On a cluster a sync sends one call per
  /// master (the keys of every slot it serves).
  std::vector<RedisOptions> cluster_seeds;
};

/// Parses `--regions`: NAME=URL[,NAME=URL...] (each URL as parseRedisUrl, into `base`); a
/// region that is a Redis Cluster is NAME=cluster:URL[+URL...] (its seeds, as
/// parseRedisClusterUrls). Names are [A-Za-z0-9_.-]+, distinct, and differ from `own_region`.
/// Errors name the region and, for a cluster, the seed.
Result<std::vector<EventualRegion>> parseEventualRegions(const std::string& text,
                                                         const std::string& own_region,
                                                         const RedisOptions& base);
/// Checks a region name ([A-Za-z0-9_.-]+, at most 64 bytes).
Status checkRegionName(const std::string& name);

/// The process-wide part of eventual consistency: every eventual key's local view (shared by
/// all I/O threads, lock-striped), the sync loop on its own thread (one pipelined script call
/// per sync interval for every touched key), and the replication to the other regions.
/// Thread-safe. Create one per process; stop() (or the destructor) joins its thread.
class EventualEngine;
using EventualEnginePtr = std::shared_ptr<EventualEngine>;

/// Starts the engine on `local` (the region's own Redis, `--redis`; with
/// EventualOptions::cluster_seeds, the first seed's settings). `clock` and `metrics`
/// must outlive it. Metrics: eventual_sync_duration_seconds, eventual_keys_synced (gauge,
/// last sync), eventual_syncs_total{result}, eventual_switched_to_strict_total,
/// eventual_pending_hits, eventual_dropped_hits_total, eventual_local_decisions_total{mode},
/// eventual_round_trips_total{reason}, eventual_replication_lag_seconds{region},
/// eventual_replication_dropped_total{region}, eventual_region_unreachable_total{region}.
EventualEnginePtr makeEventualEngine(const EventualOptions& options, const RedisOptions& local,
                                     const Clock& clock, Metrics& metrics);

/// Stops the sync loop and the replication (idempotent; the destructor calls it). A final
/// sync is attempted first (bounded by the request timeout) so that hits admitted just
/// before a graceful shutdown are not lost.
void stopEventualEngine(EventualEngine& engine);

/// JSON object text for /readyz: {"redis_reachable", "deciding_locally", "pending_hits",
/// "keys", "regions": {name: {"reachable", "lag_seconds"}}}.
std::string eventualStatusJson(const EventualEngine& engine);

/// Wraps one I/O thread's store: limits with `consistency: eventual` are decided by the engine
/// (locally, or by a round trip on a connection of this I/O thread when a key is new, stale or
/// close to its limit); the other limits go to `inner` (the Redis store with its failure mode).
/// A request with both stays all-or-nothing: the eventual limits are checked first, the
/// strict ones by `inner`, and the eventual charge is made only if `inner` allowed.
/// evaluate() must be called on `io`'s thread; destroy the store before `io`.
StorePtr makeEventualStore(StorePtr inner, EventualEnginePtr engine, boost::asio::io_context& io);

}  // namespace sluice
