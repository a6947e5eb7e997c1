#include "simulate/replayer.hpp"

#include <optional>
#include <utility>

#include "sluice/decision/decision_service.hpp"
#include "sluice/decision/limit_status_fill.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice::simulate {
namespace {
// Replays are deterministic: the sketch's keyed hash gets a fixed seed.
constexpr const char* kSketchSeed = "000102030405060708090a0b0c0d0e0f";
}  // namespace

Replayer::Replayer(std::vector<RuleSetPtr> sets, bool direct)
    : sets_(std::move(sets)), direct_enabled_(direct) {
  current_ = sets_.empty() ? nullptr : sets_.front();
  MemoryStoreOptions options;
  // Memory is bounded by the live buckets (expired ones are swept as time moves on); a
  // bound is kept only against a runaway log, far above any one process's default.
  options.max_keys = std::size_t{1} << 26;
  options.sketch_seed = kSketchSeed;
  store_ = makeMemoryStore(options, clock_, metrics_);
  exclusive_ = memoryExclusiveOf(*store_);
  DecisionServiceParts parts;
  parts.rules = [this] { return current_; };
  parts.store = store_;
  parts.clock = &clock_;
  service_ = makeDecisionService(std::move(parts));
}

Replayer::~Replayer() = default;

const RuleSetPtr& Replayer::setFor(const std::string& rules_hash) const {
  if (sets_.size() > 1) {
    for (const RuleSetPtr& set : sets_) {
      if (set->hash == rules_hash) {
        return set;
      }
    }
  }
  return sets_.empty() ? current_ : sets_.front();
}

void Replayer::start(Micros time_us, const std::string& rules_hash) {
  if (sets_.size() > 1) {
    current_ = setFor(rules_hash);
  }
  clock_.moveTo(time_us);
}

Result<Decision> Replayer::decide(Micros time_us, const std::string& rules_hash,
                                  DecisionRequest&& request) {
  std::optional<Result<Decision>> answer;
  std::erase_if(prepared_, [&request](const Prepared& p) { return p.request == &request; });
  start(time_us, rules_hash);
  service_->decide(std::move(request),
                   [&answer](Result<Decision> decision) { answer.emplace(std::move(decision)); });
  if (!answer) {
    return makeError(ErrorKind::kInternal, "the memory store did not answer inline");
  }
  return std::move(*answer);
}

namespace {

/// A request the direct path decides exactly as the decision service would: nothing of
/// what the service does besides match, key, store and assemble.
bool plainRequest(const DecisionRequest& request) {
  return request.descriptor_hits.empty() && request.descriptor_limits.empty() && !request.refund &&
         request.descriptor_refunds.empty() && request.charge != Charge::kReport &&
         !request.envoy_api && request.lease == 0 && request.reservation.op == HoldOp::kNone;
}

/// A matched rule the direct path takes: not a candidate (its own bucket and status), not a
/// calendar limit whose zone the request names, not a concurrency limit (a lease).
bool plainRule(const RateLimit& rule) {
  return !rule.candidate && rule.calendar_zone_from.empty() &&
         rule.params.algorithm != Algorithm::kConcurrency;
}

/// Resizes `items` to `n`, moving the elements it drops to `spare` and taking the elements
/// it adds from there first: their strings and vectors keep their storage.
template <typename T>
void resizeKeeping(std::vector<T>& items, std::size_t n, std::vector<T>& spare) {
  while (items.size() > n) {
    spare.push_back(std::move(items.back()));
    items.pop_back();
  }
  while (items.size() < n) {
    if (spare.empty()) {
      items.emplace_back();
    } else {
      items.push_back(std::move(spare.back()));
      spare.pop_back();
    }
  }
}

}  // namespace

std::size_t Replayer::freeSlot() const {
  for (std::size_t slot = 0;; ++slot) {
    bool held = false;
    for (const Prepared& p : prepared_) {
      held = held || p.slot == slot;
    }
    if (!held) {
      return slot;  // prepared_ holds at most kAhead of the kAhead + 1 slots
    }
  }
}

