#pragma once

#include <memory>
#include <string>

#include "app/access_log.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/top_denials.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/store/event_stream.hpp"

namespace sluice::app {

/// What watches the decisions besides the DecisionService's own `decisions_total`.
struct DecisionObservers {
  Metrics* metrics = nullptr;         ///< required
  const Clock* clock = nullptr;       ///< required: latency and event time
  AccessLog* access_log = nullptr;    ///< null: no access log
  DenialEventSink* events = nullptr;  ///< null: no denied-request events
  TopDenials* top = nullptr;          ///< null: no GET /limits/top counting
};

/// Wraps a DecisionService and, once each decision is known (on the same I/O thread,
/// before the answer is sent):
/// - counts `near_limit_total{domain,rule}`: an allowed limit left with at most 20 % of
///   its limit (remaining * 5 <= requests_per_unit), shadow limits included;
/// - counts `descriptor_decisions_total{domain,rule,descriptor,outcome}` for limits whose
///   matched node sets `detailed_metric` or `value_to_metric` (descriptor =
///   "key=value,key=value"; the only metric that carries request values, by the rule's
///   own opt-in);
/// - writes an access-log line (domain, client, binding rule, decision, latency);
/// - publishes a DenialEvent for a denied request (the binding, denying limit);
/// - counts the client in `top` for every non-shadow limit that denied (GET /limits/top).
/// Errors pass through unchanged (logged as decision "error").
///
/// One instance per I/O thread, like the wrapped service (its metric-handle cache is not
/// synchronised). The observers must outlive it.
std::unique_ptr<DecisionService> makeObservedDecisionService(std::unique_ptr<DecisionService> inner,
                                                             DecisionObservers observers);

/// The request-level word the access log uses: unknown_domain, denied, shadow_denied
/// (allowed, but a shadow limit would have denied), allowed (a limit was evaluated or an
/// unlimited rule matched), no_rule.
std::string_view decisionWord(const Decision& decision);

/// "key=value,key=value" (descriptor values as sent).
std::string describeDescriptor(const Descriptor& descriptor);

/// Declares near_limit_total and descriptor_decisions_total. Idempotent.
void describeDecisionObserverMetrics(Metrics& metrics);

}  // namespace sluice::app
