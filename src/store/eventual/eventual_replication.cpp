// The eventual engine's replication to the other regions (its executor's thread): this
// region's cumulative count of each key, as its Redis confirmed it, is written into every
// other region's Redis (docs/eventual.md, "Regions").
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdint>

#include "store/eventual/eventual_engine.hpp"
#include "store/redis/cluster_slots.hpp"

namespace sluice {

namespace {

constexpr std::size_t kReplicasPerCall = 256;
constexpr std::size_t kReplicasPerTick = 4096;

}  // namespace

void EventualEngine::enqueueReplica(const std::string& hash, const std::string& key,
                                    const LimitParams& params, std::int64_t value) {
  if (value <= 0) {
    return;
  }
  bool everywhere = true;  // every other region confirmed this value already
  for (auto& region : regions_) {
    auto confirmed = region->confirmed.find(hash);
    if (confirmed != region->confirmed.end() && confirmed->second.value >= value) {
      continue;
    }
    everywhere = false;
    auto it = region->queue.find(hash);
    if (it == region->queue.end()) {
      if (region->queue.size() >= options_.replication_queue) {
        region->dropped->inc();
        continue;
      }
      it = region->queue.emplace(hash, Replica{hash, key, params, 0, 0, clock_.monotonicMicros()})
               .first;
    }
    it->second.value = std::max(it->second.value, value);
    it->second.params = params;
  }
  if (everywhere && !regions_.empty()) {
    // Nothing new to send: the share of the tight round trips still needs the confirmed value
    // (the slot may be new since it was confirmed).
    noteConfirmed(hash, key);
  }
}

void EventualEngine::updateReplicationLag(Region& region, Micros steady) {
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
}

void EventualEngine::replicate(Region& region) {
  updateReplicationLag(region, clock_.monotonicMicros());
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
  std::size_t taken = 0;
  auto by_master = takeReplicas(region, taken);
  if (taken == 0) {
    setRegionReachable(region, false, "no master for the slots of its updates");
    return;
  }
  auto sent = std::make_shared<std::vector<Replica>>();
  sent->reserve(taken);
  std::vector<ReplicaCall> calls = buildReplicaCalls(region, by_master, *sent, clock_.nowMicros());
  region.in_flight = true;
  auto outstanding = std::make_shared<std::size_t>(calls.size());
  auto failure = std::make_shared<std::string>();  // the first failed call's reason
  const Micros sent_steady = clock_.monotonicMicros();
  // A link between regions may take a few hundred ms each way: a deadline of 1 s at least
  // (a shorter one failed every step through a 200 ms link, and nothing was confirmed).
  const auto timeout = std::max(std::chrono::milliseconds(1'000), options_.sync_interval * 4);
  for (ReplicaCall& call : calls) {
    auto on_reply = [this, &region, sent, first = call.first, count = call.count, outstanding,
                     failure, sent_steady](Result<redis::Reply> reply) {
      onReplicated(region, *sent, first, count, reply, sent_steady, *failure);
      if (--*outstanding == 0) {
        // Reachable when every call of the step (every master of a cluster) answered.
        setRegionReachable(region, failure->empty(), *failure);
        region.in_flight = false;
      }
    };
    if (clustered) {
      call.args.append(call.keys);
      backend.evalScriptOnMasterOf(call.slot, std::move(call.args), timeout, std::move(on_reply));
    } else {
      backend.evalScript(std::move(call.keys), std::move(call.args), timeout, std::move(on_reply));
    }
  }
}

std::unordered_map<int, std::vector<EventualEngine::Replica>> EventualEngine::takeReplicas(
    Region& region, std::size_t& taken) {
  // One call per kReplicasPerCall keys; a cluster: per master of their slots, the keys (of
  // many slots) named in the arguments of a call without declared keys, as the sync does.
  // A key whose slot moved meanwhile fails its call ("non local key"): the router reads the
  // topology again and the update, back in the queue, goes to the new master next time.
  redis::RedisBackend& backend = *region.backend;
  std::unordered_map<int, std::vector<Replica>> by_master;  // one node: master 0
  taken = 0;
  for (auto it = region.queue.begin(); it != region.queue.end() && taken < kReplicasPerTick;) {
    int master = 0;
    if (backend.clustered()) {
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
  return by_master;
}

std::vector<EventualEngine::ReplicaCall> EventualEngine::buildReplicaCalls(
    Region& region, std::unordered_map<int, std::vector<Replica>>& by_master,
    std::vector<Replica>& sent, Micros now) const {
  const bool clustered = region.backend->clustered();
  const std::string writer = "r" + options_.region;
  std::vector<ReplicaCall> calls;
  for (auto& [master, replicas] : by_master) {
    for (std::size_t i = 0; i < replicas.size(); ++i) {
      Replica& r = replicas[i];
      if (i % kReplicasPerCall == 0) {
        ReplicaCall& call = calls.emplace_back();
        call.first = sent.size();
        call.slot = clustered ? redis::keyHashSlot(r.hash) : 0;
        call.args.addInt(now);
        call.args.add(writer);
      }
      ReplicaCall& call = calls.back();
      call.keys.add(r.hash);
      call.keys.add(r.hash);
      const LimitParams& p = r.params;
      for (std::int64_t value :
           {std::int64_t{0}, static_cast<std::int64_t>(p.algorithm), p.limit, p.window_us, p.burst,
            r.value, std::int64_t{0}, r.acked, std::int64_t{0}, std::int64_t{0}, std::int64_t{0},
            std::int64_t{0}}) {
        call.args.addInt(value);
      }
      ++call.count;
      sent.push_back(std::move(r));
    }
  }
  return calls;
}

void EventualEngine::onReplicated(Region& region, std::vector<Replica>& sent, std::size_t first,
                                  std::size_t count, const Result<redis::Reply>& reply,
                                  Micros sent_steady, std::string& failure) {
  std::vector<std::int64_t> values;
  const bool ok = reply && eventual::parseReply(*reply, count, values).ok();
  if (ok) {
    // The slowest region counts; an old peak fades by a quarter per reply.
    const Micros rtt = clock_.monotonicMicros() - sent_steady;
    const Micros old = replication_rtt_us_.load(std::memory_order_relaxed);
    replication_rtt_us_.store(std::max(rtt, old - old / 4), std::memory_order_relaxed);
  } else if (failure.empty()) {
    failure = reply ? "unexpected reply" : reply.error().message;
  }
  for (std::size_t i = first; i < first + count; ++i) {
    Replica& r = sent[i];
    if (ok) {
      auto [c, fresh] = region.confirmed.try_emplace(r.hash, r);
      c->second.value = std::max(c->second.value, r.value);
      c->second.params = r.params;
      c->second.key = r.key;
      noteConfirmed(r.hash, r.key);
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
}

void EventualEngine::noteConfirmed(const std::string& hash, const std::string& key) {
  // What every other region holds of this region's count: the least of their confirmations
  // (a region that confirmed nothing yet holds, as far as this sidecar knows, nothing).
  std::int64_t least = INT64_MAX;
  for (const auto& other : regions_) {
    auto it = other->confirmed.find(hash);
    least = std::min(least, it != other->confirmed.end() ? it->second.value : 0);
  }
  if (least <= 0 || least == INT64_MAX || key.empty()) {
    return;
  }
  Shard& shard = shardOf(key);
  std::lock_guard lock(shard.mutex);
  Slot* found = shard.slots.find(key, KeyHash{}(key));
  if (found == nullptr) {
    return;
  }
  Slot& slot = *found;
  if (hashKey(slot.redis_key, slot.view.cur.index, slot.params) != hash) {
    return;  // another window (or a key of the same name with other parameters)
  }
  slot.region_confirmed.note(slot.view.cur.index, least, clock_.nowMicros(), regionSettle());
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
  const Micros steady = clock_.monotonicMicros();
  std::size_t keys = 0;
  for (const auto& [hash, confirmed] : region.confirmed) {
    auto it = region.queue.find(hash);
    if (it == region.queue.end()) {
      if (region.queue.size() >= options_.replication_queue) {
        region.dropped->inc();
        continue;
      }
      it = region.queue.emplace(hash, Replica{hash, confirmed.key, confirmed.params, 0, 0, steady})
               .first;
    }
    it->second.value = std::max(it->second.value, confirmed.value);
    ++keys;
  }
  if (keys > 0) {
    spdlog::info("eventual limits: connection to region {} renewed; sending the values of {} keys",
                 region.config.name, keys);
  }
}

}  // namespace sluice
