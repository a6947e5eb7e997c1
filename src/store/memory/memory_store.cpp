#include "sluice/store/memory_store.hpp"

#include <algorithm>
#include <atomic>
#include <boost/container/small_vector.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <utility>
#include <vector>

#include "sluice/store/ban_applies.hpp"
#include "sluice/store/request_verdict.hpp"
#include "store/memory/ban_table.hpp"
#include "store/memory/bucket_table.hpp"
#include "store/memory/hold_table.hpp"
#include "store/memory/limit_work.hpp"
#include "store/memory/override_table.hpp"
#include "store/memory/sketch_registry.hpp"

namespace sluice {
namespace {

using memory_detail::BucketTable;
using memory_detail::Evictions;
using memory_detail::HoldSet;
using memory_detail::MemorySketch;
using memory_detail::OverrideTable;
using memory_detail::SketchRegistry;
using memory_detail::WorkList;
using Work = memory_detail::LimitWork;

/// The sketch hash seed: MemoryStoreOptions::sketch_seed, else random.
std::pair<std::uint64_t, std::uint64_t> sketchSeed(const std::string& text) {
  std::uint64_t k0 = 0;
  std::uint64_t k1 = 0;
  if (!SketchHasher::parseSeed(text, k0, k1)) {
    std::random_device random;
    k0 = (static_cast<std::uint64_t>(random()) << 32) ^ random();
    k1 = (static_cast<std::uint64_t>(random()) << 32) ^ random();
  }
  return {k0, k1};
}

/// The state of a bucket that is not there (or has expired), to evaluate by reference.
const BucketState kFreshState{};

/// Entries each request's shards advance their expiry sweep by: idle keys go without a
/// background thread, and no request pays for a whole shard.
constexpr std::size_t kSweepPerRequest = 32;

class MemoryStore final : public Store, public MemoryCounters, public MemoryExclusive {
  using ShardList = boost::container::small_vector<std::uint32_t, 4>;
  using Locks = boost::container::small_vector<std::unique_lock<std::mutex>, 4>;

 public:
  MemoryStore(const MemoryStoreOptions& options, const Clock& clock, Metrics& metrics)
      : clock_(clock),
        overrides_(options.overrides_file),
        overrides_gauge_(overridesGauge(metrics)),
        max_keys_(std::max<std::size_t>(options.max_keys, 1)),
        keys_(describeGauge(metrics)),
        evicted_expired_(metrics.counter("memory_store_evictions_total", {{"reason", "expired"}})),
        evicted_capacity_(
            metrics.counter("memory_store_evictions_total", {{"reason", "capacity"}})),
        sketches_(metrics, sketchSeed(options.sketch_seed)) {
    // Enough shards that none needs more than half its 24-bit index space on average.
    const std::size_t needed = max_keys_ / (BucketTable::kMaxEntries / 2) + 1;
    const std::size_t count = std::max({options.shards, needed, std::size_t{1}});
    shards_.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      shards_.push_back(std::make_unique<Shard>());
    }
  }

  void evaluate(const StoreRequest& request, Callback done) override {
    const Micros now = request.now_us > 0 ? request.now_us : clock_.nowMicros();
    if (!overrides_.empty()) {
      // A runtime override replaces its limit's parameters in a copy of the request; the
      // bucket (its key, its state) stays the rule's.
      std::vector<AppliedOverride> applied;
      for (std::size_t i = 0; i < request.limits.size(); ++i) {
        const StoreLimit& limit = request.limits[i];
        if (limit.override_rule == nullptr) {
          continue;
        }
        StoredOverridePtr value = overrides_.find(overrideTagOf(limit.key),
                                                  overrideBucketField(overrideBucketOf(limit.key)),
                                                  overrideRuleField(*limit.override_rule), now);
        if (value) {
          applied.push_back(AppliedOverride{i, std::move(value)});
        }
      }
      if (!applied.empty()) {
        StoreRequest patched = request;
        for (const AppliedOverride& a : applied) {
          applyOverride(patched.limits[a.limit].params, *a.value);
        }
        decide(patched, now, std::move(applied), done);
        return;
      }
    }
    decide(request, now, {}, done);
  }

