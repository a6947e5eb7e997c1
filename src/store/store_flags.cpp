#include "sluice/store/store_flags.hpp"

#include <algorithm>

#include "sluice/store/eventual_store.hpp"

namespace sluice {
namespace {

using std::chrono::milliseconds;

constexpr std::pair<StoreKind, std::string_view> kStoreKinds[] = {
    {StoreKind::kMemory, "memory"},
    {StoreKind::kRedis, "redis"},
    {StoreKind::kRedisCluster, "redis_cluster"},
};

constexpr std::pair<FailureMode, std::string_view> kFailureModes[] = {
    {FailureMode::kOpen, "open"},
    {FailureMode::kClosed, "closed"},
    {FailureMode::kLocal, "local"},
};

constexpr std::pair<SnapshotOnError, std::string_view> kSnapshotOnError[] = {
    {SnapshotOnError::kFail, "fail"},
    {SnapshotOnError::kStartEmpty, "start-empty"},
};

constexpr std::size_t kMaxKeys = std::size_t{1} << 32;

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addSnapshotFlags(FlagRegistry& registry, StoreSettings& settings) {
  namespace set = flag_setters;
  registry.section("Memory snapshots (--store memory; docs/operations.md)");
  registry.add({.name = "memory-snapshot",
                .metavar = "PATH",
                .help = "keep the memory store's counters in this file across restarts: written "
                        "every --snapshot-interval and at SIGTERM/SIGINT, read at start-up "
                        "(default off)",
                .set = set::text(settings.memory_snapshot)});
  registry.add({.name = "snapshot-interval",
                .metavar = "DURATION",
                .help = "time between two memory snapshots, e.g. 10s (default 10s; 100ms to 1h)",
                .set = [&settings](std::string_view value) -> Status {
                  const std::optional<Micros> us = parseDurationMicros(value);
                  if (!us || *us < 100 * kMicrosPerMilli || *us > 3'600 * kMicrosPerSecond ||
                      *us % kMicrosPerMilli != 0) {
                    return makeError(ErrorKind::kInvalidArgument,
                                     "must be a duration from 100ms to 1h in whole "
                                     "milliseconds, got \"" +
                                         std::string(value) + "\"");
                  }
                  settings.snapshot_interval = milliseconds(*us / kMicrosPerMilli);
                  return {};
                }});
  registry.add({.name = "memory-snapshot-on-error",
                .metavar = "MODE",
                .help = "fail | start-empty: a snapshot that cannot be read (corrupt, truncated, "
                        "not a snapshot) stops the start, or is set aside with a warning "
                        "(default fail)",
                .set = set::choice(settings.memory_snapshot_on_error, kSnapshotOnError)});
}

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addEventualFlags(FlagRegistry& registry, StoreSettings& settings) {
  namespace set = flag_setters;
  registry.section("Eventual limits (consistency: eventual, docs/eventual.md)");
  registry.add({.name = "sync-interval",
                .metavar = "DURATION",
                .help = "eventual limits: how often each sidecar sends its hits and reads the "
                        "totals, e.g. 50ms (default 50ms; 5ms to 10s)",
                .set = [&settings](std::string_view value) -> Status {
                  auto interval = parseSyncInterval(value);
                  if (!interval) {
                    return interval.error();
                  }
                  settings.sync_interval = *interval;
                  return {};
                }});
  registry.add({.name = "region",
                .metavar = "NAME",
                .help = "eventual limits: this sidecar's region (default local)",
                .set = [&settings](std::string_view value) -> Status {
                  if (auto status = checkRegionName(std::string(value)); !status) {
                    return status;
                  }
                  settings.region = std::string(value);
                  return {};
                }});
  registry.add({.name = "regions",
                .metavar = "NAME=URL,...",
                .help = "eventual limits: the other regions' Redis, e.g. "
                        "eu=redis://10.1.0.5:6379/0,us=redis://10.2.0.5:6379/0; a region that is "
                        "a Redis Cluster: NAME=cluster:URL+URL... (its seeds) (default none)",
                .set = set::text(settings.regions)});
  registry.add({.name = "eventual-max-keys",
                .metavar = "N",
                .help = "bound on the eventual keys a sidecar holds (default 200000)",
                .set = set::integer<std::size_t>(settings.eventual_max_keys, 1, kMaxKeys)});
  registry.add({.name = "eventual-quiet-keys",
                .metavar = "BOOL",
                .help = "eventual limits: a fixed-window key far from its limit whose hits stay "
                        "within half its blind allowance (0.05 % of L) keeps them until its "
                        "window ends instead of writing them to Redis; false writes every hit "
                        "within a second (default true)",
                .set = set::boolean(settings.eventual_quiet_keys)});
}

}  // namespace

std::string_view storeKindName(StoreKind kind) {
  for (const auto& [value, name] : kStoreKinds) {
    if (value == kind) {
      return name;
    }
  }
  return "memory";
}

Result<milliseconds> parseSyncInterval(std::string_view text) {
  std::optional<Micros> us = parseDurationMicros(text);
  if (!us && !text.empty() &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    auto ms = parseMilliseconds(text, milliseconds(5), milliseconds(10'000));
    if (!ms) {
      return ms.error();
    }
    us = ms->count() * kMicrosPerMilli;
  }
  if (!us || *us < 5 * kMicrosPerMilli || *us > 10 * kMicrosPerSecond ||
      *us % kMicrosPerMilli != 0) {
    return makeError(ErrorKind::kInvalidArgument,
                     "must be a duration from 5ms to 10s in whole milliseconds, got \"" +
                         std::string(text) + "\"");
  }
  return milliseconds(*us / kMicrosPerMilli);
}

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addStoreFlags(FlagRegistry& registry, StoreSettings& settings) {
  namespace set = flag_setters;
  registry.section("Store");
  registry.add({.name = "store",
                .metavar = "KIND",
                .help = "memory | redis | redis_cluster (default memory)",
                .set = set::choice(settings.store, kStoreKinds),
                .envoy_variables = "REDIS_TYPE, REDIS_SOCKET_TYPE, REDIS_URL, REDIS_AUTH"});
  registry.add({.name = "redis",
                .metavar = "URL",
                .help = "redis://[user:password@]host:port/db or unix:///path (default "
                        "redis://127.0.0.1:6379/0); with --store redis_cluster, comma-separated "
                        "seed nodes redis://host:port,redis://host:port",
                .set = set::text(settings.redis_url),
                .envoy_variables = "REDIS_URL, REDIS_SOCKET_TYPE, REDIS_AUTH, REDIS_TYPE"});
  registry.add({.name = "failure-mode",
                .metavar = "MODE",
                .help = "open | closed | local: when the store fails (default open)",
                .set = set::choice(settings.failure_mode, kFailureModes)});
  registry.add(
      {.name = "redis-timeout-ms",
       .metavar = "MS",
       .help = "per-request Redis deadline (default 20)",
       .set = set::milliseconds(settings.redis_timeout, milliseconds(1), milliseconds(60'000)),
       .envoy_variables = "REDIS_TIMEOUT"});
  registry.add({.name = "redis-max-batch",
                .metavar = "N",
                .help = "most decisions sent to Redis in one script call: the decisions an I/O "
                        "thread collects in one event-loop turn go as one EVALSHA per node, up "
                        "to N each (1: one call per decision; default 32)",
                .set = set::integer<std::size_t>(settings.redis_max_batch, 1, 1024)});
  registry.add({.name = "redis-batches-in-flight",
                .metavar = "N",
                .help = "most batches awaiting Redis's answer at once per I/O thread on a "
                        "single node, per hash slot in a cluster: while that many are, "
                        "decisions wait in the next batch, which goes when one is answered or "
                        "when it is full (0: no bound; default 1)",
                .set = set::integer<std::size_t>(settings.redis_batches_in_flight, 0, 1024)});
  registry.add({.name = "store-connect-wait-ms",
                .metavar = "MS",
                .help = "start-up: requests wait for the store's first connection, and /readyz "
                        "is 503, up to this long (default 2000)",
                .set = set::milliseconds(settings.store_connect_wait, milliseconds(0),
                                         milliseconds(600'000))});
  registry.add({.name = "redis-prefix",
                .metavar = "PREFIX",
                .help = "prefix of every Redis key (default sluice)",
                .set = set::text(settings.redis_prefix),
                .envoy_variables = "CACHE_KEY_PREFIX"});
  registry.add({.name = "memory-max-keys",
                .metavar = "N",
                .help = "bound on the memory store's buckets (default 1000000)",
                .set = set::integer<std::size_t>(settings.memory_max_keys, 1, kMaxKeys)});
  addEventualFlags(registry, settings);
  addSnapshotFlags(registry, settings);
}

}  // namespace sluice
