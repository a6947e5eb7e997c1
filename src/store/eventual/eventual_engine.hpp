#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/event_loop_thread.hpp"
#include "sluice/common/executor.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/limiter/eventual.hpp"
#include "sluice/limiter/eventual_sketch.hpp"
#include "sluice/limiter/sketch.hpp"
#include "sluice/store/eventual_store.hpp"
#include "sluice/store/store.hpp"
#include "store/eventual/eventual_metrics.hpp"
#include "store/eventual/eventual_script.hpp"
#include "store/eventual/slot_table.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/redis_store_internal.hpp"
#include "store/redis/resp_args.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice {

/// One eventual limit of a request, as the engine sees it.
struct EventualLimitRef {
  std::size_t index = 0;  ///< in StoreRequest::limits
  const StoreLimit* limit = nullptr;
  /// The view's name: the bucket's store key (StoreLimit::key).
  std::string_view key() const { return limit->key; }
};

/// Makes the engine's connections (called by start(); the connections then run on the
/// executor's thread): `region` null for this region's
/// own Redis (or cluster), else that other region's. `region_metrics` is the region's own
/// Metrics (a cluster router's redirects and topology reads, not exported).
using EventualBackendFactory = std::function<std::shared_ptr<redis::RedisBackend>(
    const EventualRegion* region, Metrics& region_metrics)>;

/// See eventual_store.hpp. Internal to src/store/eventual/.
///
/// Threads: decideLocally(), chargeLater(), buildCall(), absorb() and the accessors run on any
/// thread (the I/O threads), under the views' shard locks. Everything else (the sync loop,
/// the replication, the sketch seed's read) runs on the injected Executor's thread, on the
/// injected Clock (docs/architecture.md, "Threads"). The files of the engine:
/// eventual_engine.cpp (life cycle), eventual_views.cpp (the key views), eventual_decide.cpp
/// (local decisions), eventual_round_trip.cpp (the script codec of the I/O threads' calls),
/// eventual_sketch_seed.cpp, eventual_sync.cpp (the sync loop), eventual_replication.cpp.
class EventualEngine {
 public:
  /// An engine on `executor` (its timers and posted work), reading time from `clock`, making
  /// its connections with `backends` (on the executor's thread, at start()). `clock`,
  /// `executor` and `metrics` must outlive it. For tests: a ManualExecutor and fake backends.
  EventualEngine(const EventualOptions& options, const RedisOptions& local, const Clock& clock,
                 Executor& executor, EventualBackendFactory backends, Metrics& metrics);
  ~EventualEngine();
  EventualEngine(const EventualEngine&) = delete;
  EventualEngine& operator=(const EventualEngine&) = delete;

  /// The engine owns `loop` (the thread its executor runs on) and ends it in stop().
  void adoptLoop(std::unique_ptr<EventLoopThread> loop) { loop_ = std::move(loop); }

  /// Makes the connections and starts the sync loop (posted to the executor).
  void start();
  /// Ends the sync loop after a last sync of what is pending, then closes the connections.
  /// With an adopted loop: waits (bounded by 5 request timeouts) and joins its thread. With
  /// an injected executor only: posts the work, which the executor's owner then runs.
  void stop();

  /// The outcome of a local attempt.
  struct Local {
    bool decided = false;  ///< false: a key needs a round trip (`reason`)
    eventual::Route reason = eventual::Route::kLocal;
    bool allowed = true;
    std::vector<Outcome> outcomes;  ///< one per limit when decided
  };
  /// Decides `limits` from the views (all locks held together, all or nothing). With
  /// `charge` the allowed request is charged at once; otherwise chargeLater() does it.
  /// `force`: decide locally whatever the routes say (Redis unreachable, or just refreshed).
  /// `open_groups`: the quota groups of the request's strict limits (they may still pass, so
  /// eventual quota limits alone deny only when no such group exists).
  /// `outcomes`: storage for Local::outcomes (a spare answer's, so that a warm thread decides
  /// without allocating); cleared first.
  Local decideLocally(const std::vector<EventualLimitRef>& limits, std::int64_t cost, bool charge,
                      bool force, const std::vector<int>& open_groups = {},
                      std::vector<Outcome> outcomes = {});
  /// Charges an allowed request decided by decideLocally(charge = false) once the strict
  /// limits allowed too. `outcomes`: decideLocally's, in the same order; a limit that denied
  /// there (a quota-mode limit of a request another group allowed) is not charged unless it
  /// counts rejected requests. `request_allowed` false (the strict limits denied): only the
  /// count_rejected limits are charged (they record the attempt either way).
  void chargeLater(const std::vector<EventualLimitRef>& limits, std::int64_t cost,
                   const std::vector<Outcome>& outcomes, bool request_allowed = true);
  /// Store semantics (store.hpp) on the outcomes of `limits`, with `open_groups` as extra
  /// quota groups that have no denial: every non-shadow, non-quota limit allowed and, when
  /// there are quota groups, one of them has no denying non-shadow limit.
  static bool requestAllowed(const std::vector<EventualLimitRef>& limits,
                             const std::vector<Outcome>& outcomes,
                             const std::vector<int>& open_groups);