  void setOverride(const OverrideSlot& slot, StoredOverridePtr value, std::size_t max_overrides,
                   OverrideSetCallback done) override {
    done(overrides_.set(slot, std::move(value), max_overrides));
    overrides_gauge_.set(static_cast<double>(overrides_.list().size()));
  }

  void removeOverride(const OverrideSlot& slot, OverrideRemoveCallback done) override {
    done(overrides_.remove(slot));
    overrides_gauge_.set(static_cast<double>(overrides_.list().size()));
  }

  void listOverrides(OverrideListCallback done) override { done(overrides_.list()); }

  Status loadOverrides() {
    auto status = overrides_.load();
    overrides_gauge_.set(static_cast<double>(overrides_.list().size()));
    return status;
  }

 private:
  /// Decides `request` at `now` (the Store contract); `applied` goes into the answer.
  void decide(const StoreRequest& request, Micros now, std::vector<AppliedOverride> applied,
              Callback& done) {
    // This thread's spare answer: its outcomes keep their capacity (the decision service
    // gives each answer back with recycleStoreResponse()).
    StoreResponse response = takeSpareStoreResponse();
    Locks locks;
    if (decideInto(request, now, response, &locks)) {
      // A lone banned limit is refused on its ban alone, whatever the limit says: its answer
      // shows no override (as the Redis script's, which does not read them then).
      applied.clear();
    }
    response.overrides = std::move(applied);
    done(std::move(response));
  }

 public:
  void evaluateExclusiveHashed(const StoreRequest& request, StoreResponse& response,
                               const std::uint64_t* hashes) override {
    if (!overrides_.empty()) {
      evaluate(request, [&response](Result<StoreResponse>&& answer) {
        response = std::move(*answer);  // the memory store never fails
      });
      return;
    }
    // An empty answer (StoreResponse's defaults) that keeps the outcomes' storage.
    std::vector<Outcome> outcomes = std::move(response.outcomes);
    outcomes.clear();
    response = StoreResponse{};
    response.outcomes = std::move(outcomes);
    decideInto(request, clock_.nowMicros(), response, nullptr, hashes);
  }

  std::uint64_t prefetchKey(std::string_view key) override {
    const std::uint64_t hash = BucketTable::hashKey(key);
    shards_[shardOf(hash)]->table.prefetchCell(hash);
    return hash;
  }

  void prefetchStep(std::uint64_t hash, int step) override {
    const BucketTable& table = shards_[shardOf(hash)]->table;
    if (step == 1) {
      table.prefetchEntries(hash);
    } else if (step == 2) {
      table.prefetchKeys(hash);
    }
  }

