#include "sluice/decision/decision_service.hpp"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "decision/calendar_zone.hpp"
#include "decision/envoy_semantics.hpp"
#include "decision/lease_grant.hpp"
#include "decision/reservation_steps.hpp"
#include "sluice/decision/lease_id.hpp"
#include "sluice/decision/limit_status_fill.hpp"

namespace sluice {
namespace {

/// The next element of `items` to fill, reusing one left by an earlier decision (its
/// strings keep their capacity); `used` counts those filled.
template <typename T>
T& reuseNext(std::vector<T>& items, std::size_t& used) {
  if (used == items.size()) {
    items.emplace_back();
  }
  return items[used++];
}

/// The rule's name when a runtime override may replace this limit, else null: not for
/// `overridable: false`, sketches (one sketch per rule) and eventual limits (decided from
/// local views).
const std::string* overrideRuleOf(const RateLimit& rule) {
  if (!rule.overridable || rule.params.algorithm == Algorithm::kSketch ||
      rule.params.consistency == Consistency::kEventual) {
    return nullptr;
  }
  return &rule.name;
}

/// This thread's spares. Of a decision only the storage worth keeping is kept (its
/// descriptors, their limits and strings; the request-side limits; the candidates' outcomes
/// of a rule set with candidate limits; a reserve's id): moving these costs less than
/// moving a whole Decision in and out. A store that answers later (Redis)
/// has many decisions in flight on a thread: the spares are a stack of up to kMaxSpares,
/// so that each of them finds storage when the thread is warm.
constexpr std::size_t kMaxSpares = 256;

struct SpareDecision {
  // For emplace_back(): clang before 16 has no parenthesized aggregate initialization.
  SpareDecision(std::vector<DescriptorStatus>&& d,
                std::vector<std::shared_ptr<const RateLimit>>&& r, std::vector<CandidateStatus>&& c,
                std::string&& id)
      : descriptors(std::move(d)),
        request_limits(std::move(r)),
        candidates(std::move(c)),
        reservation_id(std::move(id)) {}

  std::vector<DescriptorStatus> descriptors;
  std::vector<std::shared_ptr<const RateLimit>> request_limits;
  std::vector<CandidateStatus> candidates;
  std::string reservation_id;  ///< a reserve's id (ReservationOutcome::id)
};

struct Spares {
  std::vector<DecisionRequest> requests;
  std::vector<SpareDecision> decisions;
};

thread_local Spares t_spares;

/// The descriptors matched against the rules: those with a request-side limit are left
/// out (empty: they match nothing and replace nothing, as in envoyproxy/ratelimit).
const std::vector<Descriptor>& descriptorsToMatch(const DecisionRequest& request,
                                                  std::vector<Descriptor>& storage) {
  bool any = false;
  for (const auto& limit : request.descriptor_limits) {
    any = any || limit.has_value();
  }
  if (!any) {
    return request.descriptors;
  }
  storage = request.descriptors;
  for (std::size_t d = 0; d < storage.size() && d < request.descriptor_limits.size(); ++d) {
    if (request.descriptor_limits[d]) {
      storage[d].clear();
    }
  }
  return storage;
}

/// Where one store limit's outcome goes back: (descriptor index, limit index), or for a
/// candidate its index in Decision::candidates.
struct LimitPosition {
  std::size_t descriptor = 0;
  std::size_t limit = 0;
  bool candidate = false;
};

/// Readies `decision` for a new request with the storage of this thread's spare when there
/// is one, else with its own (left by an earlier decision): its vectors and strings keep
/// their capacity.
void prepareDecision(Decision& decision) {
  if (!t_spares.decisions.empty()) {
    SpareDecision& spare = t_spares.decisions.back();
    decision.descriptors = std::move(spare.descriptors);
    decision.request_limits = std::move(spare.request_limits);
    decision.candidates = std::move(spare.candidates);
    decision.reservation.id = std::move(spare.reservation_id);
    t_spares.decisions.pop_back();
  }
  decision.allowed = true;
  decision.degraded = false;
  decision.domain_known = true;
  decision.decided_at_us = 0;
  decision.domain = nullptr;
  decision.rules.reset();
  decision.metadata_json.clear();
  decision.request_limits.clear();
  decision.lease_id.clear();
  decision.lease_us = 0;
  reservation_detail::resetOutcome(decision.reservation);
  decision.holds_expired = 0;
  decision.candidates.clear();
  // The descriptors stay: decide() resizes and refills them.
}

/// One decision between decide() and its answer, and the storage that building its store
/// request needs. A service keeps these for reuse: the vectors and strings keep their
/// capacity, so a warm thread builds the match, the store keys and the store request
/// without allocating; and the store's callback captures only the service and the slot
/// (two pointers: stored in place by std::function). The decision is built in place, the
/// request moved into it at once: each moves only when handed on.
struct PendingDecision {
  /// The answer, kept in the slot and handed to the callback by reference: the decision is
  /// not moved on its way out (the callback may move it out, recycleDecision() does).
  Result<Decision> answer{Decision{}};
  Decision& decision = *answer;
  /// The callback of a decision the store answers later; one the store answers within
  /// evaluate() (the memory store) is the caller's, reached through `caller_done`.
  DecisionService::Callback done;
  /// While evaluate() runs: the caller's callback, and the flag that says the store answered
  /// within the call (so that the callback need not move into `done`); null otherwise.
  DecisionService::Callback* caller_done = nullptr;
  bool* answered_within = nullptr;
  Micros started = 0;
  RequestMatch match;
  std::vector<Descriptor> without_overrides;
  StoreRequest store_request;
  std::vector<LimitPosition> positions;
  bool takes_lease = false;  ///< a concurrency limit takes store_request.lease if admitted
};

class DecisionServiceImpl final : public DecisionService {
 public:
  explicit DecisionServiceImpl(DecisionServiceParts parts) : parts_(std::move(parts)) {}

