// The eventual engine's local decisions: a request decided from the views, under their locks
// (any thread; docs/eventual.md, "How a request is decided").
#include <algorithm>
#include <boost/container/small_vector.hpp>
#include <optional>

#include "sluice/store/request_verdict.hpp"
#include "store/eventual/eventual_engine.hpp"
#include "store/eventual/eventual_views.hpp"

namespace sluice {

using eventual::Route;
using eventual_detail::constViews;
using eventual_detail::ShardLocks;

namespace {

bool anySketch(const std::vector<EventualLimitRef>& limits) {
  return std::any_of(limits.begin(), limits.end(),
                     [](const EventualLimitRef& r) { return EventualEngine::isSketch(*r.limit); });
}

}  // namespace

struct EventualEngine::LocalPass {
  LocalPass(const std::vector<EventualLimitRef>& l, const std::vector<int>& open_groups, Micros n,
            bool r)
      : limits(l), verdict(open_groups), now(n), reachable(r) {}

  const std::vector<EventualLimitRef>& limits;
  // Inline storage for the usual request of a few limits: no allocation per decision.
  /// Each limit's KeyHash, computed once for its shard's lock and its slot's lookup.
  boost::container::small_vector<std::uint64_t, 4> hashes;
  boost::container::small_vector<Slot*, 4> slots;  ///< null for a sketch limit
  boost::container::small_vector<BucketState, 4> states;
  boost::container::small_vector<Evaluation, 4> evaluations;
  /// A sketch limit's cell keys and slots (only when the request has one).
  std::vector<std::vector<std::string>> cell_keys;
  std::vector<std::vector<Slot*>> cells;
  /// Quota mode (request_verdict.hpp): the groups of the request's strict limits may pass.
  RequestVerdict verdict;
  std::optional<Route> trip;
  Micros now;
  bool reachable;
};

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
                                                    const std::vector<int>& open_groups,
                                                    std::vector<Outcome> outcomes) {
  Local local;
  local.outcomes = std::move(outcomes);
  local.outcomes.clear();
  LocalPass pass(limits, open_groups, clock_.nowMicros(), usable_.load(std::memory_order_acquire));
  for (const EventualLimitRef& ref : limits) {
    pass.hashes.push_back(KeyHash{}(ref.key()));
  }
  // A sketch limit is decided on its cells (docs/eventual.md, "sketch"): only then are keys
  // other than the limits' own locked, and vectors allocated.
  const bool sketches = anySketch(limits);
  std::vector<std::string_view> lock_keys;
  if (sketches) {
    expand(limits, pass.cell_keys, lock_keys);
    pass.cells.resize(limits.size());
  }
  auto shard_of = [this](std::string_view key) -> Shard& { return shardOf(key); };
  std::optional<ShardLocks> locks;
  if (sketches) {
    locks.emplace(
        lock_keys, [](std::string_view k) { return k; }, shard_of);
  } else {
    locks.emplace(
        pass.hashes, [](std::uint64_t hash) { return hash; },
        [this](std::uint64_t hash) -> Shard& { return shards_[hash % kShards]; });
  }
  for (std::size_t i = 0; i < limits.size(); ++i) {
    if (sketches && !pass.cell_keys[i].empty()) {
      decideSketchLimit(pass, i, cost, force);
    } else {
      decideCounterLimit(pass, i, cost, force);
    }
  }
  if (pass.trip && pass.verdict.allowed()) {
    local.decided = false;
    local.reason = *pass.trip;
    return local;
  }
  settle(pass, cost, charge, local);
  localDecisions(!pass.reachable).inc();
  return local;
}

void EventualEngine::decideSketchLimit(LocalPass& pass, std::size_t i, std::int64_t cost,
                                       bool force) {
  const EventualLimitRef& ref = pass.limits[i];
  const std::int64_t limit_cost = ref.limit->costOr(cost);
  const LimitParams& params = ref.limit->params;
  const Micros now = pass.now;
  std::vector<Slot*>& cells = pass.cells[i];
  cells = cellSlots(pass.cell_keys[i], params, now);
  const std::vector<const eventual::View*> views = constViews(cells);
  const SketchEvaluation se = eventual::decideSketch(views, params, now, limit_cost);
  Evaluation e;
  e.outcome = se.outcome;
  pass.states.push_back(BucketState{});
  pass.evaluations.push_back(e);
  pass.slots.push_back(nullptr);
  pass.verdict.add(*ref.limit, e.outcome.allowed);
  if (force || !e.outcome.allowed || pass.trip) {
    return;
  }
  const Route route =
      eventual::sketchRoute(views, params, now, limit_cost, tuning_, pass.reachable);
  if (route == Route::kTight || eventual::sketchTooClose(views, se, now, tuning_)) {
    noteTight(cells.front()->view.tight, true);
    cells.front()->view.tight = true;
    wake(shards_[cells.front()->shard], *cells.front());
    pass.trip = Route::kTight;
  } else if (route != Route::kLocal) {
    pass.trip = route;
  }
}

