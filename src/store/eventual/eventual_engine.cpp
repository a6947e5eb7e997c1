#include "store/eventual/eventual_engine.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/container/small_vector.hpp>
#include <charconv>
#include <cstdio>
#include <iterator>
#include <random>
#include <unordered_map>
#include <utility>

#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/redis_store.hpp"
#include "sluice/store/request_verdict.hpp"
#include "store/redis/cluster_slots.hpp"
#include "store/redis/redis_errors.hpp"
#include "store/redis/redis_sketch.hpp"

namespace sluice {

namespace net = boost::asio;
using eventual::Route;
using eventual::ScriptOp;

namespace {

/// Entries per EVALSHA of a sync: a sync of many keys is several calls written at once
/// (one pipelined write, one round trip), each small enough not to stall Redis.
constexpr std::size_t kEntriesPerCall = 256;
constexpr std::size_t kReplicasPerCall = 256;
constexpr std::size_t kReplicasPerTick = 4096;

std::string randomId() {
  std::random_device device;
  std::uint64_t value = (static_cast<std::uint64_t>(device()) << 32) ^ device() ^
                        static_cast<std::uint64_t>(::getpid());
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

Micros steadyMicros() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::int64_t unsentOf(const eventual::View& view) { return view.cur.unsent() + view.prev.unsent(); }

bool isWindowed(const LimitParams& params) { return params.algorithm != Algorithm::kTokenBucket; }

Status replyShape(const std::string& what) {
  return redis::redisError(redis::FailureSource::kProtocol, 0, "eventual script: " + what);
}

/// Parses one reply of the eventual script for `n` entries: a string of
/// n x kScriptReplyStride whole numbers separated by spaces.
Status parseReply(const redis::Reply& reply, std::size_t n, std::vector<std::int64_t>& out) {
  out.clear();
  if (reply.type != redis::Reply::Type::kString) {
    return replyShape("not a string of numbers");
  }
  const std::size_t expected = n * static_cast<std::size_t>(eventual::kScriptReplyStride);
  out.reserve(expected);
  const char* p = reply.str.data();
  const char* end = p + reply.str.size();
  while (p < end) {
    std::int64_t value = 0;
    auto [next, ec] = std::from_chars(p, end, value);
    if (ec != std::errc() || (next < end && *next != ' ')) {
      return replyShape("a value that is not a whole number");
    }
    out.push_back(value);
    p = next < end ? next + 1 : next;
  }
  if (out.size() != expected) {
    return replyShape("unexpected reply size");
  }
  return {};
}

/// Offsets in one entry's reply (eventual_script.cpp).
enum ReplyField : std::size_t {
  kAllowed = 0,
  kRemaining,
  kResetAfter,
  kRetryAfter,
  kNever,
  kCharged,
  kOthers,
  kOwn,
  kPrevOthers,
  kPrevOwn,
  kRegion,
  kPrevRegion,
  kWriters,
  kTatUs,
  kTatRem,
};

eventual::KeyReading readingOf(const std::int64_t* v, std::int64_t window) {
  eventual::KeyReading reading;
  reading.window = window;
  reading.others = v[kOthers];
  reading.own = v[kOwn];
  reading.prev_others = v[kPrevOthers];
  reading.prev_own = v[kPrevOwn];
  reading.writers = static_cast<std::size_t>(std::max<std::int64_t>(v[kWriters], 0));
  reading.tat.a = v[kTatUs];
  reading.tat.b = v[kTatRem];
  return reading;
}

}  // namespace

EventualEngine::EventualEngine(const EventualOptions& options, const RedisOptions& local,
                               const Clock& clock, Metrics& metrics)
    : options_(options),
      local_(local),
      clock_(clock),
      metrics_(metrics),
      prefix_(local.key_prefix),
      redis_prefix_(BucketKey::redisPrefix(local.key_prefix)),
      entry_("s" + randomId()),
      script_(eventual::composeEventualScript()),
      sync_duration_((metrics.describe("eventual_sync_duration_seconds", Metrics::Type::kHistogram,
                                       "Latency of one eventual sync (all touched keys, one "
                                       "pipelined round trip).",
                                       latencyBuckets()),
                      metrics.histogram("eventual_sync_duration_seconds"))),
      keys_synced_((metrics.describe("eventual_keys_synced", Metrics::Type::kGauge,
                                     "Keys sent and read by the last eventual sync."),
                    metrics.gauge("eventual_keys_synced"))),
      keys_synced_total_((metrics.describe("eventual_keys_synced_total", Metrics::Type::kCounter,
                                           "Keys sent and read by eventual syncs, summed."),
                          metrics.counter("eventual_keys_synced_total"))),
      syncs_ok_((metrics.describe("eventual_syncs_total", Metrics::Type::kCounter,
                                  "Eventual syncs by result (ok, failed)."),
                 metrics.counter("eventual_syncs_total", {{"result", "ok"}}))),
      syncs_failed_(metrics.counter("eventual_syncs_total", {{"result", "failed"}})),
      switched_((metrics.describe("eventual_switched_to_strict_total", Metrics::Type::kCounter,
                                  "Times an eventual key came close enough to its limit to be "
                                  "decided by round trips (strict)."),
                 metrics.counter("eventual_switched_to_strict_total"))),
      pending_gauge_((metrics.describe("eventual_pending_hits", Metrics::Type::kGauge,
                                       "Hits admitted locally and not yet confirmed by Redis."),
                      metrics.gauge("eventual_pending_hits"))),
      sync_lag_((metrics.describe("eventual_sync_lag_seconds", Metrics::Type::kGauge,
                                  "Time since Redis last confirmed a sync while hits are pending "
                                  "(0 when none are): a bound on the age of the oldest hit other "
                                  "sidecars have not seen."),
                 metrics.gauge("eventual_sync_lag_seconds"))),
      keys_gauge_((metrics.describe("eventual_keys", Metrics::Type::kGauge,
                                    "Eventual keys this sidecar holds a view of."),
                   metrics.gauge("eventual_keys"))),
      dropped_hits_((metrics.describe("eventual_dropped_hits_total", Metrics::Type::kCounter,
                                      "Admitted hits dropped before Redis confirmed them (their "
                                      "window passed, or the key bound was reached)."),
                     metrics.counter("eventual_dropped_hits_total"))),
      local_synced_((metrics.describe("eventual_local_decisions_total", Metrics::Type::kCounter,
                                      "Eventual decisions made without a round trip, by mode "
                                      "(synced; degraded: Redis unreachable)."),
                     metrics.counter("eventual_local_decisions_total", {{"mode", "synced"}}))),
      local_degraded_(metrics.counter("eventual_local_decisions_total", {{"mode", "degraded"}})),
      trips_unknown_((metrics.describe("eventual_round_trips_total", Metrics::Type::kCounter,
                                       "Eventual decisions that needed a round trip, by reason "
                                       "(unknown key, stale view, tight: close to the limit)."),
                      metrics.counter("eventual_round_trips_total", {{"reason", "unknown"}}))),
      trips_stale_(metrics.counter("eventual_round_trips_total", {{"reason", "stale"}})),
      trips_tight_(metrics.counter("eventual_round_trips_total", {{"reason", "tight"}})),
      unreachable_((metrics.describe("eventual_redis_unreachable_total", Metrics::Type::kCounter,
                                     "Times the eventual sync lost Redis (limits then decide "
                                     "locally and keep their hits)."),
                    metrics.counter("eventual_redis_unreachable_total"))) {
  tuning_.sync_interval_us = options_.sync_interval.count() * kMicrosPerMilli;
  tuning_.stale_after_us = std::max<Micros>(3 * tuning_.sync_interval_us, kMicrosPerSecond);
  tuning_.safety = std::max(1.0, options_.safety);
  metrics.describe("eventual_replication_lag_seconds", Metrics::Type::kGauge,
                   "Per other region: how long this region's oldest unsent update has waited.");
  metrics.describe("eventual_replication_dropped_total", Metrics::Type::kCounter,
                   "Per other region: updates dropped because the replication queue was full "
                   "(a later update of the same key covers them).");
  metrics.describe("eventual_region_unreachable_total", Metrics::Type::kCounter,
                   "Per other region: times its Redis (or a master of its cluster) stopped "
                   "answering this region's replication (the updates wait for it).");
  for (const EventualRegion& config : options_.regions) {
    auto region = std::make_unique<Region>();
    region->config = config;
    region->lag = &metrics.gauge("eventual_replication_lag_seconds", {{"region", config.name}});
    region->dropped =
        &metrics.counter("eventual_replication_dropped_total", {{"region", config.name}});
    region->unreachable =
        &metrics.counter("eventual_region_unreachable_total", {{"region", config.name}});
    regions_.push_back(std::move(region));
  }
}

EventualEngine::~EventualEngine() { stop(); }

void EventualEngine::start() {
  if (started_) {
    return;
  }
  started_ = true;
  backend_ = makeBackendOn(io_);
  for (auto& region : regions_) {
    // A region that comes back is used again within about one sync interval.
    const auto backoff = std::max(std::chrono::milliseconds(10), options_.sync_interval);
    if (region->config.cluster_seeds.empty()) {
      // One Redis: a plain connection (its failures are this engine's to report).
      RedisOptions r = region->config.redis;
      r.max_reconnect_backoff = backoff;
      region->backend = redis::makeSingleNodeBackend(io_, r, nullptr, script_);
    } else {
      // A cluster: the router of the cluster store, outside this sidecar's health group.
      std::vector<RedisOptions> seeds = region->config.cluster_seeds;
      for (RedisOptions& seed : seeds) {
        seed.max_reconnect_backoff = backoff;
      }
      region->backend_metrics = std::make_unique<Metrics>();
      region->backend = redis::makeClusterBackend(io_, std::move(seeds), *region->backend_metrics,
                                                  script_, region->config.name);
    }
  }
  timer_ = std::make_unique<net::steady_timer>(io_);
  net::post(io_, [this] { tick(); });
  thread_ = std::thread([this] {
    auto guard = net::make_work_guard(io_);
    while (!stopped_.load(std::memory_order_acquire)) {
      io_.run_for(std::chrono::milliseconds(100));
    }
  });
}

std::shared_ptr<redis::RedisBackend> EventualEngine::makeBackendOn(net::io_context& io) {
  // One Redis: a plain connection, outside the store's health group (a lost connection makes
  // the engine decide locally, counted in eventual_redis_unreachable_total; it does not make
  // the sidecar unready). A cluster: the cluster router.
  if (!options_.cluster_seeds.empty()) {
    return redis::makeClusterBackend(io, options_.cluster_seeds, metrics_, script_);
  }
  return redis::makeSingleNodeBackend(io, local_, nullptr, script_);
}

std::string EventualEngine::sketchTag(const SketchParams& geometry) {
  // "ske." + the CRC16 of the rule's identity, 4 hex digits: stable across sidecars and
  // versions, and one hash tag per rule (BucketKey::redisKey tags a key without a client by
  // what precedes its first ':').
  static constexpr char kHex[] = "0123456789abcdef";
  const std::uint16_t crc = redis::crc16(geometry.identity->key);
  std::string tag = "ske.";
  for (int shift = 12; shift >= 0; shift -= 4) {
    tag += kHex[(crc >> shift) & 0xF];
  }
  return tag;
}

int EventualEngine::clusterSlotOf(const EventualLimitRef& ref) const {
  // A sketch's cells are named sketchTag() ":..." (sketchCellKeys): they share its hash tag.
  const bool cells = isSketch(*ref.limit) && sketchHasher() != nullptr;
  return redis::keyHashSlot(BucketKey::redisKey(
      redis_prefix_, cells ? sketchTag(ref.limit->params.sketch) : std::string(ref.key())));
}

void EventualEngine::stop() {
  if (!started_ || stopped_.exchange(true)) {
    return;
  }
  if (thread_.joinable()) {
    thread_.join();
  }
  // The loop has ended: a last sync gets a bounded chance to send what is pending.
  io_.restart();
  sync_in_flight_ = false;
  sync();
  const auto deadline = std::chrono::steady_clock::now() + local_.request_timeout * 5;
  while (sync_in_flight_ && std::chrono::steady_clock::now() < deadline) {
    io_.run_one_for(std::chrono::milliseconds(5));
  }
  if (timer_) {
    timer_->cancel();
  }
  backend_->stop();
  for (auto& region : regions_) {
    region->backend->stop();
  }
  io_.poll();
}

// ---------------------------------------------------------------------------------------
// Views (any thread)

EventualEngine::Shard& EventualEngine::shardOf(std::string_view key) {
  return shards_[KeyHash{}(key) % kShards];
}

void EventualEngine::addPending(std::int64_t delta) {
  if (delta != 0) {
    pending_.fetch_add(delta, std::memory_order_relaxed);
  }
}

void EventualEngine::makeRoom(Shard& shard) {
  if (size_.load(std::memory_order_relaxed) < options_.max_keys || shard.slots.empty()) {
    return;
  }
  // A key with nothing unsent goes first (the least recently used); otherwise the one with
  // the oldest window, whose unsent hits are dropped and counted.
  auto victim = shard.slots.end();
  bool victim_clean = false;
  for (auto it = shard.slots.begin(); it != shard.slots.end(); ++it) {
    const bool clean = unsentOf(it->second.view) == 0;
    if (victim == shard.slots.end() || (clean && !victim_clean) ||
        (clean == victim_clean &&
         (clean ? it->second.last_used < victim->second.last_used
                : it->second.view.cur.index < victim->second.view.cur.index))) {
      victim = it;
      victim_clean = clean;
    }
  }
  const std::int64_t lost = unsentOf(victim->second.view);
  if (lost > 0) {
    dropped_hits_.inc(static_cast<std::uint64_t>(lost));
    addPending(-lost);
  }
  shard.slots.erase(victim);
  size_.fetch_sub(1, std::memory_order_relaxed);
}

EventualEngine::Slot& EventualEngine::slotFor(Shard& shard, const EventualLimitRef& ref,
                                              Micros now) {
  return slotFor(shard, ref.key(), ref.limit->params, now);
}

EventualEngine::Slot& EventualEngine::slotFor(Shard& shard, std::string_view key,
                                              const LimitParams& params, Micros now) {
  auto it = shard.slots.find(key);
  if (it == shard.slots.end()) {
    makeRoom(shard);
    it = shard.slots.emplace(std::string(key), Slot{}).first;
    it->second.params = params;
    it->second.redis_key = BucketKey::redisKey(redis_prefix_, key);
    size_.fetch_add(1, std::memory_order_relaxed);
  }
  Slot& slot = it->second;
  if (slot.params.window_us != params.window_us || slot.params.algorithm != params.algorithm) {
    // A reload changed the window: the old counts mean nothing in the new one.
    const std::int64_t lost = unsentOf(slot.view);
    if (lost > 0) {
      dropped_hits_.inc(static_cast<std::uint64_t>(lost));
      addPending(-lost);
    }
    slot.view = eventual::View{};
    slot.hash_cur.clear();
  }
  slot.params = params;
  const std::int64_t dropped = eventual::roll(slot.view, params, now);
  if (dropped > 0) {
    dropped_hits_.inc(static_cast<std::uint64_t>(dropped));
    addPending(-dropped);
  }
  slot.last_used = now;
  return slot;
}

void EventualEngine::touch(Shard& shard, Slot& slot, std::string_view key, Micros now) {
  slot.last_used = now;
  if (!slot.queued) {
    slot.queued = true;
    shard.queue.emplace_back(key);
  }
}

void EventualEngine::noteTight(bool was, bool is) {
  if (is && !was) {
    switched_.inc();
  }
}

Counter& EventualEngine::roundTrips(Route reason) {
  switch (reason) {
    case Route::kUnknown:
      return trips_unknown_;
    case Route::kStale:
      return trips_stale_;
    default:
      return trips_tight_;
  }
}

namespace {

/// Locks the shards of a request in ascending order (no deadlock between requests), without
/// allocating for requests of up to kInline distinct shards.
class ShardLocks {
 public:
  template <typename ShardOf>
  ShardLocks(const std::vector<EventualLimitRef>& limits, ShardOf shard_of) {
    for (const auto& ref : limits) {
      add(&shard_of(ref.key()).mutex);
    }
    lockAll();
  }
  template <typename ShardOf>
  ShardLocks(const std::vector<std::string_view>& keys, ShardOf shard_of) {
    for (std::string_view key : keys) {
      add(&shard_of(key).mutex);
    }
    lockAll();
  }
  ~ShardLocks() {
    for (std::mutex** m = begin(); m != end(); ++m) {
      (*m)->unlock();
    }
  }
  ShardLocks(const ShardLocks&) = delete;
  ShardLocks& operator=(const ShardLocks&) = delete;

