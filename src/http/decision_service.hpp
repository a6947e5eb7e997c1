#pragma once

#include <functional>
#include <memory>

#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/store.hpp"

namespace sluice::http {

/// Where the service reads the current rules snapshot (the rules watcher). Thread-safe;
/// returns null until rules are loaded.
using RulesProvider = std::function<RuleSetPtr()>;

/// The DecisionService: reads the rules snapshot once per request, matches, evaluates all
/// limits in one store call, aggregates. Counts `sluice_decisions_total{domain,rule,outcome}`
/// (outcome: allowed, denied, shadow_denied, no_rule, unknown_domain; rule "" for the last
/// two; domain "_unknown" for unknown domains so clients cannot grow the label set).
///
/// Store keys are `escapeKeyPart(clientId) + "|" + MatchedLimit::bucket_key`: the client
/// part never contains '|', so no two (client, bucket) pairs share a key.
///
/// One instance per I/O thread: its metric-handle cache is not synchronised and `store`
/// may be bound to that thread's io_context.
std::unique_ptr<DecisionService> makeDecisionService(RulesProvider rules, StorePtr store,
                                                     Metrics& metrics);

/// The store key of one limit for one client (see above).
std::string storeKey(std::string_view client_id, std::string_view bucket_key);

/// Declares the metric families this module writes (HELP/TYPE lines). Idempotent.
void describeHttpMetrics(Metrics& metrics);

}  // namespace sluice::http