  void decide(DecisionRequest&& incoming, Callback done) override {
    PendingDecision& pending = takePending();
    pending.decision.request = std::move(incoming);
    decidePending(pending, done);
  }

  Status decideInPlace(const RequestFill& fill, Callback& done) override {
    PendingDecision& pending = takePending();
    pending.decision.request.clearForReuse();
    if (Status filled = fill(pending.decision.request); !filled) {
      releasePending(pending);
      return filled;
    }
    decidePending(pending, done);
    return {};
  }

 private:
  /// decide() on the request in `pending`; `done` is the caller's, alive during the call.
  void decidePending(PendingDecision& pending, Callback& done) {
    // The one reading of the clock a decision needs: the observers' start, and the instant
    // the store decides at (StoreRequest::now_us).
    const Micros started = parts_.clock != nullptr ? parts_.clock->nowMicros() : 0;
    RuleSetPtr rules = parts_.rules();
    if (!rules) {
      fail(pending.decision.request, makeError(ErrorKind::kUnavailable, "rules are not loaded"),
           started, done);
      releasePending(pending);
      return;
    }
    pending.started = started;
    Decision& decision = pending.decision;
    prepareDecision(decision);
    if (Status adopted = adoptRequest(decision.request); !adopted) {
      fail(decision.request, adopted.error(), started, done);
      releasePending(pending);
      return;
    }
    const DecisionRequest& request = decision.request;
    decision.rules = std::move(rules);
    decision.domain = decision.rules->findDomain(request.domain);
    if (decision.domain == nullptr) {
      answerUnknownDomain(pending, started, done);
      return;
    }

    matchRequestInto(*decision.domain, descriptorsToMatch(request, pending.without_overrides),
                     pending.match);
    std::string zone_problem = buildStoreRequest(pending);
    StoreRequest& store_request = pending.store_request;
    chooseLease(pending);
    const std::vector<LimitPosition>& positions = pending.positions;
    if (!zone_problem.empty()) {
      fail(pending.decision.request,
           makeError(ErrorKind::kInvalidArgument, std::move(zone_problem)), started, done);
      releasePending(pending);
      return;
    }
    store_request.hold.op = HoldOp::kNone;
    store_request.now_us = started;
    if (request.reservation.op != HoldOp::kNone) {
      if (Status step = prepareReservation(request, store_request); !step) {
        fail(pending.decision.request, step.error(), started, done);
        releasePending(pending);
        return;
      }
    }
    if (std::string refused = refusal(store_request, positions, decision); !refused.empty()) {
      fail(pending.decision.request, makeError(ErrorKind::kInvalidArgument, std::move(refused)),
           started, done);
      releasePending(pending);
      return;
    }
    if (store_request.limits.empty()) {
      reservation_detail::settleWithoutLimits(request, store_request, started, decision);
      succeed(pending, done);
      releasePending(pending);
      return;
    }
    PendingDecision* slot = &pending;
    // The store may answer before evaluate() returns (then through the caller's callback, and
    // the slot is not touched after), or later (Redis: the callback moves into the slot). The
    // slot is given back only once its answer is handed on, so a decision started from
    // inside the answer takes another one.
    bool answered = false;
    pending.caller_done = &done;
    pending.answered_within = &answered;
    parts_.store->evaluate(
        store_request, [this, slot](Result<StoreResponse>&& response) { answer(*slot, response); });
    if (!answered) {
      pending.done = std::move(done);
      pending.caller_done = nullptr;
      pending.answered_within = nullptr;
    }
  }