 private:
  static constexpr std::size_t kInline = 8;
  void add(std::mutex* m) {
    if (count_ < kInline && more_.empty()) {
      inline_[count_++] = m;
      return;
    }
    if (more_.empty()) {
      more_.assign(inline_.begin(), inline_.begin() + static_cast<std::ptrdiff_t>(count_));
    }
    more_.push_back(m);
    ++count_;
  }
  /// Locks each distinct shard once, in address order (no deadlock between requests).
  void lockAll() {
    std::sort(begin(), end());
    std::mutex** last = std::unique(begin(), end());
    count_ = static_cast<std::size_t>(last - begin());
    if (!more_.empty()) {
      more_.resize(count_);
    }
    for (std::mutex** m = begin(); m != end(); ++m) {
      (*m)->lock();
    }
  }
  std::mutex** begin() { return more_.empty() ? inline_.data() : more_.data(); }
  std::mutex** end() { return begin() + count_; }

  std::array<std::mutex*, kInline> inline_{};
  std::vector<std::mutex*> more_;
  std::size_t count_ = 0;
};

}  // namespace

void EventualEngine::setSketchHasher(std::shared_ptr<const SketchHasher> hasher) {
  std::lock_guard lock(sketch_mutex_);
  if (!sketch_hasher_) {
    sketch_hasher_ = std::move(hasher);
  }
}

void EventualEngine::fetchSketchSeed(std::function<void(Status)> done) {
  net::post(io_, [this, done = std::move(done)]() mutable {
    if (sketchHasher()) {
      done({});
      return;
    }
    const std::string key = redis::sketchSeedKey(redis_prefix_);
    auto on_reply = [this, key, done = std::move(done)](Result<redis::Reply> reply) mutable {
      if (!reply) {
        done(reply.error());
        return;
      }
      auto hasher = redis::sketchHasherFromReply(*reply, key);
      if (!hasher) {
        done(hasher.error());
        return;
      }
      if (!sketchHasher()) {
        spdlog::info("eventual sketch: hash seed {} from Redis", (*hasher)->fingerprint());
        setSketchHasher(std::move(*hasher));
      }
      done({});
    };
    std::vector<std::string> args = {"sketch-seed", redis::randomSketchSeed()};
    if (Region* home = seedRegion()) {
      // One Redis, or the master of the seed key's slot of that region's cluster.
      home->backend->evalScript({key}, std::move(args), home->config.redis.request_timeout,
                                std::move(on_reply));
    } else {
      backend_->evalScript({key}, std::move(args), local_.request_timeout, std::move(on_reply));
    }
  });
}

EventualEngine::Region* EventualEngine::seedRegion() {
  Region* home = nullptr;
  for (auto& region : regions_) {
    if (region->config.name < options_.region &&
        (home == nullptr || region->config.name < home->config.name)) {
      home = region.get();
    }
  }
  return home;
}

std::shared_ptr<const SketchHasher> EventualEngine::sketchHasher() const {
  std::lock_guard lock(sketch_mutex_);
  return sketch_hasher_;
}

bool EventualEngine::isSketch(const StoreLimit& limit) {
  return limit.params.algorithm == Algorithm::kSketch && limit.params.sketch.identity &&
         limit.params.sketch.width > 0 && limit.params.sketch.depth > 0 &&
         limit.params.sketch.depth <= kMaxSketchDepth;
}

std::vector<std::string> EventualEngine::sketchCellKeys(const SketchHasher& hasher,
                                                        const StoreLimit& limit) {
  const SketchParams& geometry = limit.params.sketch;
  const SketchCells cells = hasher.cells(limit.key, geometry.width, geometry.depth, 0, 0);
  std::string base = sketchTag(geometry);
  base += ':';
  base += hasher.fingerprint();
  base += ':';
  base += geometry.identity->key;  // names the rule and its geometry (w, d, ...)
  base += ':';
  std::vector<std::string> keys;
  keys.reserve(geometry.depth);
  for (std::uint32_t row = 0; row < geometry.depth; ++row) {
    keys.push_back(base + std::to_string(row) + '.' + std::to_string(cells.columns[row]));
  }
  return keys;
}

void EventualEngine::expand(const std::vector<EventualLimitRef>& limits,
                            std::vector<std::vector<std::string>>& cells,
                            std::vector<std::string_view>& lock_keys) const {
  const std::shared_ptr<const SketchHasher> hasher = sketchHasher();
  cells.assign(limits.size(), {});
  lock_keys.clear();
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const StoreLimit& limit = *limits[i].limit;
    if (hasher && isSketch(limit)) {
      cells[i] = sketchCellKeys(*hasher, limit);
      lock_keys.insert(lock_keys.end(), cells[i].begin(), cells[i].end());
    } else {
      lock_keys.push_back(limits[i].key());
    }
  }
}

std::vector<EventualEngine::Slot*> EventualEngine::cellSlots(const std::vector<std::string>& keys,
                                                             const LimitParams& sketch,
                                                             Micros now) {
  const LimitParams cell = eventual::sketchCellParams(sketch);
  std::vector<Slot*> slots;
  slots.reserve(keys.size());
  for (const std::string& key : keys) {
    Shard& shard = shardOf(key);
    Slot& slot = slotFor(shard, key, cell, now);
    touch(shard, slot, key, now);
    slots.push_back(&slot);
  }
  return slots;
}

namespace {

template <typename SlotT>
std::vector<const eventual::View*> constViews(const std::vector<SlotT*>& slots) {
  std::vector<const eventual::View*> views;
  views.reserve(slots.size());
  for (const SlotT* slot : slots) {
    views.push_back(&slot->view);
  }
  return views;
}

}  // namespace

void EventualEngine::chargeCells(const std::vector<Slot*>& cells, const LimitParams& sketch,
                                 std::int64_t cost, Micros now, bool reachable) {
  std::vector<eventual::View*> views;
  views.reserve(cells.size());
  for (Slot* slot : cells) {
    views.push_back(&slot->view);
  }
  const std::vector<std::int64_t> added = eventual::chargeSketch(views, sketch, now, cost);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    if (reachable && eventual::blindView(cells[i]->view, now, tuning_)) {
      cells[i]->view.blind += added[i];
    }
    total += added[i];
  }
  addPending(total);
}

