#include "sluice/http/routes.hpp"

#include <memory>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>

#include "http/decision_codec.hpp"
#include "http/forward_auth.hpp"
#include "http/lease_routes.hpp"
#include "http/reservation_routes.hpp"

namespace sluice::http {
namespace {

constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

/// Shared by both decision endpoints: parse, decide, encode. The body is parsed into the
/// service's own request and the answer encoded from the service's own decision, both left
/// there for its next request: nothing moves on the way.
template <typename Parse, typename Encode>
Handler decisionHandler(const HandlerContext& context, Parse parse, Encode encode) {
  return [context, parse, encode](const Request& request, Respond respond) {
    std::string_view body = request.body;
    DecisionService::Callback done = [encode,
                                      respond = std::move(respond)](Result<Decision>&& decision) {
      if (!decision) {
        respond(decisionErrorResponse(decision.error()));
        return;
      }
      respond(encode(*decision));
    };
    Status filled = context.decisions->decideInPlace(
        [&parse, body](DecisionRequest& into) { return parse(body, into); }, done);
    if (!filled) {
      // A body that cannot be decided: 400 and the parser's message (`done` was not called
      // nor moved from; decisionErrorResponse() answers kInvalidArgument so).
      done(makeError(ErrorKind::kInvalidArgument, filled.error().message));
    }
  };
}

}  // namespace

void describeHttpMetrics(Metrics& metrics) {
  metrics.describe("http_request_duration_seconds", Metrics::Type::kHistogram,
                   "Time from a complete request to its answer being ready, by endpoint "
                   "(excludes leaky-bucket shaping holds).",
                   latencyBuckets());
}

Response decisionErrorResponse(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kInvalidArgument:
      return jsonError(400, error.message);
    case ErrorKind::kUnavailable:
      return jsonError(503, error.message);
    case ErrorKind::kTimeout:
    case ErrorKind::kConnection:
    case ErrorKind::kScript:
      return jsonError(503, "store unavailable: " + error.message);
    case ErrorKind::kNotFound:
    case ErrorKind::kInternal:
      break;
  }
  return jsonError(500, "internal error: " + error.message);
}

void addDecisionRoutes(Router& router, const HandlerContext& context) {
  std::string default_domain = context.default_domain;
  router.add(
      "POST", "/shouldAllowRequest",
      decisionHandler(
          context,
          [default_domain](std::string_view body, DecisionRequest& into) {
            return parseDecisionRequestInto(body, default_domain, into);
          },
          [](const Decision& decision) { return decisionResponse(decision.request, decision); }));
  router.add("POST", "/json",
             decisionHandler(
                 context,
                 [](std::string_view body, DecisionRequest& into) {
                   return parseEnvoyRequestInto(body, into);
                 },
                 [](const Decision& decision) { return envoyResponse(decision); }));
}

void addOperationsRoutes(Router& router, const HandlerContext& context) {
  router.add("GET", "/healthz", [](const Request&, Respond respond) {
    respond(jsonResponse(200, {{"status", "ok"}}));
  });
  router.add("GET", "/readyz", [context](const Request&, Respond respond) {
    // Ready: rules loaded and every thread's store ready (for a failover store: `closed`
    // while the store is healthy, `open` and `local` once its start-up is over).
    // store_healthy and store are the store's own health, whatever the failure mode.
    const RuleSetPtr rules = context.rules();
    const bool rules_loaded = rules != nullptr;
    const bool store_ready = context.store_healthy();
    const StoreHealth state = context.store_state
                                  ? context.store_state()
                                  : (store_ready ? StoreHealth::kHealthy : StoreHealth::kFailing);
    const bool ready = rules_loaded && store_ready;
    nlohmann::ordered_json body{{"status", ready ? "ready" : "not ready"},
                                {"rules_loaded", rules_loaded},
                                {"rules_version", rules ? rules->version : std::string()},
                                {"store_healthy", state == StoreHealth::kHealthy},
                                {"store", std::string(storeHealthName(state))}};
    if (context.store_detail) {
      body["eventual"] = nlohmann::ordered_json::parse(context.store_detail(), nullptr, false);
    }
    respond(jsonResponse(ready ? 200 : 503, body));
  });
  router.add("GET", "/rules", [context](const Request&, Respond respond) {
    RuleSetPtr rules = context.rules();
    if (!rules) {
      respond(jsonError(503, "rules: not loaded"));
      return;
    }
    Response response;
    response.body = rulesToJson(*rules);
    respond(std::move(response));
  });
  addMetricsRoute(router, *context.metrics);
}

void addMetricsRoute(Router& router, const Metrics& metrics) {
  router.add("GET", "/metrics", [&metrics](const Request&, Respond respond) {
    Response response;
    response.content_type = std::string(kPrometheusContentType);
    response.body = metrics.render();
    respond(std::move(response));
  });
}

void addDecisionPortRoutes(Router& router, const HandlerContext& context) {
  addDecisionRoutes(router, context);
  addReservationRoutes(router, context);
  addLeaseRoutes(router, context);
  addOperationsRoutes(router, context);
  addForwardAuthRoutes(router, context);
}

}  // namespace sluice::http
