#include "sluice/store/redis_store.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/common/object_pool.hpp"
#include "sluice/limiter/sketch.hpp"
#include "sluice/rules/rules.hpp"
#include "store/redis/cluster_slots.hpp"
#include "store/redis/key_reset.hpp"
#include "store/redis/lua_scripts.hpp"
#include "store/redis/over_limit_cache.hpp"
#include "store/redis/redis_bans.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/redis_errors.hpp"
#include "store/redis/redis_leases.hpp"
#include "store/redis/redis_overrides.hpp"
#include "store/redis/redis_sketch.hpp"
#include "store/redis/redis_store_internal.hpp"
#include "store/redis/script_limit.hpp"
#include "store/redis/script_reply.hpp"
#include "store/store_health.hpp"

namespace sluice {

namespace net = boost::asio;

namespace {

constexpr std::string_view kProductionPrelude = "00_time_redis";
constexpr std::string_view kTestPrelude = "00_time_test";
constexpr std::string_view kMainScript = "99_evaluate";
constexpr int kValuesPerLimit = 9;
constexpr int kFlagCountRejected = 1;
constexpr int kFlagShadow = 2;
constexpr int kFlagEvery = 4;      // Charge::kEvery
constexpr int kFlagReport = 8;     // Charge::kReport
constexpr int kFlagRefund = 16;    // StoreLimit::refund
constexpr int kFlagOverride = 32;  // x the ARGV index of the rule's override field

class RedisStore final : public Store, public std::enable_shared_from_this<RedisStore> {
 public:
  RedisStore(std::shared_ptr<redis::RedisBackend> backend, const RedisOptions& options,
             Metrics& metrics, std::string_view kind, const Clock& clock)
      : options_(options),
        metrics_(metrics),
        prefix_(BucketKey::redisPrefix(options.key_prefix)),
        kind_(kind),
        clock_(clock),
        script_clock_(options.script_time == ScriptTime::kStoreClock),
        duration_(redis::describeRedisMetrics(metrics).histogram("store_call_duration_seconds",
                                                                 {{"store", kind_}})),
        cache_hits_(metrics.counter("local_cache_hits_total")),
        script_calls_(metrics.counter("redis_script_calls_total", {{"store", kind_}})),
        health_group_(store::StoreHealthGroup::of(metrics, kind_, clock)),
        backend_(std::move(backend)),
        clustered_(backend_->clustered()),
        cache_(options.local_cache_max_keys),
        in_flight_by_slot_(clustered_ ? redis::kClusterSlots : 1, 0) {}

  ~RedisStore() override {
    // Requests still waiting for their batch's turn end (at shutdown): each fails once.
    for (BatchedCall& call : single_) {
      call.done(redis::redisError(redis::FailureSource::kNotReady, 0, "the store is closing"));
    }
    for (auto& [slot, batch] : batches_) {
      for (BatchedCall& call : batch) {
        call.done(redis::redisError(redis::FailureSource::kNotReady, 0, "the store is closing"));
      }
    }
  }