bool EventualEngine::requestAllowed(const std::vector<EventualLimitRef>& limits,
                                    const std::vector<Outcome>& outcomes,
                                    const std::vector<int>& open_groups) {
  RequestVerdict verdict(open_groups);
  for (std::size_t i = 0; i < limits.size() && i < outcomes.size(); ++i) {
    verdict.add(*limits[i].limit, outcomes[i].allowed);
  }
  return verdict.allowed();
}

EventualEngine::Local EventualEngine::decideLocally(const std::vector<EventualLimitRef>& limits,
                                                    std::int64_t cost, bool charge, bool force,
                                                    const std::vector<int>& open_groups) {
  Local local;
  const Micros now = clock_.nowMicros();
  const bool reachable = usable_.load(std::memory_order_acquire);
  // A sketch limit is decided on its cells (docs/eventual.md, "sketch"): only then are keys
  // other than the limits' own locked, and vectors allocated.
  const bool sketches = std::any_of(limits.begin(), limits.end(),
                                    [](const EventualLimitRef& r) { return isSketch(*r.limit); });
  std::vector<std::vector<std::string>> cell_keys;
  std::vector<std::vector<Slot*>> cells;
  std::vector<std::string_view> lock_keys;
  if (sketches) {
    expand(limits, cell_keys, lock_keys);
    cells.resize(limits.size());
  }
  auto shard_of = [this](std::string_view key) -> Shard& { return shardOf(key); };
  std::optional<ShardLocks> locks;
  if (sketches) {
    locks.emplace(lock_keys, shard_of);
  } else {
    locks.emplace(limits, shard_of);
  }
  // Inline storage for the usual request of a few limits: no allocation per decision.
  boost::container::small_vector<Slot*, 4> slots;
  boost::container::small_vector<BucketState, 4> states;
  boost::container::small_vector<Evaluation, 4> evaluations;
  // Quota mode (request_verdict.hpp): the groups of the request's strict limits
  // (`open_groups`) may still pass.
  RequestVerdict verdict(open_groups);
  std::optional<Route> trip;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const EventualLimitRef& ref = limits[i];
    const std::int64_t limit_cost = ref.limit->costOr(cost);
    if (sketches && !cell_keys[i].empty()) {
      const LimitParams& params = ref.limit->params;
      cells[i] = cellSlots(cell_keys[i], params, now);
      const std::vector<const eventual::View*> views = constViews(cells[i]);
      const SketchEvaluation se = eventual::decideSketch(views, params, now, limit_cost);
      Evaluation e;
      e.outcome = se.outcome;
      states.push_back(BucketState{});
      evaluations.push_back(e);
      slots.push_back(nullptr);
      verdict.add(*ref.limit, e.outcome.allowed);
      if (!force && e.outcome.allowed && !trip) {
        const Route route =
            eventual::sketchRoute(views, params, now, limit_cost, tuning_, reachable);
        if (route == Route::kTight || eventual::sketchTooClose(views, se, now, tuning_)) {
          noteTight(cells[i].front()->view.tight, true);
          cells[i].front()->view.tight = true;
          trip = Route::kTight;
        } else if (route != Route::kLocal) {
          trip = route;
        }
      }
      continue;
    }
    Shard& shard = shardOf(ref.key());
    Slot& slot = slotFor(shard, ref, now);
    touch(shard, slot, ref.key(), now);
    states.push_back(eventual::merged(slot.view, slot.params, now));
    evaluations.push_back(sluice::evaluate(slot.params, states.back(), now, limit_cost));
    slots.push_back(&slot);
    const Evaluation& e = evaluations.back();
    // The view only ever under-counts (every entry is a lower bound of the real one), so
    // its denial is final whatever its age.
    verdict.add(*ref.limit, e.outcome.allowed);
    if (!force && e.outcome.allowed && !trip) {
      const Route route =
          eventual::route(slot.view, slot.params, now, limit_cost, tuning_, reachable);
      if (route != Route::kLocal) {
        trip = route;
      } else if (eventual::tooClose(slot.view, e, now, tuning_)) {
        slot.view.tight = true;
        noteTight(false, true);
        trip = Route::kTight;
      }
    }
  }
  const bool denied = !verdict.allowed();
  if (trip && !denied) {
    local.decided = false;
    local.reason = *trip;
    return local;
  }
  local.decided = true;
  local.allowed = !denied;
  local.outcomes.reserve(limits.size());
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const LimitParams& params = limits[i].limit->params;
    const bool sketch = slots[i] == nullptr;
    const bool limit_allowed = evaluations[i].outcome.allowed;
    if (denied && limit_allowed && !params.count_rejected) {
      // Not charged by a denied request: it answers with its bucket as it is (a check).
      local.outcomes.push_back(
          sketch ? eventual::decideSketch(constViews(cells[i]), params, now, 0).outcome
                 : sluice::evaluate(slots[i]->params, states[i], now, 0).outcome);
    } else {
      local.outcomes.push_back(evaluations[i].outcome);
    }
    // A request denied here is final: its count_rejected limits record the attempt even when
    // the caller would otherwise charge later (a mixed request).
    if (!charge && !(denied && params.count_rejected)) {
      continue;
    }
    const bool charged = (local.allowed && limit_allowed) || params.count_rejected;
    if (charged && sketch) {
      chargeCells(cells[i], params, limits[i].limit->costOr(cost), now, reachable);
    } else if (charged) {
      chargeOne(*slots[i], states[i], evaluations[i], limits[i].limit->costOr(cost), now,
                reachable);
    }
  }
  localDecisions(!reachable).inc();
  return local;
}

