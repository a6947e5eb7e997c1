#include "store/redis/over_limit_cache.hpp"

#include <algorithm>

#include "sluice/rules/rules.hpp"
#include "sluice/store/ban_applies.hpp"

namespace sluice::redis {

bool OverLimitCache::answer(const StoreRequest& request, std::string_view prefix,
                            const Clock& clock, bool bans_only, StoreResponse& response) {
  if (entries_.empty() || request.limits.size() != 1 ||
      std::any_of(request.limits.begin(), request.limits.end(),
                  [](const StoreLimit& l) { return l.params.count_rejected; })) {
    return false;
  }
  const Micros now = clock.nowMicros();
  for (std::size_t i = 0; i < request.limits.size(); ++i) {
    const StoreLimit& limit = request.limits[i];
    if (limit.shadow || limit.quota_group >= 0 || limit.costOr(request.cost) <= 0) {
      continue;
    }
    auto it = entries_.find(BucketKey::redisKey(prefix, limit.key));
    if (it == entries_.end()) {
      continue;
    }
    const Entry& entry = it->second;
    if (entry.known_until <= now || !sameParams(entry.params, limit.params)) {
      entries_.erase(it);
      continue;
    }
    if ((bans_only || banApplies(request, limit)) && !entry.banned) {
      // Each denial of a limit with a penalty box counts towards a ban: only Redis counts.
      continue;
    }
    if (limit.costOr(request.cost) != entry.cost && !entry.banned) {
      // A larger cost is denied too, but until later (or never): only the same request
      // has an exactly known answer.
      continue;
    }
    response.allowed = false;
    response.outcomes.resize(request.limits.size());
    Outcome& o = response.outcomes[i];
    o.allowed = false;
    o.remaining = entry.remaining;
    o.retry_after_us = entry.denied_until - now;
    o.reset_after_us = std::max(entry.reset_until - now, o.retry_after_us);
    o.banned = entry.banned;
    return true;
  }
  return false;
}

void OverLimitCache::remember(const Context& request, const StoreResponse& response,
                              Micros sent_at) {
  const std::vector<std::string>& keys = request.keys;
  const bool cacheable = std::none_of(request.limits.begin(), request.limits.end(),
                                      [](const Limit& l) { return l.params.count_rejected; });
  for (std::size_t i = 0; i < request.limits.size(); ++i) {
    const Outcome& o = response.outcomes[i];
    const Limit& limit = request.limits[i];
    if (limit.cost <= 0) {
      continue;
    }
    if (response.allowed && o.allowed) {
      forget(keys[i]);
      continue;
    }
    if (!cacheable || o.allowed || o.never || limit.never_denies || o.retry_after_us <= 0 ||
        (request.bans_only && !o.banned)) {
      continue;
    }
    // Decided with a runtime override: the answer must say so, which a cached one cannot.
    if (std::any_of(response.overrides.begin(), response.overrides.end(),
                    [i](const AppliedOverride& a) { return a.limit == i; })) {
      forget(keys[i]);
      continue;
    }
    if (entries_.size() >= max_keys_) {
      evictExpired(sent_at);
      if (entries_.size() >= max_keys_) {
        return;
      }
    }
    // Measured from the send time: Redis decided no earlier, so the local entry expires
    // no later than the real denial does.
    Entry& entry = entries_[keys[i]];
    entry.denied_until = sent_at + o.retry_after_us;
    Micros known_for =
        limit.overridable ? std::min(o.retry_after_us, kOverridableFor) : o.retry_after_us;
    if (o.banned) {
      known_for = std::min(known_for, kBanRecheckEvery);
    }
    entry.known_until = sent_at + known_for;
    entry.banned = o.banned;
    entry.reset_until = sent_at + o.reset_after_us;
    entry.cost = limit.cost;
    entry.remaining = o.remaining;
    entry.params = limit.params;
  }
}

bool OverLimitCache::sameParams(const LimitParams& a, const LimitParams& b) {
  const SketchParams& x = a.sketch;
  const SketchParams& y = b.sketch;
  return a.algorithm == b.algorithm && a.limit == b.limit && a.window_us == b.window_us &&
         a.burst == b.burst && a.min_interval_us == b.min_interval_us &&
         a.count_rejected == b.count_rejected && a.warmup_us == b.warmup_us && a.shape == b.shape &&
         a.consistency == b.consistency && a.ban == b.ban && x.width == y.width &&
         x.depth == y.depth && x.counter_bits == y.counter_bits && x.bloom_bits == y.bloom_bits &&
         x.bloom_hashes == y.bloom_hashes && x.identity == y.identity;
}

void OverLimitCache::evictExpired(Micros now) {
  std::erase_if(entries_, [now](const auto& kv) { return kv.second.known_until <= now; });
}

}  // namespace sluice::redis