  void evaluate(const StoreRequest& request, Callback done) override {
    if (request.limits.empty()) {
      done(StoreResponse{});
      return;
    }
    const bool has_sketch = std::any_of(request.limits.begin(), request.limits.end(), isSketch);
    if (has_sketch && !sketch_hasher_) {
      fetchSketchSeed(request, std::move(done));
      return;
    }
    const bool has_lease = std::any_of(request.limits.begin(), request.limits.end(), isLease);
    // A concurrency limit's denial ends with any release: never cached, never from the cache.
    // A reservation step changes what its buckets hold, and must reach Redis.
    const bool plain = !has_lease && request.hold.op == HoldOp::kNone &&
                       std::none_of(request.limits.begin(), request.limits.end(),
                                    [](const StoreLimit& l) { return l.refund; });
    const bool decides_only = plain && request.charge == Charge::kAllOrNothing;
    // Envoy's counting charges a denial, but not a ban's refusal (docs/bans.md): a ban the
    // cache knows answers such a request too, and its answers teach the cache their bans.
    const bool bans_only = plain && request.charge == Charge::kEvery;
    if (options_.local_cache && (decides_only || bans_only) &&
        answerFromCache(request, bans_only, done)) {
      return;
    }
    if (options_.local_cache && !decides_only) {
      // Refunds, reports and counted denials change buckets a cached denial describes; the
      // next request on them asks Redis.
      for (const StoreLimit& limit : request.limits) {
        if (!cache_.empty()) {
          cache_.forget(BucketKey::redisKey(prefix_, limit.key));
        }
      }
    }
    const Micros sent_at = clock_.nowMicros();
    std::vector<std::string> keys = takeList();
    keys.reserve(request.limits.size());
    // The argument list describes the limits and costs, not the client (who is in the
    // keys): the requests of one rule share one list, built once (argumentsOf).
    // A lease number and a reservation step are the request's own: such lists are not shared.
    ArgList args = has_sketch || has_lease || request.hold.op != HoldOp::kNone
                       ? buildArguments(request, sent_at, keys)
                       : argumentsOf(request, sent_at, keys);
    // What the answer needs, in pooled storage: the callback below captures two pointers
    // (std::function's small buffer) and nothing here allocates once the thread is warm.
    InFlight* call = in_flight_.take();
    call->n = request.limits.size();
    call->sent_at = sent_at;
    call->done = std::move(done);
    // The reply handler needs the keys and limits for the local cache only.
    call->cached = options_.local_cache && (decides_only || bans_only);
    if (call->cached) {
      call->cache.bans_only = bans_only;
      std::vector<std::string>& cache_keys = call->cache.keys;
      cache_keys.resize(request.limits.size());
      for (std::size_t i = 0; i < request.limits.size(); ++i) {
        // Per client, also for a sketch (whose Redis keys are shared by every client).
        BucketKey::assignRedisKey(cache_keys[i], prefix_, request.limits[i].key);
      }
      call->cache.limits.clear();
      for (const StoreLimit& limit : request.limits) {
        call->cache.limits.push_back({limit.params, limit.costOr(request.cost),
                                      limit.shadow || limit.quota_group >= 0,
                                      limit.override_rule != nullptr});
      }
    }
    // The sketches' gauges, fed from the script's reply (the window's totals in Redis).
    call->sketch_gauges.clear();
    if (has_sketch) {
      for (const StoreLimit& limit : request.limits) {
        if (isSketch(limit)) {
          call->sketch_gauges.push_back(&gaugesOf(limit));
        }
      }
    }
    call->started = clock_.monotonicMicros();
    submit(std::move(keys), std::move(args), call,
           [this, call](Result<redis::Reply> reply) { answer(*call, reply); });
  }

  void changeLease(const LeaseRequest& request, LeaseCallback done) override {
    redis::changeLeaseOnRedis(*backend_, prefix_, script_clock_ ? clock_.nowMicros() : 0, request,
                              options_.request_timeout, std::move(done));
  }

  void reset(const std::vector<std::string>& key_prefixes, ResetCallback done) override {
    cache_.clear();
    std::vector<std::string> prefixes;
    prefixes.reserve(key_prefixes.size());
    for (const auto& p : key_prefixes) {
      prefixes.push_back(BucketKey::redisKey(prefix_, p));
    }
    redis::unlinkKeysWithPrefixes(backend_, prefixes, options_.connect_timeout, std::move(done));
  }

  bool healthy() const override { return backend_->health() == StoreHealth::kHealthy; }

  void setOverride(const OverrideSlot& slot, StoredOverridePtr value, std::size_t max_overrides,
                   OverrideSetCallback done) override {
    cache_.clear();  // a cached denial may be one the override lifts
    redis::setOverrideIn(backend_, prefix_, slot, *value, max_overrides, options_.connect_timeout,
                         std::move(done));
  }

  void removeOverride(const OverrideSlot& slot, OverrideRemoveCallback done) override {
    cache_.clear();
    redis::removeOverrideIn(backend_, prefix_, slot, options_.connect_timeout, std::move(done));
  }

  void overridesChanged() override { cache_.clear(); }

  void listOverrides(OverrideListCallback done) override {
    redis::listOverridesIn(backend_, prefix_, options_.connect_timeout, std::move(done));
  }

  StoreHealth health() const override { return backend_->health(); }
  std::string_view kind() const override { return kind_; }
  bool holdsReservations() const override { return true; }