 private:
  /// decide()'s work, the answer written into `response` (empty): the shards and sketches
  /// the request involves are locked into `locks` for the call (null: the caller has the
  /// store to itself). True when the request is a lone banned limit (refused on its ban).
  bool decideInto(const StoreRequest& request, Micros now, StoreResponse& response, Locks* locks,
                  const std::uint64_t* hashes = nullptr) {
    const std::size_t n = request.limits.size();
    // Inline capacity for the usual few limits per request: no allocation on the hot path.
    WorkList work(n);
    ShardList involved;
    placeLimits(request, now, work, involved, locks, hashes);
    response.at_us = now;
    response.outcomes.reserve(n);
    // Reservations' holds (docs/reservations.md): read (and settled) before the limits are
    // evaluated, so that every decision counts them. A process that never reserved skips this.
    bool holds_present = request.hold.op != HoldOp::kNone;
    for (const std::uint32_t s : involved) {
      holds_present = holds_present || !shards_[s]->holds.empty();
    }
    if (holds_present) {
      readHolds(request, work, now, response);
    }
    findBans(request, now, work);
    const bool lone_ban =
        n == 1 && work[0].banned && request.hold.op == HoldOp::kNone && !request.limits[0].shadow;
    evaluateLimits(request, now, work, response);
    recordBans(request, now, work, response);
    response.allowed = sluice::requestAllowed(request, response.outcomes);
    if (request.hold.op == HoldOp::kReserve) {
      placeHolds(request, work, now, response);
    }
    // Other charge modes charge every limit (answerUncharged answers the leases they do not
    // take); a reservation step's answer is its own.
    if (!response.allowed && request.hold.op == HoldOp::kNone) {
      memory_detail::answerUncharged(request, now, work, response);
    }

    // Existing entries first (save, drop or give back), then new keys: an insert may evict,
    // and must not do so under an index still in use.
    Evictions evictions;
    saveExisting(request, now, work, response.allowed);
    insertNew(request, now, work, response.allowed, evictions);
    for (const std::uint32_t s : involved) {
      shards_[s]->holds.sweep(now);
      const std::size_t removed = shards_[s]->table.sweep(now, kSweepPerRequest);
      evictions.expired += removed;
      if (!shards_[s]->bans.empty()) {
        if (const std::size_t gone = shards_[s]->bans.sweep(now, kSweepPerRequest); gone > 0) {
          bans_.fetch_sub(gone, std::memory_order_relaxed);
        }
      }
      if (removed > 0) {
        count_.fetch_sub(removed, std::memory_order_relaxed);
      }
    }
    if (locks != nullptr) {
      locks->clear();
    }
    record(evictions);
    return lone_ban;
  }

 public:
  void changeLease(const LeaseRequest& request, LeaseCallback done) override {
    const Micros now = clock_.nowMicros();
    const std::size_t n = request.holds.size();
    std::vector<std::uint64_t> hashes(n);
    std::vector<std::uint32_t> involved(n);
    for (std::size_t i = 0; i < n; ++i) {
      hashes[i] = BucketTable::hashKey(request.holds[i].key);
      involved[i] = shardOf(hashes[i]);
    }
    std::vector<std::uint32_t> order = involved;
    std::sort(order.begin(), order.end());
    order.erase(std::unique(order.begin(), order.end()), order.end());
    std::vector<std::unique_lock<std::mutex>> locks;
    locks.reserve(order.size());
    for (const std::uint32_t s : order) {
      locks.emplace_back(shards_[s]->mutex);
    }
    LeaseResponse response;
    response.at_us = now;
    response.holds.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      response.holds[i] = changeOne(request, request.holds[i], hashes[i], involved[i], now);
    }
    locks.clear();
    record(Evictions{});
    done(std::move(response));
  }

  void reset(const std::vector<std::string>& key_prefixes, ResetCallback done) override {
    std::size_t removed = 0;
    for (auto& shard : shards_) {
      std::lock_guard lock(shard->mutex);
      removed += shard->table.erasePrefixes(key_prefixes);
      shard->holds.erasePrefixes(key_prefixes);
      bans_.fetch_sub(shard->bans.erasePrefixes(key_prefixes), std::memory_order_relaxed);
    }
    count_.fetch_sub(removed, std::memory_order_relaxed);
    record(Evictions{});
    done(removed);
  }

  bool healthy() const override { return true; }
  std::string_view kind() const override { return "memory"; }
  bool holdsReservations() const override { return true; }

  std::size_t shardCount() const override { return shards_.size(); }

  void visitShard(std::size_t shard, Micros now,
                  const std::function<void(const BucketView&)>& visit) override {
    Shard& s = *shards_.at(shard);
    std::lock_guard lock(s.mutex);
    s.table.forEachLive(now,
                        [&](std::string_view key, std::int64_t a, std::int64_t b, std::int64_t c,
                            Micros expires_at, const std::vector<LogEntry>* log) {
                          visit(BucketView{key, a, b, c, expires_at, log});
                        });
  }

