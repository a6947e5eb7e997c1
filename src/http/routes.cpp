#include "http/routes.hpp"

#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "http/decision_codec.hpp"
#include "http/forward_auth.hpp"

namespace sluice::http {
namespace {

constexpr std::string_view kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

Response jsonBody(int status, const nlohmann::ordered_json& body) {
  Response response;
  response.status = status;
  response.body = body.dump() + "\n";
  return response;
}

/// Shared by both decision endpoints: parse, decide, encode.
template <typename Parse, typename Encode>
Handler decisionHandler(const HandlerContext& context, Parse parse, Encode encode) {
  return [context, parse, encode](const Request& request, Respond respond) {
    Result<DecisionRequest> parsed = parse(request.body);
    if (!parsed) {
      respond(jsonError(400, parsed.error().message));
      return;
    }
    // The encoders need only who asked; the descriptors move into the service.
    DecisionRequest asked;
    asked.domain = parsed->domain;
    asked.client_id = parsed->client_id;
    asked.hits = parsed->hits;
    asked.descriptor_hits = parsed->descriptor_hits;
    asked.descriptor_limits = parsed->descriptor_limits;
    context.decisions->decide(std::move(*parsed),
                              [asked = std::move(asked), encode,
                               respond = std::move(respond)](Result<Decision> decision) {
                                if (!decision) {
                                  respond(decisionErrorResponse(decision.error()));
                                  return;
                                }
                                respond(encode(asked, *decision));
                              });
  };
}

}  // namespace

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
  router.add("POST", "/shouldAllowRequest",
             decisionHandler(
                 context,
                 [default_domain](std::string_view body) {
                   return parseDecisionRequest(body, default_domain);
                 },
                 [](const DecisionRequest& request, const Decision& decision) {
                   return decisionResponse(request, decision);
                 }));
  router.add("POST", "/json",
             decisionHandler(
                 context, [](std::string_view body) { return parseEnvoyRequest(body); },
                 [](const DecisionRequest& request, const Decision& decision) {
                   return envoyResponse(request, decision);
                 }));
}

void addOperationsRoutes(Router& router, const HandlerContext& context) {
  router.add("GET", "/healthz", [](const Request&, Respond respond) {
    respond(jsonBody(200, {{"status", "ok"}}));
  });
  router.add("GET", "/readyz", [context](const Request&, Respond respond) {
    bool rules_loaded = context.rules() != nullptr;
    bool store_healthy = context.store_healthy();
    bool ready = rules_loaded && store_healthy;
    respond(jsonBody(ready ? 200 : 503, {{"status", ready ? "ready" : "not ready"},
                                         {"rules_loaded", rules_loaded},
                                         {"store_healthy", store_healthy}}));
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
  router.add("GET", "/metrics", [context](const Request&, Respond respond) {
    Response response;
    response.content_type = std::string(kPrometheusContentType);
    response.body = context.metrics->render();
    respond(std::move(response));
  });
}

void addDecisionPortRoutes(Router& router, const HandlerContext& context) {
  addDecisionRoutes(router, context);
  addOperationsRoutes(router, context);
  addForwardAuthRoutes(router, context);
}

}  // namespace sluice::http