 private:
  struct InFlight;
  /// A request's script arguments, shared by the requests of one rule (argumentsOf).
  using ArgList = std::shared_ptr<const std::vector<std::string>>;

  /// One request's script call, waiting for the end of this event-loop turn.
  struct BatchedCall {
    std::vector<std::string> keys;
    ArgList args;
    InFlight* flight = nullptr;  ///< its request (answered through `done`; its deadline runs
                                 ///< from flight->started)
    redis::ReplyHandler done;
  };
  using Batch = std::vector<BatchedCall>;

  /// Sends one request's script call: alone when batching is off, else in the batch of its
  /// node (its hash slot in a cluster), which goes at the end of the event-loop turn in which
  /// fewer than max_batches_in_flight batches of that node (slot) await their answer, or as
  /// soon as it holds max_batch calls.
  void submit(std::vector<std::string> keys, ArgList args, InFlight* flight,
              redis::ReplyHandler done) {
    int slot = 0;
    bool batchable = options_.max_batch > 1;
    if (batchable && clustered_ && !keys.empty()) {
      slot = redis::keyHashSlot(keys.front());
      // Keys over several slots: alone, as before batching (the cluster refuses them).
      batchable = std::all_of(keys.begin() + 1, keys.end(), [slot](const std::string& key) {
        return redis::keyHashSlot(key) == slot;
      });
    }
    if (!batchable) {
      script_calls_.inc();
      // Encoded from the shared argument list: no copy of it.
      backend_->evalScript(redis::RespArgs::of(keys), redis::RespArgs::of(*args),
                           options_.request_timeout, std::move(done));
      return;
    }
    Batch& batch = clustered_ ? batches_[slot] : single_;
    batch.push_back({std::move(keys), std::move(args), flight, std::move(done)});
    if (batch.size() >= options_.max_batch) {
      Batch full;
      full.swap(batch);
      if (clustered_) {
        batches_.erase(slot);
      }
      sendAndKeep(full, slot);
      return;
    }
    if (!atInFlightBound(slot)) {
      postFlush();
    }
  }

  /// Posts flush() for the end of this turn, once.
  void postFlush() {
    if (!flush_posted_) {
      flush_posted_ = true;
      backend_->post([weak = weak_from_this()] {
        if (auto self = weak.lock()) {
          self->flush();
        }
      });
    }
  }

  /// The batch of a node (a cluster's slot; a single node's is slot 0) waits:
  /// max_batches_in_flight batches of it await their answer.
  bool atInFlightBound(int slot) const {
    return options_.max_batches_in_flight > 0 &&
           in_flight_by_slot_[static_cast<std::size_t>(slot)] >= options_.max_batches_in_flight;
  }

  /// The end of the turn: every open batch goes, but one whose node (slot) has
  /// max_batches_in_flight batches awaiting their answer, which grows until one is answered
  /// (batchAnswered).
  void flush() {
    flush_posted_ = false;
    if (!clustered_) {
      if (atInFlightBound(0)) {
        return;
      }
      Batch batch;
      batch.swap(single_);
      sendAndKeep(batch, 0);
      return;
    }
    auto batches = std::move(batches_);
    batches_.clear();
    for (auto& [slot, batch] : batches) {
      if (atInFlightBound(slot)) {
        // A call answered meanwhile may have opened this slot's batch again: the waiting
        // calls go first.
        Batch& waiting = batches_[slot];
        batch.insert(batch.end(), std::make_move_iterator(waiting.begin()),
                     std::make_move_iterator(waiting.end()));
        waiting = std::move(batch);
        continue;
      }
      send(batch, slot);
    }
  }

  /// send(), then the batch's storage serves the next one (on a single node: no allocation
  /// per turn). A call completed at once may have started the next batch meanwhile.
  void sendAndKeep(Batch& batch, int slot) {
    send(batch, slot);
    batch.clear();
    if (!clustered_ && single_.empty()) {
      single_.swap(batch);
    }
  }