  bool restoreBucket(std::string_view key, BucketState&& state, Micros expires_at) override {
    const std::uint64_t h = BucketTable::hashKey(key);
    Shard& shard = *shards_[((h >> 32) & 0xffffffU) % shards_.size()];
    std::lock_guard lock(shard.mutex);
    if (const std::uint32_t existing = shard.table.find(key, h); existing != BucketTable::kNone) {
      shard.table.save(existing, std::move(state), expires_at);
      return true;
    }
    if (count_.load(std::memory_order_relaxed) >= max_keys_ ||
        shard.table.size() >= BucketTable::kMaxEntries) {
      return false;
    }
    shard.table.insert(key, h, std::move(state), expires_at);
    count_.fetch_add(1, std::memory_order_relaxed);
    keys_.set(static_cast<double>(count_.load(std::memory_order_relaxed)));
    return true;
  }

 private:
  struct Shard {
    std::mutex mutex;
    BucketTable table;
    memory_detail::HoldTable holds;
    memory_detail::BanTable bans;
  };

  std::uint32_t shardOf(std::uint64_t hash) const {
    // Bits 32..55 pick the shard; the table uses the low bits and the top 8.
    return static_cast<std::uint32_t>(((hash >> 32) & 0xffffffU) % shards_.size());
  }

  /// One bucket of a lease operation (its shard locked by the caller).
  LeaseHoldResult changeOne(const LeaseRequest& request, const LeaseHold& hold, std::uint64_t hash,
                            std::uint32_t shard, Micros now) {
    LeaseHoldResult result;
    BucketTable& table = shards_[shard]->table;
    const std::uint32_t index = table.find(hold.key, hash);
    // A bucket past its end but still in the table is read: its leases say "expired" (the
    // concurrency state knows each one's expiry), not "never held".
    if (index == BucketTable::kNone || hold.params.algorithm != Algorithm::kConcurrency) {
      result.outcome = sluice::evaluate(hold.params, BucketState{}, now, 0).outcome;
      return result;
    }
    BucketState state = table.load(index);
    const LeaseChange change = request.op == LeaseOp::kRelease
                                   ? releaseLease(hold.params, state, now, request.lease)
                                   : renewLease(hold.params, state, now, request.lease);
    result.found = change.found;
    result.expires_at = change.expires_at;
    if (change.found != LeaseFound::kHeld) {
      result.outcome = sluice::evaluate(hold.params, state, now, 0).outcome;
      table.restore(index, std::move(state.log));
      return result;
    }
    result.outcome = change.evaluation.outcome;
    if (change.evaluation.ttl_us > 0) {
      BucketState next = change.evaluation.next;
      table.save(index, std::move(next), now + change.evaluation.ttl_us);
    } else {
      table.erase(index, hash);
      count_.fetch_sub(1, std::memory_order_relaxed);
    }
    return result;
  }

  /// Finds each limit's shard (or its rule's sketch) and locks what the request involves:
  /// shards in ascending order, then sketches in address order, so two requests never wait
  /// on each other in a cycle; holding all of them makes check-then-charge atomic across
  /// the limits. `involved` lists the shards, each once.
  void placeLimits(const StoreRequest& request, Micros now, WorkList& work, ShardList& involved,
                   Locks* locks, const std::uint64_t* hashes) {
    const std::size_t n = request.limits.size();
    involved.reserve(n);
    boost::container::small_vector<MemorySketch*, 2> sketches;
    for (std::size_t i = 0; i < n; ++i) {
      work[i].first = i;
      if (memory_detail::isSketchLimit(request.limits[i])) {
        // One sketch per rule, shared by its clients; the shards are not involved.
        work[i].sketch = sketches_.find(request.limits[i].params, now);
        sketches.push_back(work[i].sketch.get());
        continue;
      }
      const std::uint64_t h =
          hashes != nullptr ? hashes[i] : BucketTable::hashKey(request.limits[i].key);
      work[i].hash = h;
      work[i].shard = shardOf(h);
      involved.push_back(work[i].shard);
    }
    if (involved.size() > 1) {
      std::sort(involved.begin(), involved.end());
      involved.erase(std::unique(involved.begin(), involved.end()), involved.end());
    }
    if (locks == nullptr) {
      return;  // the caller has the store to itself
    }
    locks->reserve(involved.size() + sketches.size());
    for (const std::uint32_t s : involved) {
      locks->emplace_back(shards_[s]->mutex);
    }
    std::sort(sketches.begin(), sketches.end());
    sketches.erase(std::unique(sketches.begin(), sketches.end()), sketches.end());
    for (MemorySketch* sketch : sketches) {
      locks->emplace_back(sketch->mutex);
    }
  }