  /// The request as it is decided: Envoy's endpoints are charged as --envoy-charge says (the
  /// request keeps the charge it was decided with, so the access log, and a replay of it,
  /// says how it was charged); a refund's `lease_id` entries are taken out (lease_id.hpp).
  Status adoptRequest(DecisionRequest& request) const {
    if (request.envoy_api && request.charge == Charge::kAllOrNothing) {
      request.charge = parts_.envoy_charge;
    }
    if (request.refund || !request.descriptor_refunds.empty()) {
      if (auto bad = decision_detail::takeLeaseEntries(request); !bad.empty()) {
        return makeError(ErrorKind::kInvalidArgument, std::move(bad));
      }
    }
    return {};
  }

  /// A domain the rules do not have: nothing limits the request, but a reservation step on a
  /// misspelt domain must not look granted (no rule can hold or settle anything).
  void answerUnknownDomain(PendingDecision& pending, Micros started, Callback& done) {
    Decision& decision = pending.decision;
    const DecisionRequest& request = decision.request;
    if (request.reservation.op != HoldOp::kNone) {
      fail(request,
           makeError(ErrorKind::kInvalidArgument,
                     "domain: \"" + request.domain + "\" is not a domain of the rules"),
           started, done);
    } else {
      decision.domain_known = false;
      decision.descriptors.clear();
      decision.descriptors.resize(request.descriptors.size());
      succeed(pending, done);
    }
    releasePending(pending);
  }

  /// The lease of the request: a new one when a (live) concurrency limit may take it, else
  /// the one a refund names (0: none).
  static void chooseLease(PendingDecision& pending) {
    StoreRequest& store_request = pending.store_request;
    pending.takes_lease = false;
    for (std::size_t i = 0; i < store_request.limits.size(); ++i) {
      pending.takes_lease = pending.takes_lease ||
                            (!pending.positions[i].candidate &&
                             decision_detail::takesLease(store_request, store_request.limits[i]));
    }
    store_request.lease =
        pending.takes_lease ? decision_detail::drawLeaseNumber() : pending.decision.request.lease;
  }

  /// A reservation step's checks (reservation_steps.hpp) and its store call's HoldCall; the
  /// store must hold reservations.
  Status prepareReservation(const DecisionRequest& request, StoreRequest& store_request) const {
    if (!parts_.store->holdsReservations()) {
      return makeError(
          ErrorKind::kInvalidArgument,
          "reservations are not available on the " + std::string(parts_.store->kind()) + " store");
    }
    return reservation_detail::prepareStep(request, parts_.reservations, store_request);
  }