void EventualEngine::chargeLater(const std::vector<EventualLimitRef>& limits, std::int64_t cost,
                                 const std::vector<Outcome>& outcomes, bool request_allowed) {
  const Micros now = clock_.nowMicros();
  // As in decideLocally(): the cells' keys only when the request has a sketch limit.
  const bool sketches = std::any_of(limits.begin(), limits.end(),
                                    [](const EventualLimitRef& r) { return isSketch(*r.limit); });
  std::vector<std::vector<std::string>> cell_keys;
  std::vector<std::string_view> lock_keys;
  auto shard_of = [this](std::string_view key) -> Shard& { return shardOf(key); };
  std::optional<ShardLocks> locks;
  if (sketches) {
    expand(limits, cell_keys, lock_keys);
    locks.emplace(lock_keys, shard_of);
  } else {
    locks.emplace(limits, shard_of);
  }
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const EventualLimitRef& ref = limits[i];
    if (!ref.limit->params.count_rejected &&
        (!request_allowed || (i < outcomes.size() && !outcomes[i].allowed))) {
      // A denied request charges only count_rejected limits; a quota-mode limit that denied
      // in a request another group allowed is not charged either.
      continue;
    }
    const std::int64_t limit_cost = ref.limit->costOr(cost);
    if (sketches && !cell_keys[i].empty()) {
      // Allowed on what the cells said then: charged (conservatively) whatever they say now.
      chargeCells(cellSlots(cell_keys[i], ref.limit->params, now), ref.limit->params, limit_cost,
                  now, usable_.load(std::memory_order_acquire));
      continue;
    }
    Shard& shard = shardOf(ref.key());
    Slot& slot = slotFor(shard, ref, now);
    touch(shard, slot, ref.key(), now);
    const BucketState state = eventual::merged(slot.view, slot.params, now);
    Evaluation e = sluice::evaluate(slot.params, state, now, limit_cost);
    if (e.outcome.allowed) {
      chargeOne(slot, state, e, limit_cost, now, usable_.load(std::memory_order_acquire));
    } else if (limit_cost > 0) {
      // Another request took the last units while the strict limits were being asked: this
      // one was allowed on what the view said then, so it is charged all the same.
      if (slot.params.algorithm == Algorithm::kTokenBucket) {
        slot.view.local_tat = eventual::advanceTat(state, slot.params, now, limit_cost);
      }
      slot.view.cur.own += limit_cost;
      addPending(limit_cost);
    }
  }
}

