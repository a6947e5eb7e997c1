// The eventual engine's sync loop (its executor's thread): every sync interval, one pipelined
// round of script calls sends the own counts of every touched key and reads the totals
// (docs/eventual.md, "The sync loop").
#include <spdlog/spdlog.h>

#include <algorithm>

#include "store/eventual/eventual_engine.hpp"
#include "store/eventual/eventual_views.hpp"
#include "store/redis/cluster_slots.hpp"

namespace sluice {

using eventual_detail::isWindowed;
using eventual_detail::unsentOf;

namespace {

/// Entries per EVALSHA of a sync: a sync of many keys is several calls written at once
/// (one pipelined write, one round trip), each small enough not to stall Redis.
constexpr std::size_t kEntriesPerCall = 256;
/// Arguments of a windowed key's entry in the sync layout (a token bucket's take 8).
constexpr std::size_t kSyncArgsPerEntry = 4;

}  // namespace

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
  publishGauges();
  timer_->schedule(options_.sync_interval, [this] { tick(); });
}

void EventualEngine::publishGauges() {
  const std::int64_t pending = pending_.load(std::memory_order_relaxed);
  metrics_.pending.set(static_cast<double>(pending));
  const Micros steady = clock_.monotonicMicros();
  if (pending <= 0 || last_confirmed_ == 0) {
    // Nothing waits for Redis: the lag starts when hits are next left unconfirmed.
    last_confirmed_ = steady;
  }
  metrics_.sync_lag.set(pending <= 0 ? 0.0
                                     : static_cast<double>(steady - last_confirmed_) /
                                           static_cast<double>(kMicrosPerSecond));
  metrics_.keys.set(static_cast<double>(size_.load(std::memory_order_relaxed)));
}

void EventualEngine::setReachable(bool reachable, const std::string& why, bool usable) {
  usable_.store(usable, std::memory_order_release);
  const bool was = reachable_.exchange(reachable, std::memory_order_acq_rel);
  if (was == reachable) {
    return;
  }
  if (!reachable) {
    metrics_.unreachable.inc();
    spdlog::warn("eventual limits: Redis unreachable ({}); deciding locally, keeping the hits",
                 why);
    unreachable_logged_ = true;
  } else if (unreachable_logged_) {
    spdlog::info("eventual limits: Redis reachable again; sending the kept hits");
  }
}

void EventualEngine::sync(std::function<void()> done) {
  if (sync_in_flight_) {
    if (done) {
      done();
    }
    return;
  }
  if (!backend_->ready()) {
    setReachable(false, backend_->clustered() ? "no slot map" : "not connected");
    if (done) {
      done();
    }
    return;
  }
  if (const std::uint64_t connects = backend_->connectCount(); connects != connects_seen_) {
    if (connects_seen_ != 0) {
      resendAll();
    }
    connects_seen_ = connects;
  }
  const Micros now = clock_.nowMicros();
  std::vector<SyncCall> calls = collectSyncCalls(now);
  metrics_.keys_synced.set(0);
  if (calls.empty()) {
    // Nothing had to go out: the hits still pending are quiet keys' (docs/eventual.md, "Quiet
    // keys"), kept on purpose, so they are no lag.
    last_confirmed_ = clock_.monotonicMicros();
    setReachable(true, "");
    if (done) {
      done();
    }
    return;
  }
  sendSyncCalls(std::move(calls), now, std::move(done));
}

std::vector<EventualEngine::SyncCall> EventualEngine::collectSyncCalls(Micros now) {
  // One call per kEntriesPerCall keys; on a cluster, per master: its keys (of many slots) go
  // in the arguments of a call without declared keys (a script may declare keys of one slot
  // only), sent to that master.
  std::vector<SyncCall> calls;
  std::unordered_map<int, SyncCall> open;  // by master (one node: master 0)
  collectDue(now, open, calls);
  const bool stopping = stopped_.load(std::memory_order_acquire);
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    if (stopping) {
      // The last sync before a shutdown sends everything, quiet keys' hits too.
      shard.slots.forEach([&](Slot& slot) {
        if (slot.quiet_until >= 0) {
          slot.quiet_until = -1;
          rollView(slot, now);
          if (unsentOf(slot.view) > 0) {
            collectOne(slot, now, open, calls);
          }
        }
      });
    }
    for (Slot* slot : shard.queue) {
      --slot->refs;
      slot->queued = false;
      if (!slot->evicted) {
        collectOne(*slot, now, open, calls);
      }
    }
    shard.queue.clear();
  }
  for (auto& [master, call] : open) {
    if (call.entries && !call.entries->empty()) {
      calls.push_back(std::move(call));
    }
  }
  if (backend_->clustered()) {
    for (SyncCall& call : calls) {
      call.args.append(call.keys);
      call.keys.clear();
    }
  }
  return calls;
}