  /// Fills the decision's descriptor statuses and the one store request from the match:
  /// each limit charged its own descriptor's hits, a request-side limit in place of the
  /// rules' (`positions` says where each store limit's status is). Returns "", or why the
  /// request cannot be decided: a calendar limit's zone that the request names wrongly.
  std::string buildStoreRequest(PendingDecision& pending) {
    Decision& decision = pending.decision;
    const DecisionRequest& request = decision.request;
    const RequestMatch& match = pending.match;
    StoreRequest& store_request = pending.store_request;
    store_request.cost = request.hits;
    store_request.charge = request.charge;
    std::size_t limits_used = 0;  // store_request.limits filled, reusing the slot's
    pending.positions.clear();
    std::string zone_problem;
    decision.descriptors.resize(match.descriptors.size());
    for (std::size_t d = 0; d < match.descriptors.size(); ++d) {
      const DescriptorMatch& dm = match.descriptors[d];
      DescriptorStatus& ds = decision.descriptors[d];
      // A node whose only limit is a candidate is not a live match.
      ds.matched =
          dm.matched && std::any_of(dm.limits.begin(), dm.limits.end(),
                                    [](const MatchedLimit& ml) { return !ml.limit->candidate; });
      ds.node = dm.node;
      if (dm.node != nullptr) {
        ds.metadata_json.assign(dm.node->metadata_json);
      } else {
        ds.metadata_json.clear();
      }
      std::int64_t descriptor_cost = request.hits;
      if (d < request.descriptor_hits.size() && request.descriptor_hits[d]) {
        descriptor_cost = *request.descriptor_hits[d];
      }
      if (d < request.descriptor_limits.size() && request.descriptor_limits[d]) {
        addRequestLimit(pending, d, descriptor_cost, limits_used);
        continue;
      }
      std::size_t used = 0;  // ds.limits filled, reusing a spare decision's
      for (const MatchedLimit& ml : dm.limits) {
        if (ml.limit->candidate) {
          addCandidate(pending, d, ml, descriptor_cost, limits_used);
          continue;
        }
        fillLimitStatus(reuseNext(ds.limits, used), ml);
        if (ml.limit->unlimited) {
          continue;
        }
        StoreLimit& limit = reuseNext(store_request.limits, limits_used);
        BucketKey::assignStoreKey(limit.key, request.client_id, ml.bucket_key);
        limit.params = ml.limit->params;
        if (!ml.limit->calendar_zone_from.empty() && zone_problem.empty()) {
          zone_problem = zoneOfRequest(*ml.limit, request, d, limit.params);
        }
        limit.shadow = ml.limit->shadow_mode;
        limit.cost = descriptor_cost;
        limit.quota_group = ml.limit->quota_mode ? static_cast<int>(d) : -1;
        limit.refund = request.refunds(d);
        limit.override_rule = overrideRuleOf(*ml.limit);
        pending.positions.push_back(LimitPosition{d, used - 1});
      }
      ds.limits.resize(used);
    }
    store_request.limits.resize(limits_used);
    return zone_problem;
  }

  /// A calendar limit's zone from descriptor `d` of the request (calendar_zone.hpp).
  static std::string zoneOfRequest(const RateLimit& rule, const DecisionRequest& request,
                                   std::size_t d, LimitParams& params) {
    static const Descriptor kNone;
    const Descriptor& descriptor = d < request.descriptors.size() ? request.descriptors[d] : kNone;
    std::string problem = decision_detail::applyRequestTimeZone(rule, descriptor, params);
    return problem.empty() ? problem : "descriptors[" + std::to_string(d) + "]: " + problem;
  }

  /// A candidate of descriptor `d`: a shadow limit in its own bucket, whose outcome goes to
  /// Decision::candidates. A refund or report it cannot take leaves it out (a candidate
  /// never refuses the live request).
  void addCandidate(PendingDecision& pending, std::size_t d, const MatchedLimit& ml,
                    std::int64_t cost, std::size_t& limits_used) {
    Decision& decision = pending.decision;
    const DecisionRequest& request = decision.request;
    const LimitParams& params = ml.limit->params;
    const bool refund = request.refunds(d);
    // A reservation step holds and settles the live limits only.
    if (ml.limit->unlimited || request.reservation.op != HoldOp::kNone ||
        ((refund || request.charge == Charge::kReport) &&
         ((refund && !refundRefusal(params).empty()) ||
          params.consistency == Consistency::kEventual))) {
      return;
    }
    StoreLimit& limit = reuseNext(pending.store_request.limits, limits_used);
    limit.params = params;
    if (!ml.limit->calendar_zone_from.empty() &&
        !zoneOfRequest(*ml.limit, request, d, limit.params).empty()) {
      --limits_used;  // a zone the request names wrongly: the candidate sits this one out
      return;
    }
    BucketKey::assignStoreKey(limit.key, request.client_id, ml.bucket_key);
    limit.shadow = true;
    limit.cost = cost;
    limit.quota_group = -1;
    limit.refund = refund;
    limit.override_rule = nullptr;
    pending.positions.push_back(LimitPosition{d, decision.candidates.size(), true});
    decision.candidates.push_back(CandidateStatus{ml.limit, d, Outcome{}});
  }