  /// The script call for a round trip on `limits`: op kDecide (decide and charge in Redis) or
  /// kSync (refresh the views).
  void buildCall(const std::vector<EventualLimitRef>& limits, eventual::ScriptOp op,
                 std::int64_t cost, Micros now, std::vector<std::string>& keys,
                 std::vector<std::string>& args);
  /// Merges a round trip's reply into the views (and the own charges of a kDecide). Fills
  /// `response` for kDecide. Errors: the reply's shape.
  Status absorb(const std::vector<EventualLimitRef>& limits, eventual::ScriptOp op,
                const redis::Reply& reply, Micros sent_at, StoreResponse* response);

  /// The sketch hash seed shared by the sidecars of this Redis (the strict sketch's,
  /// redis::sketchSeedKey()): set once by the store before the first sketch limit is decided.
  void setSketchHasher(std::shared_ptr<const SketchHasher> hasher);
  /// Reads (or first sets: SET NX, then GET, through the eventual script) the sketch seed
  /// and sets it; `done` is called on the engine's thread (not at all once stopped). The
  /// seed lives in the Redis of the region whose name sorts first (this one's or another's,
  /// --regions): every sidecar of every region hashes a client to the same cells.
  void fetchSketchSeed(std::function<void(Status)> done);
  std::shared_ptr<const SketchHasher> sketchHasher() const;
  /// True for an eventual limit of algorithm sketch (decided on its cells).
  static bool isSketch(const StoreLimit& limit);
  /// The store keys of the cells of a sketch limit's client (one per row; see
  /// docs/eventual.md, "sketch"): "ske.<tag>:<seed fingerprint>:<rule identity>:<row>.<col>"
  /// (sketchTag(): every cell of one rule in one cluster slot; the
  /// identity names the rule's geometry too, so a reload that changes it starts from new cells).
  static std::vector<std::string> sketchCellKeys(const SketchHasher& hasher,
                                                 const StoreLimit& limit);
  /// "ske." + 4 hex digits of the rule's identity: the first part of its cells' keys.
  static std::string sketchTag(const SketchParams& geometry);

  /// A backend on `io` (its thread) for an I/O thread's round trips: the same Redis or
  /// Redis Cluster as the engine's, with the eventual script.
  std::shared_ptr<redis::RedisBackend> makeBackendOn(boost::asio::io_context& io);
  /// The hash slot of a limit's Redis keys (a sketch's cells share one); for a cluster.
  int clusterSlotOf(const EventualLimitRef& ref) const;

  /// True when round trips may be tried: the last sync reached Redis (a cluster: reached at
  /// least one master; the keys of a master that is down fall back to a local decision when
  /// their round trip fails, while the others keep turning strict near their limit).
  bool reachable() const { return usable_.load(std::memory_order_acquire); }
  Micros now() const { return clock_.nowMicros(); }
  const std::string& script() const { return script_; }
  const RedisOptions& redisOptions() const { return local_; }
  std::string statusJson() const;
  /// Hits admitted locally and not yet confirmed by Redis.
  std::int64_t pendingHits() const { return pending_.load(std::memory_order_relaxed); }

  Counter& roundTrips(eventual::Route reason);
  Counter& localDecisions(bool degraded) {
    return degraded ? metrics_.local_degraded : metrics_.local_synced;
  }