void Replayer::prepare(const std::string& rules_hash, const DecisionRequest& request) {
  if (!direct_enabled_) {
    return;
  }
  for (const Prepared& p : prepared_) {
    if (p.request == &request) {
      return;
    }
  }
  const RuleSetPtr& set = setFor(rules_hash);
  if (!set) {
    return;
  }
  if (prepared_.size() == kAhead) {
    prepared_.erase(prepared_.begin());
  }
  const std::size_t index = freeSlot();
  Slot& slot = slots_[index];
  if (matchDirect(request, *set, slot) != DirectResult::kDecided) {
    return;
  }
  slot.hashes.clear();
  for (const StoreLimit& limit : slot.store_request.limits) {
    slot.hashes.push_back(exclusive_->prefetchKey(limit.key));
  }
  prepared_.push_back(Prepared{&request, set.get(), index, 0});
}

void Replayer::advancePrefetch() {
  for (Prepared& p : prepared_) {
    if (++p.age <= 2) {
      for (const std::uint64_t hash : slots_[p.slot].hashes) {
        exclusive_->prefetchStep(hash, p.age);
      }
    }
  }
}

Replayer::DirectResult Replayer::matchDirect(const DecisionRequest& request, const RuleSet& set,
                                             Slot& slot) {
  if (!plainRequest(request)) {
    return DirectResult::kNotDirect;
  }
  if (direct_.domain_set != &set || direct_.domain_name != request.domain) {
    direct_.domain_set = &set;
    direct_.domain_name.assign(request.domain);
    direct_.domain = set.findDomain(request.domain);
  }
  const DomainConfig* domain = direct_.domain;
  if (domain == nullptr) {
    return DirectResult::kNotDirect;  // the service answers an unknown domain
  }
  RequestMatch& match = slot.match;
  matchRequestInto(*domain, request.descriptors, match);
  for (const DescriptorMatch& dm : match.descriptors) {
    for (const MatchedLimit& ml : dm.limits) {
      if (!plainRule(*ml.limit)) {
        return DirectResult::kNotDirect;
      }
    }
  }
  Decision& decision = slot.decision;
  decision.allowed = true;
  decision.degraded = false;
  decision.domain_known = true;
  decision.decided_at_us = 0;
  decision.domain = domain;
  decision.holds_expired = 0;
  buildDirect(request, slot);
  return DirectResult::kDecided;
}

Replayer::DirectResult Replayer::decideDirect(DecisionRequest& request,
                                              const DecisionRequest* prepared_as) {
  if (!current_) {
    return DirectResult::kNotDirect;
  }
  std::size_t index = kAhead + 1;
  bool hashed = false;
  for (auto it = prepared_.begin(); it != prepared_.end(); ++it) {
    if (it->request == prepared_as) {
      if (it->set == current_.get()) {
        index = it->slot;
        hashed = true;
      }
      prepared_.erase(it);
      break;
    }
  }
  if (index > kAhead) {
    index = freeSlot();
    if (matchDirect(request, *current_, slots_[index]) != DirectResult::kDecided) {
      return DirectResult::kNotDirect;
    }
  }
  active_ = index;
  Slot& slot = slots_[index];
  Decision& decision = slot.decision;
  lend(request, decision.request);
  StoreRequest& store_request = slot.store_request;
  if (store_request.limits.empty()) {
    advancePrefetch();
    return DirectResult::kDecided;  // nothing to evaluate: allowed, decided at no instant
  }
  StoreResponse& response = slot.response;
  exclusive_->evaluateExclusiveHashed(store_request, response,
                                      hashed ? slot.hashes.data() : nullptr);
  // After the store's work: what this asks for has the next decision's time to arrive.
  advancePrefetch();
  const auto& positions = slot.positions;
  for (std::size_t i = 0; i < positions.size() && i < response.outcomes.size(); ++i) {
    decision.descriptors[positions[i].first].limits[positions[i].second].outcome =
        response.outcomes[i];
  }
  for (std::size_t i = 0; i < positions.size() && i < response.holds_expired.size(); ++i) {
    decision.descriptors[positions[i].first].limits[positions[i].second].holds_expired =
        response.holds_expired[i];
    decision.holds_expired += response.holds_expired[i];
  }
  decision.allowed = response.allowed;
  decision.degraded = response.degraded;
  decision.decided_at_us = response.at_us;
  return DirectResult::kDecided;
}

