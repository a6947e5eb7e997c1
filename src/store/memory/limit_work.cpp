#include "store/memory/limit_work.hpp"

#include <algorithm>

namespace sluice::memory_detail {

bool isSketchLimit(const StoreLimit& limit) {
  return limit.params.algorithm == Algorithm::kSketch && limit.params.sketch.identity &&
         limit.params.sketch.width > 0 && limit.params.sketch.depth > 0 && limit.params.limit > 0 &&
         limit.params.window_us > 0;
}

bool charged(const StoreRequest& request, const StoreLimit& limit, const LimitWork& w,
             bool request_allowed) {
  if (w.hold_only || w.banned) {
    return false;
  }
  if (isLeaseLimit(limit) && !limit.refund) {
    return request_allowed && w.eval.outcome.allowed;
  }
  return (request_allowed && w.eval.outcome.allowed) || limit.params.count_rejected ||
         limit.refund || request.charge != Charge::kAllOrNothing;
}

bool isLeaseLimit(const StoreLimit& limit) {
  return limit.params.algorithm == Algorithm::kConcurrency;
}

Evaluation evaluateLimit(const StoreRequest& request, const StoreLimit& limit,
                         const BucketState& state, Micros now, const LimitWork& w) {
  if (w.hold_only) {
    // A reserve asks for its amount with the other holds counted; a release or a commit
    // that found nothing to settle answers a check.
    const std::int64_t asked = request.hold.op == HoldOp::kReserve ? limit.costOr(request.cost) : 0;
    return sluice::evaluateWithHolds(limit.params, state, now, asked, w.held, w.holds_retry);
  }
  const std::int64_t cost = limit.costOr(request.cost);
  if (limit.refund) {
    return sluice::refund(limit.params, state, now, cost, request.lease);
  }
  if (request.charge == Charge::kReport) {
    Evaluation e = sluice::chargeAnyway(limit.params, state, now, cost);
    e.outcome.remaining = std::max<std::int64_t>(e.outcome.remaining - w.held, 0);
    return e;
  }
  // A concurrency limit never has holds (holdRefusal): it is the one that takes a lease.
  Evaluation e =
      w.held > 0 ? sluice::evaluateWithHolds(limit.params, state, now, cost, w.held, w.holds_retry)
                 : sluice::evaluate(limit.params, state, now, cost, request.lease);
  if (request.charge == Charge::kEvery && !e.outcome.allowed && cost > 0) {
    // Counted although it denied: its answer is the same request's on the charged bucket.
    Evaluation charged = sluice::chargeAnyway(limit.params, state, now, cost);
    const bool never = e.outcome.never;
    if (limit.params.count_rejected) {
      // Answered on the charged bucket as it is (recorded once, above).
      LimitParams once = limit.params;
      once.count_rejected = false;
      e.outcome = sluice::evaluate(once, charged.next, now, cost).outcome;
    } else {
      e.outcome = sluice::evaluate(limit.params, charged.next, now, cost).outcome;
    }
    e.outcome.allowed = false;
    e.outcome.never = never;
    e.next = std::move(charged.next);
    e.ttl_us = charged.ttl_us;
  }
  return e;
}

void answerUncharged(const StoreRequest& request, Micros now, const WorkList& work,
                     StoreResponse& response) {
  for (std::size_t i = 0; i < request.limits.size(); ++i) {
    const StoreLimit& limit = request.limits[i];
    if (!response.outcomes[i].allowed || limit.params.count_rejected || limit.refund) {
      continue;
    }
    // Other charge modes charge such a limit anyway; a lease is never taken by a denied
    // request, whatever the mode.
    if (request.charge != Charge::kAllOrNothing && !isLeaseLimit(limit)) {
      continue;
    }
    const LimitWork& w = work[i];
    if (w.sketch) {
      response.outcomes[i] =
          evaluateSketch(limit.params, w.sketch->table.read(w.cells, w.window_index), now, 0)
              .outcome;
      continue;
    }
    response.outcomes[i] =
        sluice::evaluateWithHolds(limit.params, w.expired ? BucketState{} : w.loaded, now, 0,
                                  w.held, w.holds_retry)
            .outcome;
  }
}

}  // namespace sluice::memory_detail
