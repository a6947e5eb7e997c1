#pragma once

#include <string>

#include "sluice/common/metrics.hpp"

namespace sluice {

/// The eventual engine's metrics (docs/metrics.md), described and looked up once.
struct EventualMetrics {
  explicit EventualMetrics(Metrics& metrics);

  /// The per-region series of region `name` (eventual_replication_lag_seconds,
  /// eventual_replication_dropped_total, eventual_region_unreachable_total).
  struct RegionSeries {
    Gauge* lag;
    Counter* dropped;
    Counter* unreachable;
  };
  RegionSeries region(const std::string& name);

  Metrics& registry;
  Histogram& sync_duration;
  Gauge& keys_synced;
  Counter& keys_synced_total;
  Counter& syncs_ok;
  Counter& syncs_failed;
  Counter& switched;
  Gauge& pending;
  Gauge& sync_lag;
  Gauge& keys;
  Counter& dropped_hits;
  Counter& local_synced;
  Counter& local_degraded;
  Counter& trips_unknown;
  Counter& trips_stale;
  Counter& trips_tight;
  Counter& unreachable;
};

}  // namespace sluice
