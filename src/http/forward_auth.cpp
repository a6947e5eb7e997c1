#include "http/forward_auth.hpp"

#include <memory>
#include <utility>

#include "http/decision_codec.hpp"

namespace sluice::http {

// --- Answer -------------------------------------------------------------------------------

Response forwardAuthResponse(const ForwardAuthConfig& config, const DecisionRequest& request,
                             const Decision& decision) {
  Response response = decisionResponse(request, decision);
  if (!decision.allowed) {
    response.status = config.deny_status;
  }
  return response;
}

// --- Endpoint -----------------------------------------------------------------------------

void addForwardAuthRoutes(Router& router, const HandlerContext& context) {
  auto config =
      context.forward_auth ? context.forward_auth : std::make_shared<const ForwardAuthConfig>();
  Handler check = [context, config](const Request& request, Respond respond) {
    DecisionRequest decision_request =
        buildForwardAuthRequest(*config, request, request.peer, context.default_domain);
    // The request moves into the service and comes back inside the decision: no copy.
    context.decisions->decide(std::move(decision_request),
                              [config, respond = std::move(respond)](Result<Decision>&& decision) {
                                if (!decision) {
                                  respond(decisionErrorResponse(decision.error()));
                                  return;
                                }
                                respond(forwardAuthResponse(*config, decision->request, *decision));
                                // Its storage serves the thread's next decision.
                                recycleDecision(std::move(*decision));
                              });
  };
  // Any method: proxies ask with the original method (Envoy) or GET (nginx, Traefik).
  router.add("*", std::string(kCheckPath), check);
  router.add("*", std::string(kCheckPath) + "/*", check);
}

}  // namespace sluice::http