void EventualEngine::chargeOne(Slot& slot, const BucketState& state, const Evaluation& evaluation,
                               std::int64_t cost, Micros now, bool reachable) {
  const std::int64_t added = eventual::charge(slot.view, slot.params, state, evaluation, cost);
  if (reachable && eventual::blindView(slot.view, now, tuning_)) {
    slot.view.blind += added;
  }
  addPending(added);
}

std::string EventualEngine::hashKey(const std::string& key, std::int64_t window,
                                    const LimitParams& params) const {
  std::string hash = key;
  hash += ":e";
  if (isWindowed(params)) {
    hash += std::to_string(window);
  }
  return hash;
}

void EventualEngine::appendEntry(Slot& slot, ScriptOp op, std::int64_t cost, bool shadow,
                                 int quota_group, std::vector<std::string>& keys,
                                 std::vector<std::string>& args) const {
  const eventual::View& view = slot.view;
  const LimitParams& p = slot.params;
  const std::int64_t window = view.cur.index;
  if (slot.hashes_window != window || slot.hash_cur.empty()) {
    slot.hashes_window = window;
    slot.hash_cur = hashKey(slot.redis_key, window, p);
    slot.hash_prev = isWindowed(p) ? hashKey(slot.redis_key, window - 1, p) : slot.hash_cur;
  }
  keys.push_back(slot.hash_cur);
  keys.push_back(slot.hash_prev);
  const bool prev_pending = view.prev.index == window - 1 && view.prev.unsent() > 0;
  args.push_back(std::to_string(static_cast<int>(op)));
  args.push_back(std::to_string(static_cast<int>(p.algorithm)));
  args.push_back(std::to_string(p.limit));
  args.push_back(std::to_string(p.window_us));
  args.push_back(std::to_string(p.burst));
  args.push_back(std::to_string(view.cur.own));
  args.push_back(std::to_string(prev_pending ? view.prev.own : 0));
  args.push_back(std::to_string(view.cur.own_acked));
  args.push_back(std::to_string(std::max<std::int64_t>(cost, 0)));
  args.push_back(std::to_string((p.count_rejected ? 1 : 0) | (shadow ? 2 : 0) |
                                (std::max(quota_group, -1) + 1) * 4));
  args.push_back(std::to_string(view.redis_tat.a));
  args.push_back(std::to_string(view.redis_tat.b));
}

void EventualEngine::buildCall(const std::vector<EventualLimitRef>& limits, ScriptOp op,
                               std::int64_t cost, Micros now, std::vector<std::string>& keys,
                               std::vector<std::string>& args) {
  std::vector<std::vector<std::string>> cell_keys;
  std::vector<std::string_view> lock_keys;
  expand(limits, cell_keys, lock_keys);
  keys.reserve(lock_keys.size() * 2);
  args.reserve(2 + lock_keys.size() * eventual::kScriptStride);
  args.push_back(std::to_string(now));
  args.push_back(entry_);
  ShardLocks locks(lock_keys, [this](std::string_view key) -> Shard& { return shardOf(key); });
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const EventualLimitRef& ref = limits[i];
    if (!cell_keys[i].empty()) {
      // A sketch: one entry per cell, decided together at the last one (op kSketchCell), or
      // synced as counters.
      const LimitParams cell = eventual::sketchCellParams(ref.limit->params);
      const std::size_t depth = cell_keys[i].size();
      for (std::size_t row = 0; row < depth; ++row) {
        const std::string& key = cell_keys[i][row];
        Slot& slot = slotFor(shardOf(key), key, cell, now);
        const ScriptOp cell_op = op == ScriptOp::kDecide ? ScriptOp::kSketchCell : op;
        appendEntry(slot, cell_op, ref.limit->costOr(cost), ref.limit->shadow,
                    ref.limit->quota_group, keys, args);
        if (cell_op == ScriptOp::kSketchCell) {
          const std::size_t b = args.size() - eventual::kScriptStride;
          args[b + 4] = std::to_string(row);    // burst: the cell's row
          args[b + 7] = std::to_string(depth);  // acked: the sketch's depth
        }
      }
      continue;
    }
    Shard& shard = shardOf(ref.key());
    Slot& slot = slotFor(shard, ref, now);
    appendEntry(slot, op, ref.limit->costOr(cost), ref.limit->shadow, ref.limit->quota_group, keys,
                args);
  }
}

void EventualEngine::mergeReading(Slot& slot, const eventual::KeyReading& reading, Micros now,
                                  Micros latency) {
  const std::int64_t before = unsentOf(slot.view);
  const bool was = slot.view.tight;
  eventual::Tuning tuning = tuning_;
  if (!regions_.empty()) {
    tuning.region_delay_us =
        2 * tuning_.sync_interval_us + replication_rtt_us_.load(std::memory_order_relaxed);
  }
  eventual::merge(slot.view, slot.params, reading, now, latency, tuning);
  noteTight(was, slot.view.tight);
  addPending(unsentOf(slot.view) - before);
}

void EventualEngine::absorbOne(Shard& shard, Slot& slot, std::string_view key, ScriptOp op,
                               const std::int64_t* v, Micros sent_at, Micros now) {
  // The window the call was built for is the one of its send time.
  const std::int64_t window =
      isWindowed(slot.params) ? floorDiv(sent_at, slot.params.window_us) : 0;
  eventual::KeyReading reading = readingOf(v, window);
  const std::int64_t charged = op == ScriptOp::kDecide ? v[kCharged] : 0;
  if (charged > 0) {
    // Redis holds the charge already: count it as own and confirmed.
    eventual::WindowView* target = nullptr;
    if (slot.view.cur.index == window || !isWindowed(slot.params)) {
      target = &slot.view.cur;
    } else if (slot.view.prev.index == window) {
      target = &slot.view.prev;
    }
    if (target != nullptr) {
      target->own += charged;
      target->own_acked += charged;
    }
    reading.own += charged;
  }
  mergeReading(slot, reading, now, now - sent_at);
  touch(shard, slot, key, now);
}