  /// Descriptor `d` carries its own limit (envoy's descriptor-level `limit`): it replaces
  /// the rules' limits of that descriptor, and the decision keeps the rule it makes.
  void addRequestLimit(PendingDecision& pending, std::size_t d, std::int64_t cost,
                       std::size_t& limits_used) {
    Decision& decision = pending.decision;
    const DecisionRequest& request = decision.request;
    DescriptorStatus& ds = decision.descriptors[d];
    const LimitOverride& override = *request.descriptor_limits[d];
    auto rule = makeRequestLimit(override, decision.domain->domain, request.descriptors[d]);
    MatchedLimit ml{rule.get(), nullptr,
                    requestLimitBucketKey(*decision.domain, request.descriptors[d], override.unit)};
    ds.matched = true;
    std::size_t used = 0;
    LimitStatus& status = reuseNext(ds.limits, used);
    fillLimitStatus(status, ml);
    status.from_request = true;
    ds.limits.resize(used);
    decision.request_limits.push_back(std::move(rule));
    StoreLimit& limit = reuseNext(pending.store_request.limits, limits_used);
    BucketKey::assignStoreKey(limit.key, request.client_id, ml.bucket_key);
    limit.params = ml.limit->params;
    limit.shadow = false;
    limit.cost = cost;
    limit.quota_group = -1;
    limit.refund = request.refunds(d);
    limit.override_rule = nullptr;
    pending.positions.push_back(LimitPosition{d, 0});
  }

  /// Why the store must not see this request, or "": a refund of a limit that cannot take
  /// one (limiter.hpp, refundRefusal), and refunds or reports of eventual limits, whose
  /// grow-only counters (docs/eventual.md) cannot take a refund and are charged only by
  /// requests they admit. Checked before the store call, so no counter is touched.
  std::string refusal(const StoreRequest& request, const std::vector<LimitPosition>& positions,
                      const Decision& decision) const {
    // The usual request (no reservation step, no report, no refund) has nothing to refuse.
    if (request.hold.op == HoldOp::kNone && request.charge != Charge::kReport &&
        std::none_of(request.limits.begin(), request.limits.end(),
                     [](const StoreLimit& limit) { return limit.refund; })) {
      return {};
    }
    if (request.hold.op != HoldOp::kNone) {
      return reservation_detail::refusal(request, parts_.reservations, [&](std::size_t i) {
        const LimitStatus& status =
            decision.descriptors[positions[i].descriptor].limits[positions[i].limit];
        return "descriptors[" + std::to_string(positions[i].descriptor) + "]: limit \"" +
               status.name + "\": ";
      });
    }
    for (std::size_t i = 0; i < request.limits.size() && i < positions.size(); ++i) {
      const StoreLimit& limit = request.limits[i];
      if ((!limit.refund && request.charge != Charge::kReport) || positions[i].candidate) {
        continue;
      }
      const LimitStatus& status =
          decision.descriptors[positions[i].descriptor].limits[positions[i].limit];
      const std::string where = "descriptors[" + std::to_string(positions[i].descriptor) +
                                "]: limit \"" + status.name + "\": ";
      const std::string_view why = refundRefusal(limit.params);
      if (limit.refund && !why.empty()) {
        return where + std::string(why);
      }
      if (limit.params.consistency == Consistency::kEventual) {
        return where +
               (limit.refund ? "an eventual limit cannot take a refund"
                             : "an eventual limit cannot take a report") +
               ": its grow-only counters are charged only by requests it admits "
               "(docs/eventual.md)";
      }
    }
    return {};
  }