void EventualEngine::decideCounterLimit(LocalPass& pass, std::size_t i, std::int64_t cost,
                                        bool force) {
  const EventualLimitRef& ref = pass.limits[i];
  const std::int64_t limit_cost = ref.limit->costOr(cost);
  const Micros now = pass.now;
  const std::uint64_t hash = pass.hashes[i];
  Shard& shard = shards_[hash % kShards];
  Slot& slot = slotFor(shard, ref.key(), hash, ref.limit->params, now);
  touch(shard, slot, now);
  pass.states.push_back(eventual::merged(slot.view, slot.params, now));
  pass.evaluations.push_back(sluice::evaluate(slot.params, pass.states.back(), now, limit_cost));
  pass.slots.push_back(&slot);
  const Evaluation& e = pass.evaluations.back();
  // The view only ever under-counts (every entry is a lower bound of the real one), so
  // its denial is final whatever its age.
  pass.verdict.add(*ref.limit, e.outcome.allowed);
  if (force || !e.outcome.allowed || pass.trip) {
    return;
  }
  const Route route =
      eventual::route(slot.view, slot.params, now, limit_cost, tuning_, pass.reachable);
  if (route != Route::kLocal) {
    pass.trip = route;
  } else if (eventual::tooClose(slot.view, e, now, tuning_) || beyondShare(slot, e, limit_cost) ||
             (pass.reachable && unmeasured(slot) &&
              slot.view.blind + limit_cost > eventual::blindAllowance(slot.params, tuning_))) {
    slot.view.tight = true;
    noteTight(false, true);
    wake(shard, slot);
    pass.trip = Route::kTight;
  }
}

bool EventualEngine::unmeasured(const Slot& slot) const {
  // With regions, a key whose rate is not known yet has no margin: its local hits are blind.
  return !regions_.empty() && eventual_detail::isWindowed(slot.params) &&
         !slot.view.rate.measured();
}

bool EventualEngine::beyondShare(const Slot& slot, const Evaluation& e, std::int64_t cost) const {
  if (regions_.empty() || !eventual_detail::isWindowed(slot.params)) {
    return false;
  }
  const std::int64_t confirmed =
      slot.region_confirmed.settled(slot.view.cur.index, clock_.nowMicros(), regionSettle());
  const std::int64_t unconfirmed = std::max<std::int64_t>(slot.view.cur.own - confirmed, 0);
  return eventual::beyondRegionShare(unconfirmed, cost, e.outcome.remaining, regions_.size() + 1);
}

void EventualEngine::settle(LocalPass& pass, std::int64_t cost, bool charge, Local& local) {
  const bool denied = !pass.verdict.allowed();
  const Micros now = pass.now;
  local.decided = true;
  local.allowed = !denied;
  local.outcomes.reserve(pass.limits.size());
  for (std::size_t i = 0; i < pass.limits.size(); ++i) {
    const StoreLimit& limit = *pass.limits[i].limit;
    const LimitParams& params = limit.params;
    const bool sketch = pass.slots[i] == nullptr;
    const bool limit_allowed = pass.evaluations[i].outcome.allowed;
    if (denied && limit_allowed && !params.count_rejected) {
      // Not charged by a denied request: it answers with its bucket as it is (a check).
      local.outcomes.push_back(
          sketch ? eventual::decideSketch(constViews(pass.cells[i]), params, now, 0).outcome
                 : sluice::evaluate(pass.slots[i]->params, pass.states[i], now, 0).outcome);
    } else {
      local.outcomes.push_back(pass.evaluations[i].outcome);
    }
    // A request denied here is final: its count_rejected limits record the attempt even when
    // the caller would otherwise charge later (a mixed request).
    if (!charge && !(denied && params.count_rejected)) {
      continue;
    }
    const bool charged = (local.allowed && limit_allowed) || params.count_rejected;
    if (charged && sketch) {
      chargeCells(pass.cells[i], params, limit.costOr(cost), now, pass.reachable);
    } else if (charged) {
      chargeOne(*pass.slots[i], pass.states[i], pass.evaluations[i], limit.costOr(cost), now,
                pass.reachable);
    }
  }
}

void EventualEngine::chargeLater(const std::vector<EventualLimitRef>& limits, std::int64_t cost,
                                 const std::vector<Outcome>& outcomes, bool request_allowed) {
  const Micros now = clock_.nowMicros();
  const bool reachable = usable_.load(std::memory_order_acquire);
  // As in decideLocally(): the cells' keys only when the request has a sketch limit.
  const bool sketches = anySketch(limits);
  std::vector<std::vector<std::string>> cell_keys;
  std::vector<std::string_view> lock_keys;
  auto shard_of = [this](std::string_view key) -> Shard& { return shardOf(key); };
  std::optional<ShardLocks> locks;
  if (sketches) {
    expand(limits, cell_keys, lock_keys);
    locks.emplace(
        lock_keys, [](std::string_view k) { return k; }, shard_of);
  } else {
    locks.emplace(
        limits, [](const EventualLimitRef& r) { return r.key(); }, shard_of);
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
                  now, reachable);
      continue;
    }
    Shard& shard = shardOf(ref.key());
    Slot& slot = slotFor(shard, ref, now);
    touch(shard, slot, now);
    const BucketState state = eventual::merged(slot.view, slot.params, now);
    Evaluation e = sluice::evaluate(slot.params, state, now, limit_cost);
    if (e.outcome.allowed) {
      chargeOne(slot, state, e, limit_cost, now, reachable);
    } else if (limit_cost > 0) {
      // Another request took the last units while the strict limits were being asked: this
      // one was allowed on what the view said then, so it is charged all the same.
      if (slot.params.algorithm == Algorithm::kTokenBucket) {
        slot.view.local_tat = eventual::advanceTat(state, slot.params, now, limit_cost);
      }
      slot.view.cur.own += limit_cost;
      addPending(limit_cost);
      wake(shard, slot);
    }
  }
}

void EventualEngine::chargeOne(Slot& slot, const BucketState& state, const Evaluation& evaluation,
                               std::int64_t cost, Micros now, bool reachable) {
  const std::int64_t added = eventual::charge(slot.view, slot.params, state, evaluation, cost);
  if (reachable && (eventual::blindView(slot.view, now, tuning_) || unmeasured(slot))) {
    slot.view.blind += added;
  }
  addPending(added);
  wake(shards_[slot.shard], slot);
}

}  // namespace sluice