  /// One EVALSHA for the whole batch (a lone call goes in today's layout). The deadline is
  /// the earliest of its calls' own; a failed call (lost connection, deadline, an error
  /// reply to the whole call) fails every request of the batch once, and the connection
  /// never resends a call that may have run (its NOSCRIPT retry aside, which ran nothing).
  void send(Batch& batch, int slot) {
    if (batch.empty()) {
      return;
    }
    script_calls_.inc();
    const Micros now = clock_.monotonicMicros();
    auto timeout = options_.request_timeout -
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::microseconds(now - batch.front().flight->started));
    timeout = std::max(timeout, std::chrono::milliseconds(1));
    // Counted until its last request is answered (answer()): every call ends once, with its
    // reply, an error or its deadline, and its requests are answered in order.
    ++in_flight_by_slot_[static_cast<std::size_t>(slot)];
    batch.back().flight->ends_batch_of = slot;
    if (batch.size() == 1) {
      BatchedCall& call = batch.front();
      backend_->evalScript(redis::RespArgs::of(call.keys), redis::RespArgs::of(*call.args), timeout,
                           std::move(call.done));
      return;
    }
    std::vector<std::string> keys;
    std::vector<std::string> args;
    auto handlers = std::make_shared<std::vector<redis::ReplyHandler>>();
    encodeBatch(batch, keys, args, *handlers);
    backend_->evalScript(
        std::move(keys), std::move(args), timeout,
        [handlers](Result<redis::Reply> reply) { redis::splitBatchReply(*handlers, reply); });
  }

  /// A batch of `slot` has its answers: the batch of that slot that grew meanwhile goes at the
  /// end of this turn (with the requests the answers' turn brings).
  void batchAnswered(int slot) {
    --in_flight_by_slot_[static_cast<std::size_t>(slot)];
    if (clustered_ ? batches_.count(slot) > 0 : !single_.empty()) {
      postFlush();
    }
  }

  /// The batch layout of 99_evaluate.lua: requests of one rule carry the same argument
  /// list (their limits and costs; the client is in the keys), sent once per call. The
  /// batch's keys and handlers are moved out.
  void encodeBatch(Batch& batch, std::vector<std::string>& keys, std::vector<std::string>& args,
                   std::vector<redis::ReplyHandler>& handlers) {
    distinct_.clear();
    list_of_.resize(batch.size());
    std::size_t key_count = 0;
    std::size_t arg_count = 3 + 2 * batch.size();
    for (std::size_t j = 0; j < batch.size(); ++j) {
      const BatchedCall& call = batch[j];
      key_count += call.keys.size();
      auto same = std::find_if(distinct_.begin(), distinct_.end(), [&](std::size_t d) {
        return batch[d].args == call.args || *batch[d].args == *call.args;
      });
      if (same == distinct_.end()) {
        list_of_[j] = distinct_.size();
        distinct_.push_back(j);
        arg_count += 1 + call.args->size();
      } else {
        list_of_[j] = static_cast<std::size_t>(same - distinct_.begin());
      }
    }
    keys.reserve(key_count);
    args.reserve(arg_count);
    args.emplace_back("batch");
    args.push_back(std::to_string(batch.size()));
    args.push_back(std::to_string(distinct_.size()));
    for (std::size_t j = 0; j < batch.size(); ++j) {
      args.push_back(std::to_string(batch[j].keys.size()));
      args.push_back(std::to_string(list_of_[j] + 1));
    }
    for (std::size_t d : distinct_) {
      const std::vector<std::string>& list = *batch[d].args;
      args.push_back(std::to_string(list.size()));
      args.insert(args.end(), list.begin(), list.end());
    }
    handlers.reserve(batch.size());
    for (BatchedCall& call : batch) {
      std::move(call.keys.begin(), call.keys.end(), std::back_inserter(keys));
      handlers.push_back(std::move(call.done));
      giveList(std::move(call.keys));
      call.args.reset();
    }
  }

  /// sketch_load and sketch_saturated_ratio of one rule's sketch, and its geometry here.
  struct SketchGauges {
    Gauge* load = nullptr;
    Gauge* saturated = nullptr;
    double cells_times_limit = 1;  ///< width (of a shard in a cluster) x L
    double cells = 1;              ///< depth x width
  };

