// The eventual engine's side of a round trip (an I/O thread's kDecide or kSync call, and a
// sync's entries): encoding a key's entry for the script, and merging the script's reply
// into the views (docs/eventual.md, "The script").
#include <algorithm>

#include "sluice/common/words.hpp"
#include "store/eventual/eventual_engine.hpp"
#include "store/eventual/eventual_views.hpp"

namespace sluice {

using eventual::ScriptOp;
using eventual_detail::isWindowed;
using eventual_detail::ShardLocks;

namespace {

/// The window's number (`window`'s digits) as a hash name's suffix: none for a key without
/// windows.
std::string_view windowSuffix(const words::Decimal& window, const LimitParams& params) {
  return isWindowed(params) ? window.view() : std::string_view{};
}

}  // namespace

std::string EventualEngine::hashKey(const std::string& key, std::int64_t window,
                                    const LimitParams& params) const {
  const words::Decimal digits(window);
  const std::string_view suffix = windowSuffix(digits, params);
  std::string hash;
  hash.reserve(key.size() + 2 + suffix.size());
  hash += key;
  hash += ":e";
  hash += suffix;
  return hash;
}

void EventualEngine::pushHashKeys(const Slot& slot, std::vector<std::string>& keys) const {
  const LimitParams& p = slot.params;
  const std::int64_t window = slot.view.cur.index;
  keys.push_back(hashKey(slot.redis_key, window, p));
  keys.push_back(isWindowed(p) ? hashKey(slot.redis_key, window - 1, p) : keys.back());
}

void EventualEngine::addHashKeys(const Slot& slot, redis::RespArgs& keys) const {
  // The current window's hash and the previous one's (the same hash for a key without
  // windows), named as hashKey() names them, written straight into the call.
  const std::int64_t window = slot.view.cur.index;
  keys.addJoined(slot.redis_key, ":e", windowSuffix(words::Decimal(window), slot.params));
  keys.addJoined(slot.redis_key, ":e", windowSuffix(words::Decimal(window - 1), slot.params));
}

void EventualEngine::appendEntry(Slot& slot, ScriptOp op, std::int64_t cost, bool shadow,
                                 int quota_group, std::vector<std::string>& keys,
                                 std::vector<std::string>& args) const {
  const eventual::View& view = slot.view;
  const LimitParams& p = slot.params;
  pushHashKeys(slot, keys);
  args.push_back(std::to_string(static_cast<int>(op)));
  args.push_back(std::to_string(static_cast<int>(p.algorithm)));
  args.push_back(std::to_string(p.limit));
  args.push_back(std::to_string(p.window_us));
  args.push_back(std::to_string(p.burst));
  args.push_back(std::to_string(view.cur.own));
  args.push_back(std::to_string(eventual::previousToSend(view)));
  // Windowed op 1 with other regions: acked carries the number of regions (the share's
  // divisor; the script reads acked for token_bucket and sketch cells only).
  const bool share = op == ScriptOp::kDecide && isWindowed(p) && !regions_.empty();
  args.push_back(std::to_string(share ? regions_.size() + 1 : view.cur.own_acked));
  args.push_back(std::to_string(std::max<std::int64_t>(cost, 0)));
  args.push_back(std::to_string((p.count_rejected ? 1 : 0) | (shadow ? 2 : 0) |
                                (std::max(quota_group, -1) + 1) * 4));
  if (op == ScriptOp::kDecide && isWindowed(p)) {
    // Near the limit, with other regions: the region's share (regionShare()).
    const auto [confirmed, cap] = regionShare(slot);
    args.push_back(std::to_string(confirmed));
    args.push_back(std::to_string(cap));
  } else {
    args.push_back(std::to_string(view.redis_tat.a));
    args.push_back(std::to_string(view.redis_tat.b));
  }
}

void EventualEngine::appendSyncEntry(const Slot& slot, bool withhold_current, redis::RespArgs& keys,
                                     redis::RespArgs& args) const {
  const eventual::View& view = slot.view;
  const LimitParams& p = slot.params;
  addHashKeys(slot, keys);
  args.addInt(static_cast<int>(p.algorithm));
  if (isWindowed(p)) {
    args.addInt(p.window_us);
    // A withheld current window sends what Redis confirmed: the script raises nothing.
    args.addInt(withhold_current ? view.cur.own_acked : view.cur.own);
    args.addInt(eventual::previousToSend(view));
    return;
  }
  for (const std::int64_t value : {p.limit, p.window_us, p.burst, view.cur.own, view.cur.own_acked,
                                   view.redis_tat.a, view.redis_tat.b}) {
    args.addInt(value);
  }
}

std::pair<std::int64_t, std::int64_t> EventualEngine::regionShare(const Slot& slot) const {
  if (regions_.empty() || !slot.view.tight) {
    return {0, 0};
  }
  const std::int64_t cap = eventual::regionCap(slot.params, regions_.size() + 1);
  if (cap <= 0) {
    return {0, 0};
  }
  return {slot.region_confirmed.settled(slot.view.cur.index, clock_.nowMicros(), regionSettle()),
          cap};
}

Micros EventualEngine::regionSettle() const {
  // A region's hit reaches another region's Redis within its sync, its replication step
  // (which may wait for the previous one's reply) and the link: 2 sync intervals + 2 round
  // trips. Twice that again covers a link that slows down to twice its slowest round trip
  // seen lately.
  const Micros rtt = replication_rtt_us_.load(std::memory_order_relaxed);
  return 2 * tuning_.sync_interval_us + std::max<Micros>(4 * rtt, 100'000);
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
  ShardLocks locks(
      lock_keys, [](std::string_view k) { return k; },
      [this](std::string_view key) -> Shard& { return shardOf(key); });
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

void EventualEngine::absorbOne(Shard& shard, Slot& slot, ScriptOp op, const std::int64_t* v,
                               Micros sent_at, Micros now) {
  // The window the call was built for is the one of its send time.
  const std::int64_t window =
      isWindowed(slot.params) ? floorDiv(sent_at, slot.params.window_us) : 0;
  eventual::KeyReading reading = eventual::readingOf(v, window);
  const std::int64_t charged = op == ScriptOp::kDecide ? v[eventual::kCharged] : 0;
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
  touch(shard, slot, now);
}

Status EventualEngine::absorb(const std::vector<EventualLimitRef>& limits, ScriptOp op,
                              const redis::Reply& reply, Micros sent_at, StoreResponse* response) {
  std::vector<std::vector<std::string>> cell_keys;
  std::vector<std::string_view> lock_keys;
  expand(limits, cell_keys, lock_keys);
  std::vector<std::int64_t> values;
  if (auto status = eventual::parseReply(reply, lock_keys.size(), values); !status) {
    return status;
  }
  const Micros now = clock_.nowMicros();
  if (response != nullptr) {
    response->outcomes.assign(limits.size(), Outcome{});
    response->allowed = true;
  }
  ShardLocks locks(
      lock_keys, [](std::string_view k) { return k; },
      [this](std::string_view key) -> Shard& { return shardOf(key); });
  std::size_t entry = 0;
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const EventualLimitRef& ref = limits[i];
    const std::int64_t* first = &values[entry * eventual::kScriptReplyStride];
    if (!cell_keys[i].empty()) {
      const LimitParams cell = eventual::sketchCellParams(ref.limit->params);
      for (const std::string& key : cell_keys[i]) {
        const std::int64_t* v = &values[entry * eventual::kScriptReplyStride];
        Shard& shard = shardOf(key);
        absorbOne(shard, slotFor(shard, key, cell, now), op, v, sent_at, now);
        ++entry;
      }
    } else {
      Shard& shard = shardOf(ref.key());
      absorbOne(shard, slotFor(shard, ref, now), op, first, sent_at, now);
      ++entry;
    }
    if (response != nullptr) {
      // A sketch's cells carry the client's decision alike: the first one's is the answer.
      Outcome& o = response->outcomes[i];
      o.allowed = first[eventual::kAllowed] != 0;
      o.remaining = first[eventual::kRemaining];
      o.reset_after_us = first[eventual::kResetAfter];
      o.retry_after_us = first[eventual::kRetryAfter];
      o.never = first[eventual::kNever] != 0;
    }
  }
  if (response != nullptr) {
    // The script charged with the store's semantics (quota groups included); the answer
    // follows the same rule on the same outcomes.
    response->allowed = requestAllowed(limits, response->outcomes, {});
  }
  return {};
}

}  // namespace sluice