void EventualEngine::collectDue(Micros now, std::unordered_map<int, SyncCall>& open,
                                std::vector<SyncCall>& calls) {
  // The wheel counts sync intervals of the monotonic clock: a slot waits in the bucket of the
  // interval it is due in, and only the buckets whose interval has come are looked at (a
  // few thousand waiting keys cost nothing per tick until they are due).
  const std::int64_t tick = floorDiv(clock_.monotonicMicros(), tuning_.sync_interval_us);
  const bool stopping = stopped_.load(std::memory_order_acquire);
  const auto size = static_cast<std::int64_t>(kWheelSize);
  std::int64_t first = wheel_tick_ < 0 ? tick : std::max(wheel_tick_ + 1, tick - size + 1);
  if (stopping) {
    first = tick - size + 1;  // the last sync before a shutdown sends everything
  }
  std::vector<Waiting> due;
  for (std::int64_t t = first; t <= tick; ++t) {
    due.clear();
    due.swap(wheel_[static_cast<std::size_t>(((t % size) + size) % size)]);
    for (const Waiting& w : due) {
      Shard& shard = shards_[w.slot->shard];
      std::lock_guard lock(shard.mutex);
      --w.slot->refs;
      if (w.slot->evicted || w.gen != w.slot->wait_gen) {
        continue;  // evicted, or woken (in the queue now) since it was put here
      }
      w.slot->wait_gen = 0;
      collectOne(*w.slot, now, open, calls);
    }
  }
  wheel_tick_ = std::max(wheel_tick_, tick);
}

void EventualEngine::collectOne(Slot& slot, Micros now, std::unordered_map<int, SyncCall>& open,
                                std::vector<SyncCall>& calls) {
  rollView(slot, now);
  if (slot.synced_at >= 0 && slot.last_used <= slot.synced_at && unsentOf(slot.view) == 0) {
    return;  // neither decided nor charged since its last sync: nothing to send or read
  }
  if (const Micros end = quietUntil(slot, now); end > now) {
    // Quiet until its window ends: out of the wheel (many keys of one window would all come
    // due in one tick), its decisions queue it again when it must go out or from then on.
    slot.quiet_until = end;
    return;
  }
  const Micros until = waitUntil(slot, now);
  if (until <= now) {
    addToSyncCall(slot, now, open, calls);
    return;
  }
  const Micros interval = std::max<Micros>(tuning_.sync_interval_us, 1);
  const std::int64_t ticks = std::clamp<std::int64_t>((until - now + interval - 1) / interval, 1,
                                                      static_cast<std::int64_t>(kWheelSize) - 1);
  const auto size = static_cast<std::int64_t>(kWheelSize);
  const std::int64_t tick = floorDiv(clock_.monotonicMicros(), interval) + ticks;
  if (++wait_gen_ == 0) {
    ++wait_gen_;
  }
  slot.wait_gen = wait_gen_;
  ++slot.refs;
  wheel_[static_cast<std::size_t>(((tick % size) + size) % size)].push_back(
      Waiting{&slot, wait_gen_});
}

void EventualEngine::addToSyncCall(Slot& slot, Micros now, std::unordered_map<int, SyncCall>& open,
                                   std::vector<SyncCall>& calls) {
  const bool clustered = backend_->clustered();
  rollView(slot, now);
  // A sync that goes out for the key's first reading or a sliding window's previous hits reads
  // the current window without writing it while its hits may wait (a cold sliding window is
  // written once, when it has ended). The last sync before a shutdown sends everything.
  const bool withhold =
      !stopped_.load(std::memory_order_acquire) &&
      eventual::mayWithholdCurrent(slot.view, slot.params, slot.synced_at, tuning_);
  slot.synced_at = now;
  slot.resend = false;
  int master = 0;
  if (clustered) {
    if (slot.cluster_slot < 0) {
      slot.cluster_slot = redis::keyHashSlot(slot.redis_key);
    }
    master = backend_->masterOf(slot.cluster_slot);
  }
  SyncCall& call = open[master];
  if (!call.entries) {
    // The entries are reserved once per call; the keys and arguments (RESP already) start
    // with room for a few entries like this one and double as the call grows.
    call.entries = std::make_shared<std::vector<SyncEntry>>();
    call.entries->reserve(kEntriesPerCall);
    call.keys.reserve(16 * 2 * (slot.redis_key.size() + 32));
    call.args.reserve(64 + entry_.size() + 16 * kSyncArgsPerEntry * 16);
    call.args.addInt(now);
    call.args.add(entry_);
    call.args.add(eventual::kSyncLayout);
    call.slot = std::max(slot.cluster_slot, 0);
  }
  appendSyncEntry(slot, withhold, call.keys, call.args);
  ++slot.refs;  // until its reply is merged (onSynced())
  call.entries->push_back(SyncEntry{&slot, slot.params, slot.view.cur.index});
  if (call.entries->size() >= kEntriesPerCall) {
    calls.push_back(std::move(call));
    call = SyncCall{};
  }
}