  SketchGauges& gaugesOf(const StoreLimit& limit) {
    const SketchIdentity& identity = *limit.params.sketch.identity;
    auto [it, inserted] = sketch_gauges_.try_emplace(identity.key);
    if (inserted) {
      const Labels labels{{"domain", identity.domain}, {"rule", identity.rule}};
      metrics_.describe("sketch_load", Metrics::Type::kGauge,
                        "Load of a sketch rule's current window: requests charged in the window "
                        "/ (width x requests_per_unit). False denials grow with it "
                        "(docs/sketch.md).");
      metrics_.describe("sketch_saturated_ratio", Metrics::Type::kGauge,
                        "Share of a sketch rule's counters at or above its limit in the current "
                        "window (a client whose counters are all there is denied).");
      it->second.load = &metrics_.gauge("sketch_load", labels);
      it->second.saturated = &metrics_.gauge("sketch_saturated_ratio", labels);
      const std::uint32_t width = clustered_ ? redis::clusterShardWidth(limit.params.sketch.width)
                                             : limit.params.sketch.width;
      it->second.cells_times_limit =
          static_cast<double>(width) * static_cast<double>(limit.params.limit);
      it->second.cells = static_cast<double>(width) * limit.params.sketch.depth;
    }
    return it->second;
  }

  /// The charged total and saturated counters the script read for each sketch limit (of
  /// the shard of this request's slot in a cluster, which sees its share of the traffic).
  static void publishSketchStats(const redis::Reply& reply, std::size_t n,
                                 const std::vector<SketchGauges*>& gauges) {
    const std::size_t base = 1 + n * redis::kRepliesPerLimit;
    for (std::size_t j = 0; j < gauges.size(); ++j) {
      const double charged = static_cast<double>(reply.elements[base + 2 * j].integer);
      const double saturated = static_cast<double>(reply.elements[base + 2 * j + 1].integer);
      gauges[j]->load->set(charged / gauges[j]->cells_times_limit);
      gauges[j]->saturated->set(saturated / gauges[j]->cells);
    }
  }

  static bool isLease(const StoreLimit& limit) {
    return limit.params.algorithm == Algorithm::kConcurrency;
  }

  static bool isSketch(const StoreLimit& limit) {
    return limit.params.algorithm == Algorithm::kSketch && limit.params.sketch.identity &&
           limit.params.sketch.width > 0 && limit.params.sketch.depth > 0 &&
           limit.params.limit > 0 && limit.params.window_us > 0;
  }

  /// Reads (or first sets) the sketch hash seed shared through Redis, then evaluates
  /// `request`. The seed key may be on any node: it goes through the script (routed by key).
  void fetchSketchSeed(const StoreRequest& request, Callback done) {
    const std::string candidate = redis::randomSketchSeed();
    backend_->evalScript(
        {redis::sketchSeedKey(prefix_)}, {"sketch-seed", candidate}, options_.request_timeout,
        [this, request, done = std::move(done)](Result<redis::Reply> reply) mutable {
          if (!reply) {
            done(reply.error());
            return;
          }
          auto hasher = redis::sketchHasherFromReply(*reply, redis::sketchSeedKey(prefix_));
          if (!hasher) {
            done(hasher.error());
            return;
          }
          if (!sketch_hasher_) {
            sketch_hasher_ = std::move(*hasher);
            spdlog::info("sketch: hash seed {} from Redis", sketch_hasher_->fingerprint());
          }
          evaluate(request, std::move(done));
        });
  }

  bool answerFromCache(const StoreRequest& request, bool bans_only, Callback& done) {
    StoreResponse response;
    if (!cache_.answer(request, prefix_, clock_, bans_only, response)) {
      return false;
    }
    cache_hits_.inc();
    done(std::move(response));
    return true;
  }

  /// One request from evaluate() until Redis answers it.
  struct InFlight {
    std::size_t n = 0;
    int ends_batch_of = -1;  ///< the slot of the batch whose last request it is (batchAnswered)
    Micros started = 0;      ///< clock_.monotonicMicros() when it was submitted
    Micros sent_at = 0;
    bool cached = false;  ///< cache is filled (the local cache is on)
    redis::OverLimitCache::Context cache;
    std::vector<SketchGauges*> sketch_gauges;
    Callback done;
  };
  static constexpr std::size_t kMaxSpareLists = 1024;
  static constexpr std::size_t kInternedLists = 16;