  void answer(PendingDecision& pending, Result<StoreResponse>& response) {
    Callback& done = pending.caller_done != nullptr ? *pending.caller_done : pending.done;
    if (pending.answered_within != nullptr) {
      *pending.answered_within = true;
    }
    if (!response) {
      fail(pending.decision.request, response.error(), pending.started, done);
      releasePending(pending);
      return;
    }
    StoreResponse& r = *response;
    Decision& decision = pending.decision;
    const std::vector<LimitPosition>& positions = pending.positions;
    for (std::size_t i = 0; i < positions.size() && i < r.outcomes.size(); ++i) {
      if (positions[i].candidate) {
        decision.candidates[positions[i].limit].outcome = r.outcomes[i];
      } else {
        decision.descriptors[positions[i].descriptor].limits[positions[i].limit].outcome =
            r.outcomes[i];
      }
    }
    for (AppliedOverride& applied : r.overrides) {
      if (applied.limit < positions.size() && applied.value &&
          !positions[applied.limit].candidate) {
        const LimitPosition& at = positions[applied.limit];
        LimitStatus& status = decision.descriptors[at.descriptor].limits[at.limit];
        status.limit = applied.value->requests_per_unit;
        status.unit = applied.value->unit;
        status.unit_multiplier = applied.value->unit_multiplier;
        status.window_us = applied.value->params.window_us;
        status.override_value = std::move(applied.value);
      }
    }
    for (std::size_t i = 0; i < positions.size() && i < r.holds_expired.size(); ++i) {
      if (positions[i].candidate) {
        continue;
      }
      decision.descriptors[positions[i].descriptor].limits[positions[i].limit].holds_expired =
          r.holds_expired[i];
      decision.holds_expired += r.holds_expired[i];
    }
    decision.allowed = r.allowed;
    decision.degraded = r.degraded;
    decision.decided_at_us = r.at_us;
    if (anyMetadata(decision.descriptors)) {  // else left empty by prepareDecision()
      decision.metadata_json = mergePassedMetadata(decision.descriptors);
    }
    if (pending.takes_lease && r.allowed && !r.degraded) {
      grantLease(pending, r);
    } else if (pending.store_request.lease > 0 && anyRefund(pending.store_request)) {
      noteRefundedLeases(pending);
    }
    if (decision.request.reservation.op != HoldOp::kNone) {
      if (Status settled =
              reservation_detail::settle(decision.request, pending.store_request, r, decision);
          !settled) {
        fail(decision.request, settled.error(), pending.started, done);
        releasePending(pending);
        return;
      }
    }
    recycleStoreResponse(std::move(*response));  // serves the thread's next store answer
    succeed(pending, done);
    releasePending(pending);
  }

  /// An admitted request took store_request.lease in its concurrency limits that allowed:
  /// the decision names it (a lease id of the descriptors that hold it) and the tracker
  /// follows it.
  void grantLease(PendingDecision& pending, const StoreResponse& response) {
    Decision& decision = pending.decision;
    const StoreRequest& store_request = pending.store_request;
    LeaseToken token{store_request.lease, decision.request.domain, decision.request.client_id, {}};
    std::vector<bool> holds(decision.request.descriptors.size(), false);
    const Micros now = parts_.clock != nullptr ? parts_.clock->nowMicros() : response.at_us;
    for (std::size_t i = 0; i < store_request.limits.size() && i < response.outcomes.size(); ++i) {
      const StoreLimit& limit = store_request.limits[i];
      if (pending.positions[i].candidate || !decision_detail::takesLease(store_request, limit) ||
          !response.outcomes[i].allowed) {
        continue;
      }
      const std::size_t d = pending.positions[i].descriptor;
      if (d < holds.size()) {
        holds[d] = true;
      }
      const Micros lease_us = limit.params.window_us;
      decision.lease_us = decision.lease_us == 0 ? lease_us : std::min(decision.lease_us, lease_us);
      if (parts_.leases != nullptr) {
        const LimitStatus& status = decision.descriptors[d].limits[pending.positions[i].limit];
        parts_.leases->granted(decision.request.domain, status.name, store_request.lease, limit.key,
                               now + lease_us, now);
      }
    }
    if (decision.lease_us == 0) {
      return;  // only shadow limits that denied: no lease held
    }
    for (std::size_t d = 0; d < holds.size(); ++d) {
      if (holds[d]) {
        token.descriptors.push_back(decision.request.descriptors[d]);
      }
    }
    decision.lease_id = encodeLeaseId(token);
  }

  static bool anyMetadata(const std::vector<DescriptorStatus>& descriptors) {
    return std::any_of(descriptors.begin(), descriptors.end(),
                       [](const DescriptorStatus& d) { return !d.metadata_json.empty(); });
  }