  /// Loads each limit's bucket (a key named twice: both see the state before this request)
  /// and evaluates it, appending the outcomes to `response`.
  void evaluateLimits(const StoreRequest& request, Micros now, WorkList& work,
                      StoreResponse& response) {
    const std::size_t n = request.limits.size();
    for (std::size_t i = 0; i < n; ++i) {
      const StoreLimit& limit = request.limits[i];
      Work& w = work[i];
      if (w.sketch) {
        evaluateSketchLimit(request, limit, w, now, limit.costOr(request.cost));
        response.outcomes.push_back(w.eval.outcome);
        continue;
      }
      if (w.banned) {
        response.outcomes.push_back(memory_detail::bannedOutcome(w.ban_until, now));
        continue;
      }
      BucketTable& table = shards_[w.shard]->table;
      w.index = table.find(limit.key, w.hash);
      if (w.index == BucketTable::kNone) {
        table.prefetchSlot();  // while the limit is evaluated
      } else {
        for (std::size_t j = 0; j < i && w.first == i; ++j) {
          if (work[j].shard == w.shard && work[j].index == w.index) {
            w.first = j;
          }
        }
        if (w.first != i) {
          w.loaded = work[w.first].loaded;
          w.expired = work[w.first].expired;
        } else {
          table.touch(w.index);
          w.loaded = table.load(w.index);
          w.expired = table.expiresAt(w.index) <= now;
        }
      }
      // A reference, not `w.expired ? BucketState{} : w.loaded`: that is a copy of the
      // loaded state (its log too) for every limit.
      w.eval =
          memory_detail::evaluateLimit(request, limit, w.expired ? kFreshState : w.loaded, now, w);
      response.outcomes.push_back(w.eval.outcome);
    }
  }