  /// The script's keys and arguments of a request (99_evaluate.lua's layout): keys get
  /// each limit's key (a sketch's even window key, its odd one after all the others).
  ArgList buildArguments(const StoreRequest& request, Micros sent_at,
                         std::vector<std::string>& keys) {
    auto args = std::make_shared<std::vector<std::string>>();
    args->reserve(2 + request.limits.size() * kValuesPerLimit);
    args->emplace_back(script_clock_ ? std::to_string(sent_at) : std::string());
    // A sketch's odd window string and cells go after every limit's own key and values.
    std::vector<std::string> sketch_keys;
    std::vector<std::string> sketch_args;
    for (const StoreLimit& limit : request.limits) {
      const redis::ScriptLimitArgs p = redis::scriptLimitArgs(limit.params, sent_at);
      // A concurrency limit's burst slot carries the lease (99_evaluate.lua).
      std::string burst = std::to_string(isLease(limit) ? request.lease : p.burst);
      std::string warmup = std::to_string(p.warmup);
      if (isSketch(limit)) {
        const std::string client_key = BucketKey::redisKey(prefix_, limit.key);
        const redis::SketchPlacement place =
            redis::placeSketch(prefix_, limit, sketch_hasher_->fingerprint(), clustered_,
                               clustered_ ? redis::keyHashSlot(client_key) : 0);
        keys.push_back(place.even_key);
        sketch_keys.push_back(place.odd_key);
        // Provisional positions, relative to the start of the sketch sections.
        burst = std::to_string(sketch_args.size());
        warmup = std::to_string(sketch_keys.size() - 1);
        redis::appendSketchCells(sketch_args, place.geometry,
                                 sketch_hasher_->cells(limit.key, place.geometry));
      } else {
        keys.push_back(BucketKey::redisKey(prefix_, limit.key));
      }
      args->push_back(std::to_string(p.algorithm));
      args->push_back(std::to_string(p.limit));
      args->push_back(std::to_string(p.window));
      args->push_back(std::move(burst));
      args->push_back(std::to_string(p.min_interval));
      args->push_back(std::to_string(flagsOf(limit, request)));
      args->push_back(std::move(warmup));
      args->push_back(std::to_string(costOf(limit, request)));
      args->push_back(std::to_string(std::max(limit.quota_group, -1)));
    }
    if (!sketch_keys.empty()) {
      // Lua indices are 1-based: the sections start at #KEYS + 1 and #ARGV + 1.
      const std::size_t first_key = keys.size() + 1;
      const std::size_t first_arg = args->size() + 1;
      for (std::size_t i = 0; i < request.limits.size(); ++i) {
        if (isSketch(request.limits[i])) {
          std::string& burst = (*args)[1 + i * kValuesPerLimit + 3];
          std::string& warmup = (*args)[1 + i * kValuesPerLimit + 6];
          burst = std::to_string(first_arg + std::stoull(burst));
          warmup = std::to_string(first_key + std::stoull(warmup));
        }
      }
      keys.insert(keys.end(), sketch_keys.begin(), sketch_keys.end());
      args->insert(args->end(), sketch_args.begin(), sketch_args.end());
    }
    redis::appendOverrideFields(request, kValuesPerLimit, kFlagOverride, *args);
    redis::appendBanArguments(request, kValuesPerLimit, *args);
    if (request.hold.op != HoldOp::kNone) {
      appendHoldArguments(request.hold, *args);
      // n as -n: the six values before it are the reservation step's (80_holds.lua).
      args->push_back("-" + std::to_string(request.limits.size()));
    } else {
      args->push_back(std::to_string(request.limits.size()));
    }
    return args;
  }

