// The eventual engine's key views: one Slot per key, in lock-striped shards (any thread).
#include "store/eventual/eventual_views.hpp"

#include <algorithm>

#include "sluice/rules/bucket_key.hpp"
#include "store/eventual/eventual_engine.hpp"

namespace sluice {

using eventual::Route;
using eventual_detail::unsentOf;

EventualEngine::Shard& EventualEngine::shardOf(std::string_view key) {
  return shards_[KeyHash{}(key) % kShards];
}

void EventualEngine::addPending(std::int64_t delta) {
  if (delta != 0) {
    pending_.fetch_add(delta, std::memory_order_relaxed);
  }
}

void EventualEngine::dropHits(std::int64_t lost) {
  if (lost > 0) {
    metrics_.dropped_hits.inc(static_cast<std::uint64_t>(lost));
    addPending(-lost);
  }
}

void EventualEngine::rollView(Slot& slot, Micros now) {
  const std::int64_t before = unsentOf(slot.view);
  const std::int64_t lost = eventual::roll(slot.view, slot.params, now);
  dropHits(lost);
  // The rest of what left the unsent hits: a fixed window's, which expire with it.
  addPending(unsentOf(slot.view) - before + lost);
}

void EventualEngine::makeRoom(Shard& shard) {
  if (size_.load(std::memory_order_relaxed) < options_.max_keys || shard.slots.empty()) {
    return;
  }
  // A key with nothing unsent goes first (the least recently used); otherwise the one with
  // the oldest window, whose unsent hits are dropped and counted.
  Slot* victim = nullptr;
  bool victim_clean = false;
  shard.slots.forEach([&](Slot& slot) {
    const bool clean = unsentOf(slot.view) == 0;
    if (victim == nullptr || (clean && !victim_clean) ||
        (clean == victim_clean && (clean ? slot.last_used < victim->last_used
                                         : slot.view.cur.index < victim->view.cur.index))) {
      victim = &slot;
      victim_clean = clean;
    }
  });
  dropHits(unsentOf(victim->view));
  std::unique_ptr<Slot> gone = shard.slots.extract(victim, KeyHash{}(victim->key));
  if (gone->refs > 0) {
    // Entries (the sync queue, the wheel, a sync in flight) still point at it: it waits, out
    // of the table, until they are gone (sweep()).
    gone->evicted = true;
    shard.evicted.push_back(std::move(gone));
  }
  size_.fetch_sub(1, std::memory_order_relaxed);
}

EventualEngine::Slot& EventualEngine::slotFor(Shard& shard, const EventualLimitRef& ref,
                                              Micros now) {
  const std::string_view key = ref.key();
  return slotFor(shard, key, KeyHash{}(key), ref.limit->params, now);
}

EventualEngine::Slot& EventualEngine::slotFor(Shard& shard, std::string_view key,
                                              std::uint64_t hash, const LimitParams& params,
                                              Micros now) {
  Slot* found = shard.slots.find(key, hash);
  if (found == nullptr) {
    makeRoom(shard);
    auto fresh = std::make_unique<Slot>();
    fresh->key_storage = key;
    fresh->key = fresh->key_storage;
    fresh->shard = static_cast<std::uint8_t>(&shard - shards_.data());
    fresh->params = params;
    fresh->redis_key = BucketKey::redisKey(redis_prefix_, key);
    found = shard.slots.insert(std::move(fresh), hash);
    size_.fetch_add(1, std::memory_order_relaxed);
  }
  Slot& slot = *found;
  if (slot.params.window_us != params.window_us || slot.params.algorithm != params.algorithm) {
    // A reload changed the window: the old counts mean nothing in the new one.
    dropHits(unsentOf(slot.view));
    slot.view = eventual::View{};
  }
  slot.params = params;
  rollView(slot, now);
  slot.last_used = now;
  return slot;
}

void EventualEngine::touch(Shard& shard, Slot& slot, Micros now) {
  slot.last_used = now;
  if (slot.wait_gen != 0 || slot.quiet_until > now) {
    wake(shard, slot);
    return;
  }
  // A key new to the sidecar, or a quiet key whose window has ended (slotFor() rolled it), is
  // quiet again here when it may be, without a trip through the sync thread: a sidecar's many
  // keys far from their limits cost that thread and Redis nothing (docs/eventual.md, "Quiet
  // keys"). Its decisions queue it once it must go out (wake()).
  if (!slot.queued) {
    if (const Micros end = quietUntil(slot, now); end > now) {
      slot.quiet_until = end;
      return;
    }
  }
  enqueue(shard, slot);
}

void EventualEngine::wake(Shard& shard, Slot& slot) {
  const eventual::View& view = slot.view;
  if ((slot.wait_gen != 0 || slot.quiet_until >= 0) &&
      eventual::mustGoOut(view, slot.params, tuning_)) {
    enqueue(shard, slot);
  }
}

void EventualEngine::enqueue(Shard& shard, Slot& slot) {
  slot.wait_gen = 0;  // its entry in the wheel, if any, is stale now
  slot.quiet_until = -1;
  if (!slot.queued) {
    slot.queued = true;
    ++slot.refs;
    shard.queue.push_back(&slot);
  }
}

void EventualEngine::noteTight(bool was, bool is) {
  if (is && !was) {
    metrics_.switched.inc();
  }
}

Counter& EventualEngine::roundTrips(Route reason) {
  switch (reason) {
    case Route::kUnknown:
      return metrics_.trips_unknown;
    case Route::kStale:
      return metrics_.trips_stale;
    default:
      return metrics_.trips_tight;
  }
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
    touch(shard, slot, now);
    slots.push_back(&slot);
  }
  return slots;
}

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
    wake(shards_[cells[i]->shard], *cells[i]);
    total += added[i];
  }
  addPending(total);
}

void EventualEngine::mergeReading(Slot& slot, const eventual::KeyReading& reading, Micros now,
                                  Micros latency) {
  const std::int64_t before = unsentOf(slot.view);
  const bool was = slot.view.tight;
  eventual::Tuning tuning = tuning_;
  if (!regions_.empty()) {
    tuning.region_delay_us =
        2 * tuning_.sync_interval_us + replication_rtt_us_.load(std::memory_order_relaxed);
    tuning.tight_until_window_ends = true;
  }
  eventual::merge(slot.view, slot.params, reading, now, latency, tuning);
  noteTight(was, slot.view.tight);
  addPending(unsentOf(slot.view) - before);
}

}  // namespace sluice