  /// Writes back the entries that existed before the request (and the sketches): saved,
  /// erased at the end of their life, or given back untouched when no limit charged them.
  void saveExisting(const StoreRequest& request, Micros now, WorkList& work, bool allowed) {
    const std::size_t n = request.limits.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (work[i].sketch) {
        if (work[i].sketch_eval.record &&
            memory_detail::charged(request, request.limits[i], work[i], allowed)) {
          chargeSketch(work[i], request.limits[i].costOr(request.cost));
        }
        continue;
      }
      if (work[i].index == BucketTable::kNone || work[i].first != i) {
        continue;
      }
      // A key named twice is written by the last of its limits that is charged (as the
      // Redis script's writes in order leave it).
      std::size_t last = n;
      for (std::size_t k = i; k < n; ++k) {
        if (work[k].first == i &&
            memory_detail::charged(request, request.limits[k], work[k], allowed)) {
          last = k;
        }
      }
      BucketTable& table = shards_[work[i].shard]->table;
      if (last == n) {
        table.restore(work[i].index, std::move(work[i].loaded.log));
      } else if (work[last].eval.ttl_us > 0) {
        table.save(work[i].index, std::move(work[last].eval.next), now + work[last].eval.ttl_us);
      } else {
        table.erase(work[i].index, work[i].hash);
        count_.fetch_sub(1, std::memory_order_relaxed);
      }
    }
  }

  /// Inserts the charged keys that did not exist, making room within the key bound.
  void insertNew(const StoreRequest& request, Micros now, WorkList& work, bool allowed,
                 Evictions& evictions) {
    for (std::size_t i = 0; i < request.limits.size(); ++i) {
      Work& w = work[i];
      if (w.sketch || w.index != BucketTable::kNone ||
          !memory_detail::charged(request, request.limits[i], w, allowed)) {
        continue;
      }
      BucketTable& table = shards_[w.shard]->table;
      const std::string& key = request.limits[i].key;
      const std::uint32_t existing = table.find(key, w.hash);  // the same key twice
      if (existing != BucketTable::kNone) {
        if (w.eval.ttl_us > 0) {
          table.save(existing, std::move(w.eval.next), now + w.eval.ttl_us);
        } else {
          table.erase(existing, w.hash);
          count_.fetch_sub(1, std::memory_order_relaxed);
        }
        continue;
      }
      if (w.eval.ttl_us <= 0) {
        continue;
      }
      // Reserve the place in the global count first; over the bound, make room in this
      // shard (other shards are not locked, and need not be: the bound is global, the LRU
      // order per shard). A shard with nothing to evict inserts anyway, so the count can
      // pass the bound by less than the number of shards.
      const std::size_t total = count_.fetch_add(1, std::memory_order_relaxed) + 1;
      if (total > max_keys_ || table.size() >= BucketTable::kMaxEntries) {
        const std::size_t removed = table.makeRoom(now, evictions);
        count_.fetch_sub(removed, std::memory_order_relaxed);
      }
      table.insert(key, w.hash, std::move(w.eval.next), now + w.eval.ttl_us);
    }
  }

  /// Reads the holds of every bucket of the request (refreshing them: expired holds are
  /// counted in response.holds_expired), applies a commit or a release to them
  /// (response.hold_status), and sets each Work's held amount. The shards are locked.
  void readHolds(const StoreRequest& request, WorkList& work, Micros now, StoreResponse& response) {
    const HoldOp op = request.hold.op;
    const bool settling = op == HoldOp::kCommit || op == HoldOp::kRelease;
    boost::container::small_vector<HoldSet*, 4> sets;
    for (std::size_t i = 0; i < work.size(); ++i) {
      Work& w = work[i];
      if (w.sketch) {
        continue;
      }
      memory_detail::HoldTable& table = shards_[w.shard]->holds;
      const memory_detail::HashedKey key{request.limits[i].key, w.hash};
      w.holds = settling ? &table.obtain(key) : table.find(key);
      if (w.holds == nullptr) {
        continue;
      }
      const memory_detail::HeldAmount h = w.holds->refresh(now);
      if (h.expired > 0) {
        response.holds_expired.resize(work.size());
        response.holds_expired[i] += h.expired;
      }
      sets.push_back(w.holds);
    }
    if (settling) {
      memory_detail::SettleInput input;
      input.op = op;
      input.id_expiry = request.hold.expires_at_us;
      input.keep_us = request.hold.keep_us;
      input.now = now;
      if (!memory_detail::holdNonce(request.hold.nonce, input.nonce)) {
        response.hold_status = HoldStatus::kUnknown;
      } else {
        response.hold_status = memory_detail::settleHolds(input, sets, response.hold_amount);
      }
    }
    // A reservation step charges nothing, except a commit that found its hold (or found it
    // expired): that one is charged as a report.
    const bool hold_only =
        op == HoldOp::kReserve || op == HoldOp::kRelease ||
        (op == HoldOp::kCommit && response.hold_status != HoldStatus::kCommitted &&
         response.hold_status != HoldStatus::kLate);
    for (std::size_t i = 0; i < work.size(); ++i) {
      Work& w = work[i];
      w.hold_only = hold_only;
      if (w.holds == nullptr) {
        continue;
      }
      // Refreshed above at this instant, and a settlement keeps the sums: only a memory
      // the settlement made that is already due (keep_us 0) is left to forget.
      w.holds->forgetMemoriesDue(now);
      w.held = w.holds->held();
      const Micros first_expiry = w.holds->firstExpiry();
      w.holds_retry = first_expiry > now ? first_expiry - now : 0;
      if (w.holds->empty()) {
        // Every limit on this bucket (the same bucket twice in one request) lets go of the
        // set before it is dropped.
        const HoldSet* dropped = w.holds;
        for (Work& other : work) {
          if (other.holds == dropped) {
            other.holds = nullptr;
          }
        }
        shards_[w.shard]->holds.dropIfEmpty({request.limits[i].key, w.hash});
      }
    }
  }

  /// After a reserve's verdict: an allowed one holds its amount on every bucket (all or
  /// nothing: a bucket already at HoldCall::max_holds live holds refuses the whole
  /// reservation, kFull); a denied one is kDenied. The shards are locked.
  void placeHolds(const StoreRequest& request, WorkList& work, Micros now,
                  StoreResponse& response) {
    const HoldCall& call = request.hold;
    memory_detail::HoldNonce nonce;
    if (!response.allowed || !memory_detail::holdNonce(call.nonce, nonce)) {
      response.hold_status = HoldStatus::kDenied;
      return;
    }
    for (std::size_t i = 0; i < work.size(); ++i) {
      const Work& w = work[i];
      if (call.max_holds > 0 && w.holds != nullptr &&
          static_cast<std::int64_t>(w.holds->liveCount()) >= call.max_holds) {
        response.hold_status = HoldStatus::kFull;
        response.allowed = false;
        return;
      }
    }
    const Micros expires_at = now + call.ttl_us;
    for (std::size_t i = 0; i < work.size(); ++i) {
      const Work& w = work[i];
      if (w.sketch) {
        continue;
      }
      // The set readHolds() found, else a new one.
      HoldSet& set = w.holds != nullptr
                         ? *w.holds
                         : shards_[w.shard]->holds.obtain({request.limits[i].key, w.hash});
      // The nonce is fresh (random): only this request can have placed it, on the same
      // bucket twice, and it is held once.
      if (set.findLive(nonce) != nullptr) {
        continue;
      }
      set.add(nonce, request.limits[i].costOr(request.cost), expires_at, expires_at + call.keep_us,
              call.max_holds);
    }
    response.hold_status = HoldStatus::kReserved;
    response.hold_expires_at_us = expires_at;
  }

  /// Marks the limits whose client is banned at `now` (their shards are locked).
  void findBans(const StoreRequest& request, Micros now, WorkList& work) {
    for (std::size_t i = 0; i < request.limits.size(); ++i) {
      Work& w = work[i];
      if (w.sketch || !banApplies(request, request.limits[i])) {
        continue;
      }
      const BanState* state = shards_[w.shard]->bans.find({request.limits[i].key, w.hash}, now);
      if (state != nullptr && banActive(*state, now)) {
        w.banned = true;
        w.ban_until = state->until;
      }
    }
  }

  /// Counts each denial of a limit with a penalty box; the one that starts a ban answers as
  /// banned already (the outcome's ban_step says which step of the ladder it is).
  void recordBans(const StoreRequest& request, Micros now, WorkList& work,
                  StoreResponse& response) {
    for (std::size_t i = 0; i < request.limits.size(); ++i) {
      const StoreLimit& limit = request.limits[i];
      Work& w = work[i];
      Outcome& outcome = response.outcomes[i];
      if (w.sketch || w.banned || outcome.allowed || limit.costOr(request.cost) <= 0 ||
          !banApplies(request, limit) || (i > 0 && alreadyStruck(request, work, i))) {
        continue;
      }
      memory_detail::BanTable& table = shards_[w.shard]->bans;
      const memory_detail::HashedKey key{limit.key, w.hash};
      const BanState* known = table.find(key, now);
      const bool is_new = known == nullptr;
      if (is_new && bans_.load(std::memory_order_relaxed) >= max_keys_) {
        continue;  // at the key bound: no new penalty box (the limit still denies)
      }
      const BanStrike strike = recordDenial(limit.params.ban, is_new ? BanState{} : *known, now);
      const int added = table.store(key, strike.next, now + strike.ttl_us, now);
      if (added != 0) {
        bans_.fetch_add(added, std::memory_order_relaxed);
      }
      if (strike.started) {
        outcome = memory_detail::bannedOutcome(strike.next.until, now);
        outcome.ban_step = static_cast<std::int32_t>(strike.next.step);
      }
    }
  }

  /// True when an earlier limit of the request has the same key (counted once).
  static bool alreadyStruck(const StoreRequest& request, const WorkList& work, std::size_t i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (work[j].shard == work[i].shard && request.limits[j].key == request.limits[i].key) {
        return true;
      }
    }
    return false;
  }

  /// Evaluates a sketch limit on its rule's sketch (locked by the caller). A sketch takes no
  /// refund (the decision service refuses it; here it is a check); a report or envoy's
  /// counting records the attempt as count_rejected does.
  void evaluateSketchLimit(const StoreRequest& request, const StoreLimit& limit, Work& w,
                           Micros now, std::int64_t cost) {
    const LimitParams& params = limit.params;
    w.cells = sketches_.hasher().cells(limit.key, params.sketch);
    w.window_index = sketchWindowIndex(now, params.window_us);
    const SketchRead read = w.sketch->table.read(w.cells, w.window_index);
    if (limit.refund) {
      w.sketch_eval = evaluateSketch(params, read, now, 0);
    } else if (request.charge != Charge::kAllOrNothing && !params.count_rejected) {
      LimitParams counted = params;
      counted.count_rejected = true;
      w.sketch_eval = evaluateSketch(counted, read, now, std::max<std::int64_t>(cost, 0));
    } else {
      w.sketch_eval = evaluateSketch(params, read, now, std::max<std::int64_t>(cost, 0));
    }
    w.eval.outcome = w.sketch_eval.outcome;
  }

  /// Records a charged sketch limit (its sketch still locked by the caller).
  static void chargeSketch(Work& w, std::int64_t cost) {
    MemorySketch& sketch = *w.sketch;
    sketch.table.record(w.cells, w.window_index, w.sketch_eval.raise_to, cost);
    sketch.publish(w.window_index);
  }

  static Gauge& describeGauge(Metrics& metrics) {
    metrics.describe("memory_store_keys", Metrics::Type::kGauge,
                     "Buckets held by the memory store.");
    metrics.describe("memory_store_evictions_total", Metrics::Type::kCounter,
                     "Buckets dropped by the memory store, by reason (expired idle, capacity).");
    return metrics.gauge("memory_store_keys");
  }

  void record(const Evictions& evictions) {
    keys_.set(static_cast<double>(count_.load(std::memory_order_relaxed)));
    if (evictions.expired > 0) {
      evicted_expired_.inc(evictions.expired);
    }
    if (evictions.capacity > 0) {
      evicted_capacity_.inc(evictions.capacity);
    }
  }

  const Clock& clock_;
  OverrideTable overrides_;
  Gauge& overrides_gauge_;
  const std::size_t max_keys_;
  std::atomic<std::size_t> count_{0};  // entries in all shards
  std::atomic<std::size_t> bans_{0};   // penalty-box entries in all shards (max_keys_ bound)
  Gauge& keys_;
  Counter& evicted_expired_;
  Counter& evicted_capacity_;
  SketchRegistry sketches_;
  std::vector<std::unique_ptr<Shard>> shards_;
};

}  // namespace

StorePtr makeMemoryStore(const MemoryStoreOptions& options, const Clock& clock, Metrics& metrics) {
  return std::make_shared<MemoryStore>(options, clock, metrics);
}

Result<StorePtr> openMemoryStore(const MemoryStoreOptions& options, const Clock& clock,
                                 Metrics& metrics) {
  auto store = std::make_shared<MemoryStore>(options, clock, metrics);
  if (auto status = store->loadOverrides(); !status) {
    return status.error();
  }
  return StorePtr(std::move(store));
}

MemoryCounters* memoryCountersOf(Store& store) { return dynamic_cast<MemoryCounters*>(&store); }

MemoryExclusive* memoryExclusiveOf(Store& store) { return dynamic_cast<MemoryExclusive*>(&store); }

}  // namespace sluice
