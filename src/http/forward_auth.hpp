#pragma once

#include "http/request_attributes.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/http/forward_auth_config.hpp"
#include "sluice/http/ip_network.hpp"
#include "sluice/http/message.hpp"
#include "sluice/http/router.hpp"
#include "sluice/http/routes.hpp"

/// The forward-auth endpoint `/check` (docs/deployment.md): nginx `auth_request`, Envoy
/// `ext_authz` (HTTP service) and Traefik `ForwardAuth` ask it about a request they are
/// holding, and Sluice decides from that request itself. The domain, the descriptors and
/// the client come from configured request attributes (`forward_auth:` in the server
/// YAML); the decision goes through the same DecisionService, rules, store and headers as
/// /shouldAllowRequest. The configuration is in forward_auth_config.hpp, the address
/// ranges in ip_network.hpp, the pure functions of the request in request_attributes.hpp;
/// this file holds the handler.
namespace sluice::http {

/// The /check answer: /shouldAllowRequest's body, headers and shaping hold, with the
/// configured deny status instead of 429.
Response forwardAuthResponse(const ForwardAuthConfig& config, const DecisionRequest& request,
                             const Decision& decision);

/// Registers `/check` and `/check/*` for any method, configured by context.forward_auth
/// (the defaults when null). The decision goes through context.decisions; its errors answer
/// as on /shouldAllowRequest (503 when the store fails with failure mode `closed`).
void addForwardAuthRoutes(Router& router, const HandlerContext& context);

}  // namespace sluice::http