Status EventualEngine::absorb(const std::vector<EventualLimitRef>& limits, ScriptOp op,
                              const redis::Reply& reply, Micros sent_at, StoreResponse* response) {
  std::vector<std::vector<std::string>> cell_keys;
  std::vector<std::string_view> lock_keys;
  expand(limits, cell_keys, lock_keys);
  std::vector<std::int64_t> values;
  if (auto status = parseReply(reply, lock_keys.size(), values); !status) {
    return status;
  }
  const Micros now = clock_.nowMicros();
  if (response != nullptr) {
    response->outcomes.assign(limits.size(), Outcome{});
    response->allowed = true;
  }
  ShardLocks locks(lock_keys, [this](std::string_view key) -> Shard& { return shardOf(key); });
  std::size_t entry = 0;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const EventualLimitRef& ref = limits[i];
    const std::int64_t* first = &values[entry * eventual::kScriptReplyStride];
    if (!cell_keys[i].empty()) {
      const LimitParams cell = eventual::sketchCellParams(ref.limit->params);
      for (const std::string& key : cell_keys[i]) {
        const std::int64_t* v = &values[entry * eventual::kScriptReplyStride];
        Shard& shard = shardOf(key);
        absorbOne(shard, slotFor(shard, key, cell, now), key, op, v, sent_at, now);
        ++entry;
      }
    } else {
      Shard& shard = shardOf(ref.key());
      absorbOne(shard, slotFor(shard, ref, now), ref.key(), op, first, sent_at, now);
      ++entry;
    }
    if (response != nullptr) {
      // A sketch's cells carry the client's decision alike: the first one's is the answer.
      Outcome& o = response->outcomes[i];
      o.allowed = first[kAllowed] != 0;
      o.remaining = first[kRemaining];
      o.reset_after_us = first[kResetAfter];
      o.retry_after_us = first[kRetryAfter];
      o.never = first[kNever] != 0;
    }
  }
  if (response != nullptr) {
    // The script charged with the store's semantics (quota groups included); the answer
    // follows the same rule on the same outcomes.
    response->allowed = requestAllowed(limits, response->outcomes, {});
  }
  return {};
}

// ---------------------------------------------------------------------------------------
// The sync loop (engine thread)

void EventualEngine::tick() {
  if (stopped_.load(std::memory_order_acquire)) {
    return;
  }
  sync();
  for (auto& region : regions_) {
    replicate(*region);
  }
  // With regions the sketch seed may live in another region's Redis: it is read as soon as
  // that link is up rather than by the first sketch request (which would fail meanwhile).
  if (Region* home = seedRegion();
      home != nullptr && !seed_in_flight_ && !sketchHasher() && home->backend->ready()) {
    seed_in_flight_ = true;
    fetchSketchSeed([this](const Status&) { seed_in_flight_ = false; });
  }
  sweep();
  const std::int64_t pending = pending_.load(std::memory_order_relaxed);
  pending_gauge_.set(static_cast<double>(pending));
  const Micros steady = steadyMicros();
  if (pending <= 0 || last_confirmed_ == 0) {
    // Nothing waits for Redis: the lag starts when hits are next left unconfirmed.
    last_confirmed_ = steady;
  }
  sync_lag_.set(pending <= 0 ? 0.0
                             : static_cast<double>(steady - last_confirmed_) /
                                   static_cast<double>(kMicrosPerSecond));
  keys_gauge_.set(static_cast<double>(size_.load(std::memory_order_relaxed)));
  timer_->expires_after(options_.sync_interval);
  timer_->async_wait([this](const boost::system::error_code& ec) {
    if (!ec) {
      tick();
    }
  });
}

void EventualEngine::setReachable(bool reachable, const std::string& why, bool usable) {
  usable_.store(usable, std::memory_order_release);
  const bool was = reachable_.exchange(reachable, std::memory_order_acq_rel);
  if (was == reachable) {
    return;
  }
  if (!reachable) {
    unreachable_.inc();
    spdlog::warn("eventual limits: Redis unreachable ({}); deciding locally, keeping the hits",
                 why);
    unreachable_logged_ = true;
  } else if (unreachable_logged_) {
    spdlog::info("eventual limits: Redis reachable again; sending the kept hits");
  }
}

void EventualEngine::sync() {
  if (sync_in_flight_) {
    return;
  }
  if (!backend_->ready()) {
    setReachable(false, backend_->clustered() ? "no slot map" : "not connected");
    return;
  }
  if (const std::uint64_t connects = backend_->connectCount(); connects != connects_seen_) {
    if (connects_seen_ != 0) {
      resendAll();
    }
    connects_seen_ = connects;
  }
  // One call per kEntriesPerCall keys; on a cluster, per master: its keys (of many slots) go
  // in the arguments of a call without declared keys (a script may declare keys of one slot
  // only), sent to that master.
  const bool clustered = backend_->clustered();
  struct Call {
    std::vector<std::string> keys;
    std::vector<std::string> args;
    std::shared_ptr<std::vector<SyncEntry>> entries;
    int slot = 0;  ///< a cluster: the slot of its first key (routes the call to its master)
  };
  const Micros now = clock_.nowMicros();
  std::vector<Call> calls;
  std::unordered_map<int, Call> open;  // by master (one node: master 0)
  auto flush = [&](Call& call) {
    if (!call.entries || call.entries->empty()) {
      return;
    }
    if (clustered) {
      call.args.insert(call.args.end(), std::make_move_iterator(call.keys.begin()),
                       std::make_move_iterator(call.keys.end()));
      call.keys.clear();
    }
    calls.push_back(std::move(call));
    call = Call{};
  };
  std::vector<std::string> waiting;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    waiting.clear();
    for (std::string& key : shard.queue) {
      auto it = shard.slots.find(key);
      if (it == shard.slots.end()) {
        continue;
      }
      Slot& slot = it->second;
      if (mayWait(slot, now)) {
        waiting.push_back(std::move(key));
        continue;
      }
      slot.queued = false;
      slot.synced_at = now;
      if (const std::int64_t dropped = eventual::roll(slot.view, slot.params, now); dropped > 0) {
        dropped_hits_.inc(static_cast<std::uint64_t>(dropped));
        addPending(-dropped);
      }
      int master = 0;
      if (clustered) {
        if (slot.cluster_slot < 0) {
          slot.cluster_slot = redis::keyHashSlot(slot.redis_key);
        }
        master = backend_->masterOf(slot.cluster_slot);
      }
      Call& call = open[master];
      if (!call.entries) {
        // Reserved once per call: growing these vectors entry by entry moved every string.
        call.entries = std::make_shared<std::vector<SyncEntry>>();
        call.entries->reserve(kEntriesPerCall);
        call.keys.reserve(2 * kEntriesPerCall);
        call.args.reserve(2 + kEntriesPerCall * (eventual::kScriptStride + (clustered ? 2 : 0)));
        call.args.push_back(std::to_string(now));
        call.args.push_back(entry_);
        call.slot = std::max(slot.cluster_slot, 0);
      }
      appendEntry(slot, ScriptOp::kSync, 0, false, -1, call.keys, call.args);
      call.entries->push_back(SyncEntry{key, slot.redis_key, slot.params, slot.view.cur.index});
      if (call.entries->size() >= kEntriesPerCall) {
        flush(call);
      }
    }
    shard.queue.swap(waiting);
  }
  for (auto& [master, call] : open) {
    flush(call);
  }
  keys_synced_.set(0);
  if (calls.empty()) {
    setReachable(true, "");
    return;
  }
  std::size_t total = 0;
  for (const Call& call : calls) {
    total += call.entries->size();
  }
  keys_synced_.set(static_cast<double>(total));
  keys_synced_total_.inc(total);
  const auto started = std::chrono::steady_clock::now();
  // A sync that takes longer fails (nothing is lost: the own counts go out again with the
  // next one); many keys on a loaded Redis take longer, so they widen the deadline.
  const auto timeout = std::max(std::chrono::milliseconds(200), options_.sync_interval * 4) +
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::microseconds(100 * static_cast<std::int64_t>(total)));
  sync_in_flight_ = true;
  auto outstanding = std::make_shared<std::size_t>(calls.size());
  auto failed = std::make_shared<bool>(false);
  auto succeeded = std::make_shared<bool>(false);
  for (Call& call : calls) {
    auto on_reply = [this, batch = call.entries, started, now, outstanding, failed,
                     succeeded](Result<redis::Reply> reply) {
      const bool ok = onSynced(batch, std::move(reply), started, now);
      (ok ? *succeeded : *failed) = true;
      if (--*outstanding == 0) {
        sync_in_flight_ = false;
        if (*failed) {
          syncs_failed_.inc();
          if (*succeeded && backend_->clustered()) {
            // Some masters answered: their keys keep their round trips.
            setReachable(false, "a master did not answer the sync", true);
          }
        } else {
          syncs_ok_.inc();
          last_confirmed_ = steadyMicros();
          setReachable(true, "");
        }
        sync_duration_.observe(
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
      }
    };
    if (clustered) {
      backend_->evalScriptOnMasterOf(call.slot, std::move(call.args), timeout, std::move(on_reply));
    } else {
      backend_->evalScript(std::move(call.keys), std::move(call.args), timeout,
                           std::move(on_reply));
    }
  }
}