  /// buildArguments() for a request without sketches, from the last kInternedLists lists
  /// when one was built for the same limits and costs (compared as numbers, before any
  /// string is made); keys are filled either way.
  ArgList argumentsOf(const StoreRequest& request, Micros sent_at, std::vector<std::string>& keys) {
    signature_.clear();
    if (script_clock_) {
      signature_.push_back(sent_at);  // a test clock's time is an argument too
    }
    for (const StoreLimit& limit : request.limits) {
      // A calendar window's bounds are arguments: a list is reused within one window only.
      const redis::ScriptLimitArgs p = redis::scriptLimitArgs(limit.params, sent_at);
      signature_.insert(
          signature_.end(),
          {p.algorithm, p.limit, p.window, p.burst, p.min_interval, flagsOf(limit, request),
           p.warmup, costOf(limit, request), std::max<std::int64_t>(limit.quota_group, -1),
           // The rule's name (in the rules snapshot) is part of the list.
           static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(limit.override_rule))});
      redis::appendBanSignature(request, limit, signature_);
    }
    for (const InternedList& interned : interned_) {
      if (interned.signature == signature_) {
        for (const StoreLimit& limit : request.limits) {
          keys.push_back(BucketKey::redisKey(prefix_, limit.key));
        }
        return interned.args;
      }
    }
    ArgList args = buildArguments(request, sent_at, keys);
    if (interned_.size() < kInternedLists) {
      interned_.push_back({signature_, args});
    } else {
      interned_[next_interned_] = {signature_, args};
      next_interned_ = (next_interned_ + 1) % kInternedLists;
    }
    return args;
  }

  /// A reservation step's six script arguments (80_holds.lua): op, nonce, ttl, keep, the
  /// expiry the id carries, the most live holds per bucket.
  static void appendHoldArguments(const HoldCall& hold, std::vector<std::string>& args) {
    const int op = hold.op == HoldOp::kReserve ? 1 : hold.op == HoldOp::kCommit ? 2 : 3;
    args.push_back(std::to_string(op));
    args.push_back(hold.nonce);
    args.push_back(std::to_string(hold.ttl_us));
    args.push_back(std::to_string(hold.keep_us));
    args.push_back(std::to_string(hold.expires_at_us));
    args.push_back(std::to_string(hold.max_holds));
  }

  static std::int64_t flagsOf(const StoreLimit& limit, const StoreRequest& request) {
    return (limit.params.count_rejected ? kFlagCountRejected : 0) |
           (limit.shadow ? kFlagShadow : 0) | (request.charge == Charge::kEvery ? kFlagEvery : 0) |
           (request.charge == Charge::kReport ? kFlagReport : 0) | (limit.refund ? kFlagRefund : 0);
  }

  static std::int64_t costOf(const StoreLimit& limit, const StoreRequest& request) {
    return std::max<std::int64_t>(limit.costOr(request.cost), 0);
  }

  void answer(InFlight& call, Result<redis::Reply>& reply) {
    Callback done = std::move(call.done);
    call.done = nullptr;
    const int ends_batch_of = call.ends_batch_of;
    call.ends_batch_of = -1;
    answerWith(call, reply, done);
    if (ends_batch_of >= 0) {
      batchAnswered(ends_batch_of);
    }
  }

  void answerWith(InFlight& call, Result<redis::Reply>& reply, Callback& done) {
    duration_.observe(static_cast<double>(clock_.monotonicMicros() - call.started) /
                      static_cast<double>(kMicrosPerSecond));
    if (!reply) {
      in_flight_.give(&call);
      health_group_->fault(redis::faultKind(reply.error()), reply.error().message);
      done(reply.error());
      return;
    }
    const std::size_t sketches = call.sketch_gauges.size();
    Result<StoreResponse> response = redis::parseScriptReply(*reply, call.n, sketches);
    if (response) {
      health_group_->success();
      if (sketches > 0) {
        publishSketchStats(*reply, call.n, call.sketch_gauges);
      }
    } else {
      health_group_->fault(redis::faultKind(response.error()), response.error().message);
    }
    if (response && call.cached) {
      cache_.remember(call.cache, *response, call.sent_at);
    }
    in_flight_.give(&call);
    done(std::move(response));
  }

  /// An empty string list with the capacity of one already sent (no allocation when warm).
  std::vector<std::string> takeList() {
    if (spare_lists_.empty()) {
      return {};
    }
    std::vector<std::string> list = std::move(spare_lists_.back());
    spare_lists_.pop_back();
    list.clear();
    return list;
  }

  void giveList(std::vector<std::string>&& list) {
    if (list.capacity() > 0 && spare_lists_.size() < kMaxSpareLists) {
      if (spare_lists_.capacity() == 0) {
        spare_lists_.reserve(kMaxSpareLists);
      }
      spare_lists_.push_back(std::move(list));
    }
  }

