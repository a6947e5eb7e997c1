#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/top_denials.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/lease_tracker.hpp"
#include "sluice/decision/reservation.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/event_stream.hpp"
#include "sluice/store/store.hpp"

namespace sluice {

/// Where the service reads the current rules snapshot (the rules watcher). Thread-safe;
/// returns null until rules are loaded.
using RulesProvider = std::function<RuleSetPtr()>;

/// What one I/O thread's DecisionService is built from.
struct DecisionServiceParts {
  RulesProvider rules;  ///< required
  StorePtr store;       ///< required: this thread's store
  /// Required when `observers` is not empty. Read once per decision; the store decides at
  /// that reading (StoreRequest::now_us), so it must be the store's clock.
  const Clock* clock = nullptr;
  /// Called once per decision, in order; non-owning (they outlive the service).
  std::vector<DecisionObserver*> observers;
  /// How requests of Envoy's API (DecisionRequest::envoy_api) are charged unless they ask
  /// otherwise (a report): kEvery as envoyproxy/ratelimit, or kAllOrNothing.
  Charge envoy_charge = Charge::kEvery;
  /// Follows the leases of concurrency limits for the metrics (shared by every thread's
  /// service; outlives it); null: not followed. Needs `clock`.
  LeaseTracker* leases = nullptr;
  /// The bounds of reservation steps (DecisionRequest::reservation).
  ReservationSettings reservations;
};

/// The DecisionService: reads the rules snapshot once per request, matches once, evaluates
/// all limits in one store call (store keys: BucketKey::storeKey of the client and each
/// matched bucket), aggregates, calls the observers, answers. One instance per I/O thread:
/// `store` may be bound to that thread's io_context.
std::unique_ptr<DecisionService> makeDecisionService(DecisionServiceParts parts);

/// The decision metrics, one observer per I/O thread (its handle caches are not
/// synchronised):
/// - `decisions_total{domain,rule,outcome}` (outcome: allowed, denied, shadow_denied,
///   no_rule, unknown_domain; rule "" for the last two; domain "_unknown" for unknown
///   domains so clients cannot grow the label set); errors are not counted;
/// - `near_limit_total{domain,rule}`: an allowed limit left with at most 20 % of its limit
///   (remaining * 5 <= requests_per_unit), shadow limits included;
/// - `descriptor_decisions_total{domain,rule,descriptor,outcome}` for limits whose matched
///   node sets `detailed_metric` or `value_to_metric` (descriptor = "key=value,..."; the
///   only metric that carries request values, by the rule's own opt-in).
std::unique_ptr<DecisionObserver> makeDecisionMetrics(Metrics& metrics);

/// The penalty box's observer (docs/bans.md), one per I/O thread:
/// - `banned_total{domain,rule}`: answers refused by a ban (also counted as `denied` in
///   decisions_total), shadow limits aside;
/// - `bans_total{domain,rule}`: bans started (shadow ones included);
/// - one log line per ban started: rule, client, step, length and end (on `clock`).
std::unique_ptr<DecisionObserver> makeBanObserver(Metrics& metrics, const Clock& clock);

/// Publishes a DenialEvent for each denied request (the binding, denying limit and its
/// descriptor; time from `clock`). Thread-safe as far as `sink` is.
std::unique_ptr<DecisionObserver> makeDenialEvents(DenialEventSink& sink, const Clock& clock);

/// GET /limits/top's hook into the decision flow: counts in `top` the client of each
/// non-shadow limit that denied, at the request's arrival (the window it falls in). One per
/// I/O thread, with that thread's TopDenials; an allowed request costs one branch.
std::unique_ptr<DecisionObserver> makeTopDenialsRecorder(TopDenials& top);

/// Reservation metrics (docs/reservations.md), one observer per I/O thread:
/// `reservations_total{domain,rule,outcome}`, `reservation_amount_total{domain,rule}`,
/// `reservation_settlements_total{domain,rule,how}`, `reservation_holds{domain,rule}` and the
/// histogram `reservation_actual_minus_reserved{domain,rule}`.
std::unique_ptr<DecisionObserver> makeReservationMetrics(Metrics& metrics);
void describeReservationMetrics(Metrics& metrics);

/// Declares the metric families the decision module writes (HELP/TYPE lines). Idempotent.
void describeDecisionMetrics(Metrics& metrics);

}  // namespace sluice
