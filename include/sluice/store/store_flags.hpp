#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/common/flag_registry.hpp"
#include "sluice/store/failover_store.hpp"
#include "sluice/store/memory_snapshot.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice {

/// Where the counters live (--store).
enum class StoreKind { kMemory, kRedis, kRedisCluster };

/// "memory", "redis", "redis_cluster".
std::string_view storeKindName(StoreKind kind);

/// The store's settings as the flags give them (the "Store" and "Eventual limits" flags of
/// --help). --redis is parsed into RedisOptions once every source is applied.
struct StoreSettings {
  StoreKind store = StoreKind::kMemory;
  std::string redis_url = "redis://127.0.0.1:6379/0";  ///< --redis as given
  FailureMode failure_mode = FailureMode::kOpen;
  std::chrono::milliseconds redis_timeout{20};
  /// --redis-max-batch: most decisions per script call (RedisOptions::max_batch).
  std::size_t redis_max_batch = 32;
  /// --redis-batches-in-flight (RedisOptions::max_batches_in_flight).
  std::size_t redis_batches_in_flight = 1;
  /// Start-up: requests wait for the store's first connection, /readyz is 503, this long.
  std::chrono::milliseconds store_connect_wait{2000};
  std::string redis_prefix = "sluice";
  std::size_t memory_max_keys = 1'000'000;
  /// `consistency: eventual` (docs/eventual.md): sync interval, own region, other regions
  /// (NAME=URL,...; parsed at start-up against the Redis options), bound on eventual keys.
  std::chrono::milliseconds sync_interval{50};
  std::string region = "local";
  std::string regions;
  std::size_t eventual_max_keys = 200'000;
  bool eventual_quiet_keys = true;
  /// --memory-snapshot, --snapshot-interval, --memory-snapshot-on-error: the memory
  /// store's counters on disk across restarts (sluice/store/memory_snapshot.hpp).
  std::string memory_snapshot;
  std::chrono::milliseconds snapshot_interval{10'000};
  SnapshotOnError memory_snapshot_on_error = SnapshotOnError::kFail;
};

/// Adds the store's and the eventual limits' flags, bound to `settings`.
void addStoreFlags(FlagRegistry& registry, StoreSettings& settings);

/// Parses --sync-interval: a duration from 5ms to 10s in whole milliseconds ("50ms", "1s"),
/// or a bare number of milliseconds.
Result<std::chrono::milliseconds> parseSyncInterval(std::string_view text);

}  // namespace sluice