  RedisOptions options_;
  Metrics& metrics_;
  std::string prefix_;
  std::string kind_;
  const Clock& clock_;
  bool script_clock_;
  Histogram& duration_;
  Counter& cache_hits_;
  Counter& script_calls_;
  std::shared_ptr<store::StoreHealthGroup> health_group_;
  std::shared_ptr<redis::RedisBackend> backend_;
  bool clustered_;
  redis::OverLimitCache cache_;
  /// The sketch hash seed from Redis; null until the first sketch request reads it.
  std::shared_ptr<const SketchHasher> sketch_hasher_;
  std::unordered_map<std::string, SketchGauges> sketch_gauges_;  ///< by SketchIdentity::key
  /// The batch of this event-loop turn on a single node; in a cluster, by hash slot.
  Batch single_;
  std::map<int, Batch> batches_;
  bool flush_posted_ = false;  ///< flush() is posted for the end of this turn
  /// Batches sent and not yet answered (RedisOptions::max_batches_in_flight), by hash slot in
  /// a cluster (a single node's are slot 0's).
  std::vector<std::uint16_t> in_flight_by_slot_;
  /// send()'s scratch, kept between batches (no allocation per batch once warm): the first
  /// request of each distinct argument list, and each request's list.
  std::vector<std::size_t> distinct_;
  std::vector<std::size_t> list_of_;
  ObjectPool<InFlight> in_flight_;  ///< requests sent, until their answer
  /// The argument lists built last, by the numbers they were built from (argumentsOf).
  struct InternedList {
    std::vector<std::int64_t> signature;
    ArgList args;
  };
  std::vector<InternedList> interned_;
  std::size_t next_interned_ = 0;
  std::vector<std::int64_t> signature_;  ///< argumentsOf()'s scratch
  /// Key and argument lists of requests already sent, kept for their capacity.
  std::vector<std::vector<std::string>> spare_lists_;
};

}  // namespace

namespace redis {

Metrics& describeRedisMetrics(Metrics& metrics) {
  metrics.describe("store_call_duration_seconds", Metrics::Type::kHistogram,
                   "Latency of store calls, per decision: from the decision's arrival at the "
                   "store to its answer (the wait for the end of its event-loop turn, for the "
                   "batch in flight before its own, and its batch's Redis round trip).",
                   latencyBuckets());
  metrics.describe("local_cache_hits_total", Metrics::Type::kCounter,
                   "Requests denied from the local over-limit cache without a Redis call.");
  metrics.describe("redis_script_calls_total", Metrics::Type::kCounter,
                   "EVALSHA calls that carried decisions: one per batch of the decisions an I/O "
                   "thread collected in one event-loop turn, or, while a batch awaited its "
                   "answer, in the turns until it came (--redis-max-batch, "
                   "--redis-batches-in-flight).");
  metrics.describe("redis_reconnects_total", Metrics::Type::kCounter,
                   "Redis connections re-established after a loss (per I/O thread).");
  return metrics;
}

StorePtr makeRedisStoreOver(std::shared_ptr<RedisBackend> backend, const RedisOptions& options,
                            Metrics& metrics, std::string_view kind, const Clock& clock) {
  return std::make_shared<RedisStore>(std::move(backend), options, metrics, kind, clock);
}

std::string composeScript(ScriptTime time) {
  std::string out(lua::script(time == ScriptTime::kStoreClock ? kTestPrelude : kProductionPrelude));
  out += '\n';
  for (std::string_view name : lua::scriptNames()) {
    if (name.starts_with("00_") || name == kMainScript) {
      continue;
    }
    out += lua::script(name);
    out += '\n';
  }
  out += lua::script(kMainScript);
  return out;
}

}  // namespace redis

StorePtr makeRedisStore(net::io_context& io, const RedisOptions& options, Metrics& metrics,
                        const Clock& clock) {
  return std::make_shared<RedisStore>(
      redis::makeSingleNodeBackend(io, options, &metrics,
                                   redis::composeScript(options.script_time)),
      options, metrics, "redis", clock);
}

}  // namespace sluice