void Replayer::lend(DecisionRequest& request, DecisionRequest& to) {
  // The members a plain request may hold (plainRequest()); its per-descriptor vectors are
  // empty, as are `to`'s, which only ever holds plain requests.
  to.domain.assign(request.domain);
  to.client_id.assign(request.client_id);
  to.descriptors.swap(request.descriptors);
  to.hits = request.hits;
  to.refund = request.refund;
  to.charge = request.charge;
  to.envoy_api = request.envoy_api;
  to.lease = request.lease;
  to.reservation.op = request.reservation.op;
  to.reservation.ttl_us = request.reservation.ttl_us;
  if (!request.reservation.id.empty() || !to.reservation.id.empty()) {
    to.reservation.id.assign(request.reservation.id);
  }
}

void Replayer::buildDirect(const DecisionRequest& request, Slot& slot) {
  Decision& decision = slot.decision;
  const RequestMatch& match = slot.match;
  StoreRequest& store_request = slot.store_request;
  store_request.cost = request.hits;
  store_request.charge = request.charge;
  store_request.lease = 0;
  store_request.hold.op = HoldOp::kNone;
  slot.positions.clear();
  std::size_t limits_used = 0;
  resizeKeeping(decision.descriptors, match.descriptors.size(), direct_.spare_descriptors);
  for (std::size_t d = 0; d < match.descriptors.size(); ++d) {
    const DescriptorMatch& dm = match.descriptors[d];
    DescriptorStatus& ds = decision.descriptors[d];
    ds.matched = dm.matched;
    ds.node = dm.node;
    ds.metadata_json.clear();  // the merged metadata is left out (no report reads it)
    resizeKeeping(ds.limits, dm.limits.size(), direct_.spare_statuses);
    for (std::size_t l = 0; l < dm.limits.size(); ++l) {
      const MatchedLimit& ml = dm.limits[l];
      LimitStatus& status = ds.limits[l];
      if (status.rule == ml.limit && !status.from_request && !status.override_value) {
        // The same rule as this status's last request (hence the same node): only what
        // the store answers changes.
        status.holds_expired = 0;
        status.outcome = Outcome{};
      } else {
        fillLimitStatus(status, ml);
      }
      if (ml.limit->unlimited) {
        continue;
      }
      if (limits_used == store_request.limits.size()) {
        if (direct_.spare_limits.empty()) {
          store_request.limits.emplace_back();
          slot.store_rules.push_back(nullptr);
        } else {
          store_request.limits.push_back(std::move(direct_.spare_limits.back().first));
          slot.store_rules.push_back(direct_.spare_limits.back().second);
          direct_.spare_limits.pop_back();
        }
      }
      StoreLimit& limit = store_request.limits[limits_used];
      const RateLimit*& built_from = slot.store_rules[limits_used];
      ++limits_used;
      BucketKey::assignStoreKey(limit.key, request.client_id, ml.bucket_key);
      if (built_from != ml.limit) {
        built_from = ml.limit;
        limit.params = ml.limit->params;
        limit.shadow = ml.limit->shadow_mode;
        limit.refund = false;
        // The replay's memory store has no runtime overrides: none can apply.
        limit.override_rule = nullptr;
      }
      limit.cost = request.hits;
      limit.quota_group = ml.limit->quota_mode ? static_cast<int>(d) : -1;
      slot.positions.emplace_back(d, l);
    }
  }
  while (store_request.limits.size() > limits_used) {
    direct_.spare_limits.emplace_back(std::move(store_request.limits.back()),
                                      slot.store_rules.back());
    store_request.limits.pop_back();
    slot.store_rules.pop_back();
  }
}

std::uint64_t Replayer::capacityEvictions() {
  return metrics_.counter("memory_store_evictions_total", {{"reason", "capacity"}}).value();
}

}  // namespace sluice::simulate