void EventualEngine::sendSyncCalls(std::vector<SyncCall> calls, Micros now,
                                   std::function<void()> done) {
  std::size_t total = 0;
  for (const SyncCall& call : calls) {
    total += call.entries->size();
  }
  metrics_.keys_synced.set(static_cast<double>(total));
  metrics_.keys_synced_total.inc(total);
  const Micros started = clock_.monotonicMicros();
  // A sync that takes longer fails (nothing is lost: the own counts go out again with the
  // next one); many keys on a loaded Redis take longer, so they widen the deadline.
  const auto timeout = std::max(std::chrono::milliseconds(200), options_.sync_interval * 4) +
                       std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::microseconds(100 * static_cast<std::int64_t>(total)));
  sync_in_flight_ = true;
  struct Round {
    std::size_t outstanding = 0;
    bool failed = false;
    bool succeeded = false;
    std::function<void()> done;
  };
  auto round = std::make_shared<Round>(Round{calls.size(), false, false, std::move(done)});
  for (SyncCall& call : calls) {
    auto on_reply = [this, batch = call.entries, started, now, round](Result<redis::Reply> reply) {
      const bool ok = onSynced(*batch, std::move(reply), now);
      (ok ? round->succeeded : round->failed) = true;
      if (--round->outstanding != 0) {
        return;
      }
      sync_in_flight_ = false;
      if (round->failed) {
        metrics_.syncs_failed.inc();
        if (round->succeeded && backend_->clustered()) {
          // Some masters answered: their keys keep their round trips.
          setReachable(false, "a master did not answer the sync", true);
        }
      } else {
        metrics_.syncs_ok.inc();
        last_confirmed_ = clock_.monotonicMicros();
        setReachable(true, "");
      }
      metrics_.sync_duration.observe(static_cast<double>(clock_.monotonicMicros() - started) /
                                     static_cast<double>(kMicrosPerSecond));
      if (round->done) {
        round->done();
      }
    };
    if (backend_->clustered()) {
      backend_->evalScriptOnMasterOf(call.slot, std::move(call.args), timeout, std::move(on_reply));
    } else {
      backend_->evalScript(std::move(call.keys), std::move(call.args), timeout,
                           std::move(on_reply));
    }
  }
}

Micros EventualEngine::waitUntil(const Slot& slot, Micros now) const {
  // A cold key far from its limit goes out with a later sync, while this sidecar's unsent hits
  // on it stay within its blind allowance: other sidecars then miss at most that many of its
  // hits (the bound of docs/eventual.md), and many keys decided a few times a second cost Redis
  // and this thread about one script step per key per window (or per second) instead of one
  // per decision.
  if (stopped_.load(std::memory_order_acquire)) {
    return now;  // the last sync before a shutdown sends everything
  }
  return eventual::deferUntil(slot.view, slot.params, slot.synced_at, now, tuning_);
}

Micros EventualEngine::quietUntil(const Slot& slot, Micros now) const {
  // Not at shutdown (the last sync sends everything), nor for a key sent and not read yet (its
  // reply is due, or it failed and the key goes out again) or whose confirmed hits must go
  // out again (a renewed connection). A key never sent may be quiet from its first decision.
  if (stopped_.load(std::memory_order_acquire) || slot.resend ||
      (slot.synced_at >= 0 && slot.view.refreshed_at < 0)) {
    return -1;
  }
  return eventual::quietUntil(slot.view, slot.params, now, tuning_);
}