bool EventualEngine::mayWait(const Slot& slot, Micros now) const {
  // A cold key far from its limit goes out with a later sync, while this sidecar's unsent hits
  // on it stay within its blind allowance: other sidecars then miss at most that many of its
  // hits (the bound of docs/eventual.md), and many keys decided a few times a second cost Redis
  // and this thread about one script step per key per max_wait instead of one per decision.
  if (stopped_.load(std::memory_order_acquire)) {
    return false;  // the last sync before a shutdown sends everything
  }
  return eventual::mayDefer(slot.view, slot.params, slot.synced_at, now, tuning_);
}

void EventualEngine::resendAll() {
  // A new connection may be to a Redis that restarted empty: every own count it had
  // confirmed is sent again (the counts are cumulative, so a Redis that kept them changes
  // nothing), so a restart loses no more than the sidecars' last interval.
  std::size_t keys = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    for (auto& [key, slot] : shard.slots) {
      if (slot.view.cur.own <= 0 && slot.view.prev.own <= 0) {
        continue;
      }
      const std::int64_t before = unsentOf(slot.view);
      slot.view.cur.own_acked = 0;
      slot.view.prev.own_acked = 0;
      addPending(unsentOf(slot.view) - before);
      touch(shard, slot, key, slot.last_used);
      ++keys;
    }
  }
  if (keys > 0) {
    spdlog::info("eventual limits: Redis connection renewed; sending the own counts of {} keys",
                 keys);
  }
}

bool EventualEngine::onSynced(std::shared_ptr<std::vector<SyncEntry>> entries,
                              Result<redis::Reply> reply,
                              std::chrono::steady_clock::time_point /*started*/, Micros sent_at) {
  std::vector<std::int64_t> values;
  Status shape = reply ? parseReply(*reply, entries->size(), values) : Status(reply.error());
  const Micros now = clock_.nowMicros();
  if (!shape) {
    // A cluster's sync is judged when every master has answered (sync()): one master's
    // failure leaves the others' keys their round trips meanwhile.
    setReachable(false, shape.error().message,
                 backend_->clustered() && usable_.load(std::memory_order_acquire));
    // Nothing is lost: the own counts are cumulative and go out again with the next sync.
    for (const SyncEntry& e : *entries) {
      Shard& shard = shardOf(e.key);
      std::lock_guard lock(shard.mutex);
      auto it = shard.slots.find(e.key);
      if (it != shard.slots.end()) {
        touch(shard, it->second, e.key, it->second.last_used);
      }
    }
    return false;
  }
  for (std::size_t i = 0; i < entries->size(); ++i) {
    const SyncEntry& e = (*entries)[i];
    const std::int64_t* v = &values[i * eventual::kScriptReplyStride];
    eventual::KeyReading reading = readingOf(v, e.window);
    {
      Shard& shard = shardOf(e.key);
      std::lock_guard lock(shard.mutex);
      auto it = shard.slots.find(e.key);
      if (it != shard.slots.end() && it->second.params.window_us == e.params.window_us) {
        Slot& slot = it->second;
        mergeReading(slot, reading, now, now - sent_at);
        if (unsentOf(slot.view) > 0) {
          touch(shard, slot, e.key, slot.last_used);
        }
      }
    }
    if (!regions_.empty()) {
      enqueueReplica(hashKey(e.redis_key, e.window, e.params), e.params, v[kRegion]);
      if (isWindowed(e.params) && v[kPrevRegion] > 0) {
        enqueueReplica(hashKey(e.redis_key, e.window - 1, e.params), e.params, v[kPrevRegion]);
      }
    }
  }
  return true;
}

void EventualEngine::enqueueReplica(const std::string& hash, const LimitParams& params,
                                    std::int64_t value) {
  if (value <= 0) {
    return;
  }
  for (auto& region : regions_) {
    auto confirmed = region->confirmed.find(hash);
    if (confirmed != region->confirmed.end() && confirmed->second.value >= value) {
      continue;
    }
    auto it = region->queue.find(hash);
    if (it == region->queue.end()) {
      if (region->queue.size() >= options_.replication_queue) {
        region->dropped->inc();
        continue;
      }
      it = region->queue.emplace(hash, Replica{hash, params, 0, 0, steadyMicros()}).first;
    }
    it->second.value = std::max(it->second.value, value);
    it->second.params = params;
  }
}

