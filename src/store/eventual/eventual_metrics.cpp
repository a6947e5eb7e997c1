#include "store/eventual/eventual_metrics.hpp"

namespace sluice {

namespace {

Metrics& describeAll(Metrics& metrics) {
  using Type = Metrics::Type;
  metrics.describe("eventual_sync_duration_seconds", Type::kHistogram,
                   "Latency of one eventual sync (all touched keys, one pipelined round trip).",
                   latencyBuckets());
  metrics.describe("eventual_keys_synced", Type::kGauge,
                   "Keys sent and read by the last eventual sync.");
  metrics.describe("eventual_keys_synced_total", Type::kCounter,
                   "Keys sent and read by eventual syncs, summed.");
  metrics.describe("eventual_syncs_total", Type::kCounter,
                   "Eventual syncs by result (ok, failed).");
  metrics.describe("eventual_switched_to_strict_total", Type::kCounter,
                   "Times an eventual key came close enough to its limit to be decided by round "
                   "trips (strict).");
  metrics.describe("eventual_pending_hits", Type::kGauge,
                   "Hits admitted locally and not yet confirmed by Redis (quiet keys keep "
                   "theirs until their window ends).");
  metrics.describe("eventual_sync_lag_seconds", Type::kGauge,
                   "Time since Redis last confirmed a sync while hits are pending (0 when none "
                   "are; a sync with nothing to send counts as confirmed): a bound on the age of "
                   "the oldest hit that had to go out and other sidecars have not seen.");
  metrics.describe("eventual_keys", Type::kGauge, "Eventual keys this sidecar holds a view of.");
  metrics.describe("eventual_dropped_hits_total", Type::kCounter,
                   "Admitted hits dropped before Redis confirmed them (their window passed, or "
                   "the key bound was reached).");
  metrics.describe("eventual_local_decisions_total", Type::kCounter,
                   "Eventual decisions made without a round trip, by mode (synced; degraded: "
                   "Redis unreachable).");
  metrics.describe("eventual_round_trips_total", Type::kCounter,
                   "Eventual decisions that needed a round trip, by reason (unknown key, stale "
                   "view, tight: close to the limit).");
  metrics.describe("eventual_redis_unreachable_total", Type::kCounter,
                   "Times the eventual sync lost Redis (limits then decide locally and keep "
                   "their hits).");
  metrics.describe("eventual_replication_lag_seconds", Type::kGauge,
                   "Per other region: how long this region's oldest unsent update has waited.");
  metrics.describe("eventual_replication_dropped_total", Type::kCounter,
                   "Per other region: updates dropped because the replication queue was full "
                   "(a later update of the same key covers them).");
  metrics.describe("eventual_region_unreachable_total", Type::kCounter,
                   "Per other region: times its Redis (or a master of its cluster) stopped "
                   "answering this region's replication (the updates wait for it).");
  return metrics;
}

}  // namespace

EventualMetrics::EventualMetrics(Metrics& metrics)
    : registry(describeAll(metrics)),
      sync_duration(metrics.histogram("eventual_sync_duration_seconds")),
      keys_synced(metrics.gauge("eventual_keys_synced")),
      keys_synced_total(metrics.counter("eventual_keys_synced_total")),
      syncs_ok(metrics.counter("eventual_syncs_total", {{"result", "ok"}})),
      syncs_failed(metrics.counter("eventual_syncs_total", {{"result", "failed"}})),
      switched(metrics.counter("eventual_switched_to_strict_total")),
      pending(metrics.gauge("eventual_pending_hits")),
      sync_lag(metrics.gauge("eventual_sync_lag_seconds")),
      keys(metrics.gauge("eventual_keys")),
      dropped_hits(metrics.counter("eventual_dropped_hits_total")),
      local_synced(metrics.counter("eventual_local_decisions_total", {{"mode", "synced"}})),
      local_degraded(metrics.counter("eventual_local_decisions_total", {{"mode", "degraded"}})),
      trips_unknown(metrics.counter("eventual_round_trips_total", {{"reason", "unknown"}})),
      trips_stale(metrics.counter("eventual_round_trips_total", {{"reason", "stale"}})),
      trips_tight(metrics.counter("eventual_round_trips_total", {{"reason", "tight"}})),
      unreachable(metrics.counter("eventual_redis_unreachable_total")) {}

EventualMetrics::RegionSeries EventualMetrics::region(const std::string& name) {
  return {&registry.gauge("eventual_replication_lag_seconds", {{"region", name}}),
          &registry.counter("eventual_replication_dropped_total", {{"region", name}}),
          &registry.counter("eventual_region_unreachable_total", {{"region", name}})};
}

}  // namespace sluice