 private:
  struct Slot {
    eventual::View view;
    LimitParams params;
    std::string redis_key;  ///< the Redis key base (BucketKey::redisKey)
    int cluster_slot = -1;  ///< its hash slot (computed on a cluster's first sync)
    std::string key_storage;
    /// Its store key (key_storage: a slot lives on the heap and never moves, in Shard::slots
    /// or in Shard::evicted).
    std::string_view key;
    std::uint8_t shard = 0;  ///< the index of its shard in shards_
    bool queued = false;     ///< in its shard's sync queue (Shard::queue)
    /// Evicted by makeRoom() while entries still pointed at it: it waits in Shard::evicted
    /// until they are gone; the entries skip it.
    bool evicted = false;
    /// Non-zero: waiting in wheel_ for a later sync (docs/eventual.md, "Cold keys"), under
    /// this generation (an entry of another generation is stale and skipped).
    std::uint32_t wait_gen = 0;
    /// >= 0: a quiet key (eventual::quietUntil(), docs/eventual.md "Quiet keys"), neither
    /// queued nor in wheel_: until this time its decisions queue it only when it must go out.
    Micros quiet_until = -1;
    /// Its confirmed hits must go out again (a renewed connection, resendAll()): not quiet
    /// until they have.
    bool resend = false;
    /// Entries pointing at this slot (Shard::queue, wheel_, sync calls in flight): a slot is
    /// erased only when there are none.
    std::uint32_t refs = 0;
    Micros synced_at = -1;  ///< when a sync last sent this key (-1: never)
    Micros last_used = 0;
    /// Regions: this region's count in the current window that every other region has
    /// confirmed holding (the share of the tight round trips, regionShare()).
    eventual::RegionConfirmations region_confirmed;
  };
  static constexpr std::size_t kShards = 64;
  /// Hashes std::string and std::string_view alike (lookups without a copy of the key).
  struct KeyHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const {
      return std::hash<std::string_view>{}(key);
    }
  };
  struct Shard {
    std::mutex mutex;
    eventual_detail::SlotTable<Slot> slots;  ///< by store key, hashed with KeyHash
    /// Slots to sync at the next tick (touched since the last sync, and not waiting in
    /// wheel_). Every entry holds a Slot::refs.
    std::vector<Slot*> queue;
    /// Slots evicted while entries pointed at them (Slot::evicted), freed by sweep().
    std::vector<std::unique_ptr<Slot>> evicted;
  };
  /// A slot waiting in wheel_ (it holds a Slot::refs).
  struct Waiting {
    Slot* slot = nullptr;
    std::uint32_t gen = 0;
  };
  /// Buckets of wheel_ (one per sync interval): longer than the longest wait.
  static constexpr std::size_t kWheelSize = 256;
  /// One key of a sync call (it holds a Slot::refs until its reply is merged).
  struct SyncEntry {
    Slot* slot = nullptr;
    LimitParams params;
    std::int64_t window = eventual::kNoWindow;
  };
  /// One script call of a sync: its entries, and on a cluster the master it goes to.
  struct SyncCall {
    redis::RespArgs keys;
    redis::RespArgs args;
    std::shared_ptr<std::vector<SyncEntry>> entries;
    int slot = 0;  ///< a cluster: the slot of its first key (routes the call to its master)
  };
  /// One key waiting to be replicated to another region.
  struct Replica {
    std::string hash;  ///< the Redis hash (one window)
    std::string key;   ///< the store key of its slot
    LimitParams params;
    std::int64_t value = 0;  ///< this region's cumulative hits in it
    std::int64_t acked = 0;  ///< the value that region last confirmed
    Micros since = 0;        ///< monotonic time of the oldest unsent update
  };
  /// One script call of a replication step: (*sent)[first, first + count).
  struct ReplicaCall {
    redis::RespArgs keys;
    redis::RespArgs args;
    std::size_t first = 0;
    std::size_t count = 0;
    int slot = 0;  ///< a cluster: the slot of its first key
  };
  struct Region {
    EventualRegion config;
    /// Its Redis: one node, or its cluster's router (each replicated key goes to the master
    /// of its slot).
    std::shared_ptr<redis::RedisBackend> backend;
    /// The router's own metrics (redirects, topology reads), kept apart from this region's
    /// store's; not exported.
    std::unique_ptr<Metrics> backend_metrics = std::make_unique<Metrics>();
    std::unordered_map<std::string, Replica> queue;
    /// hash -> the last value that region confirmed (value) and its limit (params).
    std::unordered_map<std::string, Replica> confirmed;
    /// backend->connectCount() when the confirmed values were last (re)sent.
    std::uint64_t connects_seen = 0;
    bool in_flight = false;
    Gauge* lag = nullptr;
    Counter* dropped = nullptr;
    Counter* unreachable = nullptr;
    std::atomic<bool> reachable{false};
    bool seen_reachable = false;  ///< reachable once: a loss after that is logged and counted
  };
  /// The per-request state of decideLocally() (inline storage for a few limits).
  struct LocalPass;

  // --- Views (eventual_views.cpp; any thread, `shard` locked) ------------------------------
  Shard& shardOf(std::string_view key);
  /// The slot of `ref` (created when new; `shard` locked), rolled to `now`.
  Slot& slotFor(Shard& shard, const EventualLimitRef& ref, Micros now);
  Slot& slotFor(Shard& shard, std::string_view key, const LimitParams& params, Micros now) {
    return slotFor(shard, key, KeyHash{}(key), params, now);
  }
  /// The same with the key's KeyHash, `hash` (computed once for the shard and the table).
  Slot& slotFor(Shard& shard, std::string_view key, std::uint64_t hash, const LimitParams& params,
                Micros now);
  /// The cell keys of every sketch limit of `limits` (empty for the others), and every key
  /// to lock (the limits' own keys, a sketch's cells instead of its key).
  void expand(const std::vector<EventualLimitRef>& limits,
              std::vector<std::vector<std::string>>& cells,
              std::vector<std::string_view>& lock_keys) const;
  /// The cell slots of one sketch limit (`shard`s locked), rolled and touched.
  std::vector<Slot*> cellSlots(const std::vector<std::string>& keys, const LimitParams& sketch,
                               Micros now);
  /// Charges `cost` to a sketch's cells (conservative update of the own counts).
  void chargeCells(const std::vector<Slot*>& cells, const LimitParams& sketch, std::int64_t cost,
                   Micros now, bool reachable);
  void makeRoom(Shard& shard);
  /// Marks `slot` used at `now` and queues it for the next sync unless it is queued or waits
  /// (then wake() decides). `shard` locked.
  void touch(Shard& shard, Slot& slot, Micros now);
  /// A slot waiting in wheel_ that may not wait any more (tight, or more unsent hits than its
  /// blind allowance) goes to its shard's queue. `shard` locked.
  void wake(Shard& shard, Slot& slot);
  /// Moves `slot` to its shard's queue (from wheel_, if it waits there). `shard` locked.
  void enqueue(Shard& shard, Slot& slot);
  void noteTight(bool was, bool is);
  /// Counts `lost` admitted hits dropped before Redis confirmed them.
  void dropHits(std::int64_t lost);
  /// eventual::roll() of the slot's view to `now`, with the pending hits and the dropped ones
  /// counted (a fixed window's unsent hits leave the pending ones when it ends, not dropped).
  void rollView(Slot& slot, Micros now);
  void addPending(std::int64_t delta);
  /// Merges one entry's reading. `shard` locked.
  void mergeReading(Slot& slot, const eventual::KeyReading& reading, Micros now, Micros latency);

  // --- Local decisions (eventual_decide.cpp) -----------------------------------------------
  /// Decides one sketch limit (i) of `pass` on its cells; notes a route when it must trip.
  void decideSketchLimit(LocalPass& pass, std::size_t i, std::int64_t cost, bool force);
  /// Decides one counter limit (i) of `pass` on its view; notes a route when it must trip.
  void decideCounterLimit(LocalPass& pass, std::size_t i, std::int64_t cost, bool force);
  /// Fills `local` from a decided `pass` and charges what it allows (with `charge`).
  void settle(LocalPass& pass, std::int64_t cost, bool charge, Local& local);
  /// Charges an allowed decision to the slot's own count (and its blind allowance when the
  /// view is unknown or stale). `shard` locked.
  void chargeOne(Slot& slot, const BucketState& state, const Evaluation& evaluation,
                 std::int64_t cost, Micros now, bool reachable);

  // --- Round trips of the I/O threads (eventual_round_trip.cpp) ----------------------------
  std::string hashKey(const std::string& key, std::int64_t window, const LimitParams& p) const;
  /// The hashes of the slot's current window and the one before (KEYS of an entry).
  void pushHashKeys(const Slot& slot, std::vector<std::string>& keys) const;
  /// The same, encoded into a sync call's keys.
  void addHashKeys(const Slot& slot, redis::RespArgs& keys) const;
  void appendEntry(Slot& slot, eventual::ScriptOp op, std::int64_t cost, bool shadow,
                   int quota_group, std::vector<std::string>& keys,
                   std::vector<std::string>& args) const;
  /// The slot's entry of a sync call, in the script's sync layout (eventual::kSyncLayout).
  /// `withhold_current` (eventual::mayWithholdCurrent()): the current window is read, not
  /// written; its hits go out with a later sync.
  void appendSyncEntry(const Slot& slot, bool withhold_current, redis::RespArgs& keys,
                       redis::RespArgs& args) const;
  /// Regions: {the count of this region in the slot's current window that every other region
  /// confirmed (settled), the cap on this region's hits beyond it} for a tight key's round
  /// trip; {0, 0} (no cap) with one region, a key that is not tight, or an algorithm without
  /// a cap (docs/eventual.md, "Regions: each region's share near the limit"). `shard` locked.
  std::pair<std::int64_t, std::int64_t> regionShare(const Slot& slot) const;
  /// How long a confirmation waits before the share counts it: 2 sync intervals (a region's
  /// sync and replication step) + max(4 x the slowest replication round trip seen lately,
  /// 100 ms) (the link, and the replication step that waits for the previous one).
  Micros regionSettle() const;
  /// Regions: true when a local allow `e` of `cost` on `slot` would spend more than this
  /// region's share of what remains (eventual::beyondRegionShare()). `shard` locked.
  bool beyondShare(const Slot& slot, const Evaluation& e, std::int64_t cost) const;
  /// Regions: true while the key's rate is not measured yet (one reading of its window at
  /// most): its local decisions stay within the blind allowance, as an unknown key's do.
  bool unmeasured(const Slot& slot) const;
  /// Merges one entry of a round trip's reply into `slot`.
  void absorbOne(Shard& shard, Slot& slot, eventual::ScriptOp op, const std::int64_t* v,
                 Micros sent_at, Micros now);

  // --- The sync loop (eventual_sync.cpp; executor thread) ----------------------------------
  void tick();
  /// Sends every queued key's own counts and reads the totals; `done` (if any) is called when
  /// the sync has completed or could not be sent.
  void sync(std::function<void()> done = {});
  /// The calls of a sync: every queued key that may not wait, grouped per master.
  std::vector<SyncCall> collectSyncCalls(Micros now);
  /// One queued or due slot (its shard locked, its entry's ref dropped): waits in wheel_
  /// when it may (deferUntil()), else goes into its master's open call.
  void collectOne(Slot& slot, Micros now, std::unordered_map<int, SyncCall>& open,
                  std::vector<SyncCall>& calls);
  /// The slots of wheel_ that are due at `now` (every one when stopping), collected.
  void collectDue(Micros now, std::unordered_map<int, SyncCall>& open,
                  std::vector<SyncCall>& calls);
  /// Appends one queued key to its master's open call (`open`), flushing full calls.
  void addToSyncCall(Slot& slot, Micros now, std::unordered_map<int, SyncCall>& open,
                     std::vector<SyncCall>& calls);
  void sendSyncCalls(std::vector<SyncCall> calls, Micros now, std::function<void()> done);
  /// Until when a queued key may skip syncs (docs/eventual.md, "Cold keys"); <= now: it goes
  /// out with this one. `shard` locked.
  Micros waitUntil(const Slot& slot, Micros now) const;
  /// The end of the slot's window when it is a quiet key (eventual::quietUntil()), else -1.
  Micros quietUntil(const Slot& slot, Micros now) const;
  /// Queues every key with own hits for the next sync, as unconfirmed (after a reconnect).
  void resendAll();
  /// Merges one sync call's reply; false when it failed (its keys go out with the next sync).
  bool onSynced(const std::vector<SyncEntry>& entries, Result<redis::Reply> reply, Micros sent_at);
  /// Publishes the gauges of the loop (pending hits, sync lag, keys).
  void publishGauges();
  void sweep();
  /// `reachable`: the last sync reached every node; `usable`: it reached one at least.
  void setReachable(bool reachable, const std::string& why, bool usable);
  void setReachable(bool reachable, const std::string& why) {
    setReachable(reachable, why, reachable);
  }
  /// Stops ticking, sends a last sync and calls `done` once it has completed.
  void flush(std::function<void()> done);
  /// Closes every connection (after flush()).
  void closeLinks();

  // --- Replication (eventual_replication.cpp; executor thread) -----------------------------
  /// `key`: the store key of the slot whose window `hash` is.
  void enqueueReplica(const std::string& hash, const std::string& key, const LimitParams& params,
                      std::int64_t value);
  void replicate(Region& region);
  /// Sets the region's lag gauge from its oldest queued update.
  void updateReplicationLag(Region& region, Micros steady);
  /// Takes up to kReplicasPerTick updates off the queue, grouped by master.
  std::unordered_map<int, std::vector<Replica>> takeReplicas(Region& region, std::size_t& taken);
  std::vector<ReplicaCall> buildReplicaCalls(
      Region& region, std::unordered_map<int, std::vector<Replica>>& by_master,
      std::vector<Replica>& sent, Micros now) const;
  /// Merges one replication call's reply: confirmed values, or the updates back in the queue.
  void onReplicated(Region& region, std::vector<Replica>& sent, std::size_t first,
                    std::size_t count, const Result<redis::Reply>& reply, Micros sent_steady,
                    std::string& failure);
  /// Records whether `region` answers; a loss (after it once answered) logs one warning and
  /// counts eventual_region_unreachable_total, a return logs once.
  void setRegionReachable(Region& region, bool reachable, const std::string& why);
  /// Records in the slot of store key `key` (when `hash` is its current window) the least
  /// value every other region has confirmed of `hash`: Slot::region_confirmed.
  void noteConfirmed(const std::string& hash, const std::string& key);
  /// Queues every value `region` confirmed again (after its connection was renewed).
  void resendConfirmed(Region& region);
  /// The region whose Redis holds the sketch seed, when it is not this one.
  Region* seedRegion();

  EventualOptions options_;
  RedisOptions local_;
  const Clock& clock_;
  Executor& executor_;
  EventualBackendFactory backends_;
  Metrics& registry_;
  EventualMetrics metrics_;
  eventual::Tuning tuning_;
  std::string prefix_;
  std::string redis_prefix_;  ///< BucketKey::redisPrefix(prefix_)
  std::string entry_;         ///< "s<sidecar id>"
  std::string script_;
  mutable std::mutex sketch_mutex_;
  std::shared_ptr<const SketchHasher> sketch_hasher_;

  std::array<Shard, kShards> shards_;
  /// Slots waiting for a later sync, by the sync interval they are due in (index modulo
  /// kWheelSize); only the sync thread touches it.
  std::array<std::vector<Waiting>, kWheelSize> wheel_;
  std::int64_t wheel_tick_ = -1;  ///< the last interval whose bucket was collected
  std::uint32_t wait_gen_ = 0;
  std::atomic<std::size_t> size_{0};
  std::atomic<std::int64_t> pending_{0};
  std::atomic<bool> reachable_{false};  ///< the last sync reached every node (/readyz)
  std::atomic<bool> usable_{false};     ///< see reachable()
  /// Longest replication round trip seen lately (us), for Tuning::region_delay_us.
  std::atomic<Micros> replication_rtt_us_{0};
  bool unreachable_logged_ = false;
  std::size_t sweep_shard_ = 0;

  std::unique_ptr<EventLoopThread> loop_;  ///< the executor's thread, when the engine owns it
  TimerPtr timer_;
  std::shared_ptr<redis::RedisBackend> backend_;
  std::vector<std::unique_ptr<Region>> regions_;
  bool sync_in_flight_ = false;
  bool seed_in_flight_ = false;      ///< tick()'s read of the sketch seed from another region
  std::uint64_t connects_seen_ = 0;  ///< backend_->connectCount() at the last sync
  std::atomic<bool> stopped_{false};
  bool started_ = false;
  /// Monotonic time (us) of the last sync Redis confirmed (executor thread).
  Micros last_confirmed_ = 0;
};

}  // namespace sluice