void EventualEngine::replicate(Region& region) {
  const Micros steady = steadyMicros();
  Micros oldest = steady;
  for (const auto& [hash, replica] : region.queue) {
    oldest = std::min(oldest, replica.since);
    if (oldest < steady - 3600 * kMicrosPerSecond) {
      break;
    }
  }
  region.lag->set(region.queue.empty() ? 0.0
                                       : static_cast<double>(steady - oldest) /
                                             static_cast<double>(kMicrosPerSecond));
  redis::RedisBackend& backend = *region.backend;
  if (backend.ready()) {
    if (const std::uint64_t connects = backend.connectCount(); connects != region.connects_seen) {
      if (region.connects_seen != 0) {
        resendConfirmed(region);
      }
      region.connects_seen = connects;
    }
  }
  if (region.in_flight) {
    return;
  }
  const bool clustered = backend.clustered();
  if (!backend.ready()) {
    setRegionReachable(region, false, clustered ? "no slot map" : "not connected");
    return;
  }
  if (region.queue.empty()) {
    // Connected with nothing to send (a failed send leaves its updates queued). A cluster:
    // every master of its slot map connected and answering.
    const bool up = !clustered || backend.health() == StoreHealth::kHealthy;
    setRegionReachable(region, up, up ? "" : "a master of its cluster is not connected");
    return;
  }
  // One call per kReplicasPerCall keys; a cluster: per master of their slots, the keys (of
  // many slots) named in the arguments of a call without declared keys, as the sync does.
  // A key whose slot moved meanwhile fails its call ("non local key"): the router reads the
  // topology again and the update, back in the queue, goes to the new master next time.
  struct Call {
    std::vector<std::string> keys;
    std::vector<std::string> args;
    std::size_t first = 0;  ///< its replicas: (*sent)[first, first + count)
    std::size_t count = 0;
    int slot = 0;  ///< a cluster: the slot of its first key
  };
  const Micros now = clock_.nowMicros();
  const std::string writer = "r" + options_.region;
  std::unordered_map<int, std::vector<Replica>> by_master;  // one node: master 0
  std::size_t taken = 0;
  for (auto it = region.queue.begin(); it != region.queue.end() && taken < kReplicasPerTick;) {
    int master = 0;
    if (clustered) {
      master = backend.masterOf(redis::keyHashSlot(it->second.hash));
      if (master < 0) {
        ++it;  // its slot has no master now: kept for a later step
        continue;
      }
    }
    Replica r = std::move(it->second);
    it = region.queue.erase(it);
    auto confirmed = region.confirmed.find(r.hash);
    r.acked = confirmed != region.confirmed.end() ? confirmed->second.value : 0;
    by_master[master].push_back(std::move(r));
    ++taken;
  }
  if (taken == 0) {
    setRegionReachable(region, false, "no master for the slots of its updates");
    return;
  }
  auto sent = std::make_shared<std::vector<Replica>>();
  sent->reserve(taken);
  std::vector<Call> calls;
  for (auto& [master, replicas] : by_master) {
    for (std::size_t i = 0; i < replicas.size(); ++i) {
      Replica& r = replicas[i];
      if (i % kReplicasPerCall == 0) {
        Call& call = calls.emplace_back();
        call.first = sent->size();
        call.slot = clustered ? redis::keyHashSlot(r.hash) : 0;
        call.args.reserve(2 + std::min(kReplicasPerCall, replicas.size() - i) *
                                  (eventual::kScriptStride + 2));
        call.args.push_back(std::to_string(now));
        call.args.push_back(writer);
      }
      Call& call = calls.back();
      call.keys.push_back(r.hash);
      call.keys.push_back(r.hash);
      const LimitParams& p = r.params;
      for (std::int64_t value :
           {std::int64_t{0}, static_cast<std::int64_t>(p.algorithm), p.limit, p.window_us, p.burst,
            r.value, std::int64_t{0}, r.acked, std::int64_t{0}, std::int64_t{0}, std::int64_t{0},
            std::int64_t{0}}) {
        call.args.push_back(std::to_string(value));
      }
      ++call.count;
      sent->push_back(std::move(r));
    }
  }
  region.in_flight = true;
  auto outstanding = std::make_shared<std::size_t>(calls.size());
  auto failure = std::make_shared<std::string>();  // the first failed call's reason
  const Micros sent_steady = steadyMicros();
  const auto timeout = std::max(std::chrono::milliseconds(200), options_.sync_interval * 4);
  for (Call& call : calls) {
    auto on_reply = [this, &region, sent, first = call.first, count = call.count, outstanding,
                     failure, sent_steady](Result<redis::Reply> reply) {
      std::vector<std::int64_t> values;
      const bool ok = reply && parseReply(*reply, count, values).ok();
      if (ok) {
        // The slowest region counts; an old peak fades by a quarter per reply.
        const Micros rtt = steadyMicros() - sent_steady;
        const Micros old = replication_rtt_us_.load(std::memory_order_relaxed);
        replication_rtt_us_.store(std::max(rtt, old - old / 4), std::memory_order_relaxed);
      } else if (failure->empty()) {
        *failure = reply ? "unexpected reply" : reply.error().message;
      }
      for (std::size_t i = first; i < first + count; ++i) {
        Replica& r = (*sent)[i];
        if (ok) {
          auto [c, fresh] = region.confirmed.try_emplace(r.hash, r);
          c->second.value = std::max(c->second.value, r.value);
          c->second.params = r.params;
          continue;
        }
        // Back into the queue unless a newer value of the same key is already there.
        auto [it, inserted] = region.queue.try_emplace(r.hash, r);
        if (!inserted) {
          it->second.value = std::max(it->second.value, r.value);
          it->second.since = std::min(it->second.since, r.since);
        }
      }
      if (region.confirmed.size() > options_.replication_queue) {
        region.confirmed.clear();
      }
      if (--*outstanding == 0) {
        // Reachable when every call of the step (every master of a cluster) answered.
        setRegionReachable(region, failure->empty(), *failure);
        region.in_flight = false;
      }
    };
    if (clustered) {
      call.args.insert(call.args.end(), std::make_move_iterator(call.keys.begin()),
                       std::make_move_iterator(call.keys.end()));
      region.backend->evalScriptOnMasterOf(call.slot, std::move(call.args), timeout,
                                           std::move(on_reply));
    } else {
      region.backend->evalScript(std::move(call.keys), std::move(call.args), timeout,
                                 std::move(on_reply));
    }
  }
}

void EventualEngine::setRegionReachable(Region& region, bool reachable, const std::string& why) {
  const bool was = region.reachable.exchange(reachable, std::memory_order_relaxed);
  if (was == reachable) {
    return;
  }
  if (!reachable) {
    if (region.seen_reachable) {
      region.unreachable->inc();
      spdlog::warn("eventual limits: region {} unreachable ({}); its updates wait",
                   region.config.name, why);
    }
  } else if (region.seen_reachable) {
    spdlog::info("eventual limits: region {} reachable again; sending its updates",
                 region.config.name);
  }
  region.seen_reachable = region.seen_reachable || reachable;
}

void EventualEngine::resendConfirmed(Region& region) {
  // A renewed connection may lead to a Redis that lost what it confirmed (a restart, a failover
  // to a replica that lagged, a reply that came back for a write that did not stay): the values
  // are cumulative, so each is sent again (a Redis that kept them changes nothing). Without this
  // a key that gets no new hits after the link returns would never be replicated again.
  const Micros steady = steadyMicros();
  std::size_t keys = 0;
  for (const auto& [hash, confirmed] : region.confirmed) {
    auto it = region.queue.find(hash);
    if (it == region.queue.end()) {
      if (region.queue.size() >= options_.replication_queue) {
        region.dropped->inc();
        continue;
      }
      it = region.queue.emplace(hash, Replica{hash, confirmed.params, 0, 0, steady}).first;
    }
    it->second.value = std::max(it->second.value, confirmed.value);
    ++keys;
  }
  if (keys > 0) {
    spdlog::info("eventual limits: connection to region {} renewed; sending the values of {} keys",
                 region.config.name, keys);
  }
}

void EventualEngine::sweep() {
  Shard& shard = shards_[sweep_shard_];
  sweep_shard_ = (sweep_shard_ + 1) % kShards;
  const Micros now = clock_.nowMicros();
  std::lock_guard lock(shard.mutex);
  for (auto it = shard.slots.begin(); it != shard.slots.end();) {
    const Slot& slot = it->second;
    const Micros idle_after =
        std::max<Micros>(10 * tuning_.sync_interval_us,
                         std::min<Micros>(2 * slot.params.window_us, 60 * kMicrosPerSecond));
    const bool tat_busy = slot.params.algorithm == Algorithm::kTokenBucket &&
                          std::max(slot.view.redis_tat.a, slot.view.local_tat.a) > now;
    if (!slot.queued && unsentOf(slot.view) == 0 && !tat_busy &&
        now - slot.last_used > idle_after) {
      it = shard.slots.erase(it);
      size_.fetch_sub(1, std::memory_order_relaxed);
    } else {
      ++it;
    }
  }
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

EventualEnginePtr makeEventualEngine(const EventualOptions& options, const RedisOptions& local,
                                     const Clock& clock, Metrics& metrics) {
  auto engine = std::make_shared<EventualEngine>(options, local, clock, metrics);
  engine->start();
  return engine;
}

void stopEventualEngine(EventualEngine& engine) { engine.stop(); }

std::string eventualStatusJson(const EventualEngine& engine) { return engine.statusJson(); }

}  // namespace sluice