void EventualEngine::resendAll() {
  // A new connection may be to a Redis that restarted empty: every own count it had
  // confirmed is sent again (the counts are cumulative, so a Redis that kept them changes
  // nothing), so a restart loses no more than the sidecars' last interval.
  std::size_t keys = 0;
  for (Shard& shard : shards_) {
    std::lock_guard lock(shard.mutex);
    shard.slots.forEach([&](Slot& slot) {
      if (slot.view.cur.own <= 0 && slot.view.prev.own <= 0) {
        return;
      }
      const std::int64_t before = unsentOf(slot.view);
      slot.view.cur.own_acked = 0;
      slot.view.prev.own_acked = 0;
      slot.resend = true;  // a quiet key's too
      addPending(unsentOf(slot.view) - before);
      enqueue(shard, slot);
      ++keys;
    });
  }
  if (keys > 0) {
    spdlog::info("eventual limits: Redis connection renewed; sending the own counts of {} keys",
                 keys);
  }
}

bool EventualEngine::onSynced(const std::vector<SyncEntry>& entries, Result<redis::Reply> reply,
                              Micros sent_at) {
  std::vector<std::int64_t> values;
  Status shape =
      reply ? eventual::parseReply(*reply, entries.size(), values, eventual::kSyncReplyStride)
            : Status(reply.error());
  const Micros now = clock_.nowMicros();
  if (!shape) {
    // A cluster's sync is judged when every master has answered (sync()): one master's
    // failure leaves the others' keys their round trips meanwhile.
    setReachable(false, shape.error().message,
                 backend_->clustered() && usable_.load(std::memory_order_acquire));
    // Nothing is lost: the own counts are cumulative and go out again with the next sync.
    for (const SyncEntry& e : entries) {
      Shard& shard = shards_[e.slot->shard];
      std::lock_guard lock(shard.mutex);
      --e.slot->refs;
      if (!e.slot->evicted) {
        touch(shard, *e.slot, e.slot->last_used);
      }
    }
    return false;
  }
  std::string key;
  std::string redis_key;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const SyncEntry& e = entries[i];
    const std::int64_t* r = &values[i * eventual::kSyncReplyStride];
    {
      // The entry's slot lives until its ref is dropped (an evicted one out of the table).
      Shard& shard = shards_[e.slot->shard];
      std::lock_guard lock(shard.mutex);
      Slot& slot = *e.slot;
      --slot.refs;
      if (!slot.evicted && slot.params.window_us == e.params.window_us) {
        mergeReading(slot, eventual::syncReadingOf(r, e.window), now, now - sent_at);
        if (unsentOf(slot.view) > 0) {
          touch(shard, slot, slot.last_used);
        }
      }
      if (!regions_.empty()) {
        key.assign(slot.key);
        redis_key = slot.redis_key;
      }
    }
    if (!regions_.empty()) {
      const std::int64_t region = r[eventual::kRegion - eventual::kOthers];
      const std::int64_t prev_region = r[eventual::kPrevRegion - eventual::kOthers];
      enqueueReplica(hashKey(redis_key, e.window, e.params), key, e.params, region);
      if (isWindowed(e.params) && prev_region > 0) {
        enqueueReplica(hashKey(redis_key, e.window - 1, e.params), key, e.params, prev_region);
      }
    }
  }
  return true;
}

void EventualEngine::sweep() {
  Shard& shard = shards_[sweep_shard_];
  sweep_shard_ = (sweep_shard_ + 1) % kShards;
  const Micros now = clock_.nowMicros();
  std::lock_guard lock(shard.mutex);
  std::erase_if(shard.evicted, [](const std::unique_ptr<Slot>& slot) { return slot->refs == 0; });
  std::vector<Slot*> idle;
  shard.slots.forEach([&](Slot& slot) {
    if (slot.quiet_until >= 0 && slot.quiet_until <= now) {
      rollView(slot, now);  // a quiet key not decided since its window ended: its hits expire
    }
    const Micros idle_after =
        std::max<Micros>(10 * tuning_.sync_interval_us,
                         std::min<Micros>(2 * slot.params.window_us, 60 * kMicrosPerSecond));
    const bool tat_busy = slot.params.algorithm == Algorithm::kTokenBucket &&
                          std::max(slot.view.redis_tat.a, slot.view.local_tat.a) > now;
    if (!slot.queued && slot.wait_gen == 0 && slot.refs == 0 && unsentOf(slot.view) == 0 &&
        !tat_busy && now - slot.last_used > idle_after) {
      idle.push_back(&slot);
    }
  });
  for (Slot* slot : idle) {
    shard.slots.extract(slot, KeyHash{}(slot->key));
    size_.fetch_sub(1, std::memory_order_relaxed);
  }
}

}  // namespace sluice
