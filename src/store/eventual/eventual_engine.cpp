// The eventual engine's life cycle: construction, start, the last sync before a stop, and the
// public functions of eventual_store.hpp that make a production engine (its own thread).
#include "store/eventual/eventual_engine.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <future>
#include <random>
#include <utility>

#include "sluice/rules/bucket_key.hpp"

namespace sluice {

namespace {

std::string randomId() {
  std::random_device device;
  std::uint64_t value = (static_cast<std::uint64_t>(device()) << 32) ^ device() ^
                        static_cast<std::uint64_t>(::getpid());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

EventualEngine::EventualEngine(const EventualOptions& options, const RedisOptions& local,
                               const Clock& clock, Executor& executor,
                               EventualBackendFactory backends, Metrics& metrics)
    : options_(options),
      local_(local),
      clock_(clock),
      executor_(executor),
      backends_(std::move(backends)),
      registry_(metrics),
      metrics_(metrics),
      prefix_(local.key_prefix),
      redis_prefix_(BucketKey::redisPrefix(local.key_prefix)),
      entry_("s" + randomId()),
      script_(eventual::composeEventualScript()) {
  tuning_.sync_interval_us = options_.sync_interval.count() * kMicrosPerMilli;
  tuning_.stale_after_us = std::max<Micros>(3 * tuning_.sync_interval_us, kMicrosPerSecond);
  tuning_.safety = std::max(1.0, options_.safety);
  tuning_.quiet_keys = options_.quiet_keys;
  for (const EventualRegion& config : options_.regions) {
    auto region = std::make_unique<Region>();
    region->config = config;
    const EventualMetrics::RegionSeries series = metrics_.region(config.name);
    region->lag = series.lag;
    region->dropped = series.dropped;
    region->unreachable = series.unreachable;
    regions_.push_back(std::move(region));
  }
}

EventualEngine::~EventualEngine() { stop(); }

void EventualEngine::start() {
  if (started_) {
    return;
  }
  started_ = true;
  backend_ = backends_(nullptr, registry_);
  for (auto& region : regions_) {
    region->backend = backends_(&region->config, *region->backend_metrics);
  }
  timer_ = executor_.makeTimer();
  executor_.post([this] { tick(); });
  if (loop_) {
    loop_->start();
  }
}

void EventualEngine::stop() {
  if (!started_ || stopped_.exchange(true)) {
    return;
  }
  if (!loop_) {
    // An injected executor: its owner runs the last sync and the closing.
    executor_.post([this] { flush([this] { closeLinks(); }); });
    return;
  }
  if (loop_->onLoopThread()) {
    flush({});
  } else {
    // The last sync runs on the loop; this thread waits for it, bounded.
    auto flushed = std::make_shared<std::promise<void>>();
    std::future<void> done = flushed->get_future();
    executor_.post([this, flushed] { flush([flushed] { flushed->set_value(); }); });
    done.wait_for(local_.request_timeout * 5);
  }
  loop_->stop();
  // The loop has ended: what is left runs on this thread.
  closeLinks();
  loop_->poll();
}

void EventualEngine::flush(std::function<void()> done) {
  if (timer_) {
    timer_->cancel();
  }
  // A sync still in flight sent its keys already; the last one sends what came after.
  sync_in_flight_ = false;
  sync(std::move(done));
}

void EventualEngine::closeLinks() {
  if (timer_) {
    timer_->cancel();
  }
  backend_->stop();
  for (auto& region : regions_) {
    region->backend->stop();
  }
}

std::shared_ptr<redis::RedisBackend> EventualEngine::makeBackendOn(boost::asio::io_context& io) {
  // One Redis: a plain connection, outside the store's health group (a lost connection makes
  // the engine decide locally, counted in eventual_redis_unreachable_total; it does not make
  // the sidecar unready). A cluster: the cluster router.
  if (!options_.cluster_seeds.empty()) {
    return redis::makeClusterBackend(io, options_.cluster_seeds, registry_, script_);
  }
  return redis::makeSingleNodeBackend(io, local_, nullptr, script_);
}

std::string EventualEngine::statusJson() const {
  std::string out = "{\"redis_reachable\":";
  const bool reachable = reachable_.load(std::memory_order_acquire);
  out += reachable ? "true" : "false";
  out += ",\"deciding_locally\":";
  out += reachable ? "false" : "true";
  out += ",\"pending_hits\":" + std::to_string(pending_.load(std::memory_order_relaxed));
  out += ",\"keys\":" + std::to_string(size_.load(std::memory_order_relaxed));
  out += ",\"region\":\"" + options_.region + "\",\"regions\":{";
  bool first = true;
  for (const auto& region : regions_) {
    out += first ? "" : ",";
    first = false;
    out += "\"" + region->config.name + "\":{\"reachable\":";
    out += region->reachable.load(std::memory_order_relaxed) ? "true" : "false";
    out += ",\"lag_seconds\":" + std::to_string(region->lag->value()) + "}";
  }
  out += "}}";
  return out;
}

// ---------------------------------------------------------------------------------------
// Public functions

namespace {

/// The production connections: on `io` (the engine's loop), this region's Redis as
/// makeBackendOn() makes it, another region's as a plain connection or its cluster's router.
EventualBackendFactory realBackends(boost::asio::io_context& io, const EventualOptions& options,
                                    const RedisOptions& local, std::string script) {
  return
      [&io, options, local, script = std::move(script)](
          const EventualRegion* region, Metrics& metrics) -> std::shared_ptr<redis::RedisBackend> {
        if (region == nullptr) {
          if (!options.cluster_seeds.empty()) {
            return redis::makeClusterBackend(io, options.cluster_seeds, metrics, script);
          }
          return redis::makeSingleNodeBackend(io, local, nullptr, script);
        }
        // A region that comes back is used again within about one sync interval.
        const auto backoff = std::max(std::chrono::milliseconds(10), options.sync_interval);
        if (region->cluster_seeds.empty()) {
          // One Redis: a plain connection (its failures are this engine's to report).
          RedisOptions r = region->redis;
          r.max_reconnect_backoff = backoff;
          return redis::makeSingleNodeBackend(io, r, nullptr, script);
        }
        // A cluster: the router of the cluster store, outside this sidecar's health group.
        std::vector<RedisOptions> seeds = region->cluster_seeds;
        for (RedisOptions& seed : seeds) {
          seed.max_reconnect_backoff = backoff;
        }
        return redis::makeClusterBackend(io, std::move(seeds), metrics, script, region->name);
      };
}

}  // namespace

EventualEnginePtr makeEventualEngine(const EventualOptions& options, const RedisOptions& local,
                                     const Clock& clock, Metrics& metrics) {
  auto loop = std::make_unique<EventLoopThread>();
  auto engine = std::make_shared<EventualEngine>(
      options, local, clock, loop->executor(),
      realBackends(loop->io(), options, local, eventual::composeEventualScript()), metrics);
  engine->adoptLoop(std::move(loop));
  engine->start();
  return engine;
}

void stopEventualEngine(EventualEngine& engine) { engine.stop(); }

std::string eventualStatusJson(const EventualEngine& engine) { return engine.statusJson(); }

}  // namespace sluice