  static bool anyRefund(const StoreRequest& request) {
    for (const StoreLimit& limit : request.limits) {
      if (limit.refund && limit.params.algorithm == Algorithm::kConcurrency) {
        return true;
      }
    }
    return false;
  }

  /// A refund that named a lease released it in its concurrency limits (when they held it):
  /// the tracker hears of it.
  void noteRefundedLeases(PendingDecision& pending) {
    if (parts_.leases == nullptr || parts_.clock == nullptr) {
      return;
    }
    const StoreRequest& store_request = pending.store_request;
    const Decision& decision = pending.decision;
    const Micros now = parts_.clock->nowMicros();
    for (std::size_t i = 0; i < store_request.limits.size(); ++i) {
      const StoreLimit& limit = store_request.limits[i];
      if (!limit.refund || limit.params.algorithm != Algorithm::kConcurrency ||
          pending.positions[i].candidate) {
        continue;
      }
      const LimitStatus& status =
          decision.descriptors[pending.positions[i].descriptor].limits[pending.positions[i].limit];
      parts_.leases->released(decision.request.domain, status.name, store_request.lease, "refund",
                              now);
    }
  }

  PendingDecision& takePending() {
    if (free_.empty()) {
      slots_.push_back(std::make_unique<PendingDecision>());
      free_.reserve(slots_.size());
      return *slots_.back();
    }
    PendingDecision* slot = free_.back();
    free_.pop_back();
    if (!slot->answer) {
      slot->answer = Decision{};  // a callback left an error in it: a decision again
    }
    return *slot;
  }

  void releasePending(PendingDecision& pending) {
    pending.done = nullptr;
    pending.caller_done = nullptr;
    pending.answered_within = nullptr;
    pending.decision.rules.reset();
    free_.push_back(&pending);
  }

  /// The paths end in one of these two: the observers see the decision once, then the
  /// caller gets it, in the slot (the callback may move it out); the slot is released after.
  void succeed(PendingDecision& pending, const Callback& done) {
    for (DecisionObserver* observer : parts_.observers) {
      observer->observe(pending.decision.request, pending.answer, pending.started);
    }
    done(std::move(pending.answer));
  }

  void fail(const DecisionRequest& request, Error error, Micros started, const Callback& done) {
    Result<Decision> result(std::move(error));
    for (DecisionObserver* observer : parts_.observers) {
      observer->observe(request, result, started);
    }
    done(std::move(result));
  }

  DecisionServiceParts parts_;
  std::vector<std::unique_ptr<PendingDecision>> slots_;  ///< every slot, for their lifetime
  std::vector<PendingDecision*> free_;                   ///< those not deciding now
};

}  // namespace

Status DecisionService::decideInPlace(const RequestFill& fill, Callback& done) {
  DecisionRequest request = takeSpareRequest();
  if (Status filled = fill(request); !filled) {
    return filled;
  }
  decide(std::move(request), std::move(done));
  return {};
}

DecisionRequest takeSpareRequest() {
  if (t_spares.requests.empty()) {
    return DecisionRequest{};
  }
  DecisionRequest request = std::move(t_spares.requests.back());
  t_spares.requests.pop_back();
  request.clearForReuse();
  return request;
}

void recycleDecision(Decision&& decision) {
  decision.rules.reset();
  decision.request_limits.clear();
  decision.candidates.clear();
  if (t_spares.requests.size() < kMaxSpares) {
    if (t_spares.requests.capacity() == 0) {
      t_spares.requests.reserve(kMaxSpares);  // once per thread: no allocation afterwards
    }
    t_spares.requests.push_back(std::move(decision.request));
  }
  if (t_spares.decisions.size() < kMaxSpares) {
    if (t_spares.decisions.capacity() == 0) {
      t_spares.decisions.reserve(kMaxSpares);
    }
    // Built in place (no temporary to move from and destroy).
    t_spares.decisions.emplace_back(
        std::move(decision.descriptors), std::move(decision.request_limits),
        std::move(decision.candidates), std::move(decision.reservation.id));
  }
}

std::unique_ptr<DecisionService> makeDecisionService(DecisionServiceParts parts) {
  return std::make_unique<DecisionServiceImpl>(std::move(parts));
}

}  // namespace sluice
