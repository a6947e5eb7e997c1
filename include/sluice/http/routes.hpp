#pragma once

#include <functional>
#include <memory>
#include <string>

#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/decision/lease_service.hpp"
#include "sluice/http/router.hpp"
#include "sluice/store/store.hpp"

namespace sluice::http {

struct ForwardAuthConfig;

/// What the handlers of one I/O thread need. Pointers are non-owning: the app keeps the
/// objects alive until Server::run() has returned.
struct HandlerContext {
  DecisionService* decisions = nullptr;  ///< this thread's service
  LeaseService* leases = nullptr;        ///< this thread's release/renew (null: 503)
  Metrics* metrics = nullptr;
  RulesProvider rules;  ///< the current rules snapshot (null: not loaded)
  /// Readiness of every I/O thread's store (Store::healthy()); thread-safe.
  std::function<bool()> store_healthy;
  /// The worst Store::health() over the I/O threads (null: derived from store_healthy);
  /// thread-safe.
  std::function<StoreHealth()> store_state;
  /// Optional, thread-safe: a JSON object added to /readyz as "eventual" (eventual limits).
  std::function<std::string()> store_detail;
  std::string default_domain = "default";
  std::shared_ptr<const ForwardAuthConfig> forward_auth;  ///< /check (null: the defaults)
};

/// Registers every endpoint of the decision port. Another module adds its endpoints with
/// one line here (e.g. `addForwardAuthRoutes(router, context);`).
void addDecisionPortRoutes(Router& router, const HandlerContext& context);

/// POST /shouldAllowRequest and POST /json; POST /release and /renew (leases).
void addDecisionRoutes(Router& router, const HandlerContext& context);
/// GET /healthz, /readyz, /rules, /metrics.
void addOperationsRoutes(Router& router, const HandlerContext& context);
/// GET /metrics alone (Prometheus text of `metrics`, which must outlive the router): for
/// --metrics-listen.
void addMetricsRoute(Router& router, const Metrics& metrics);

/// Declares the metric families this module writes (HELP/TYPE lines). Idempotent.
void describeHttpMetrics(Metrics& metrics);

/// The HTTP status for a failed decision: 400 for kInvalidArgument, 503 when the store or
/// the rules are unavailable (failure mode `closed`), 500 otherwise.
Response decisionErrorResponse(const Error& error);

}  // namespace sluice::http
