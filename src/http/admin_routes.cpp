#include "http/admin_routes.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <utility>

#include "http/decision_codec.hpp"

namespace sluice::http {
Result<std::vector<std::string>> resetKeyPrefixes(const RuleSet& rules,
                                                  const DecisionRequest& request) {
  const DomainConfig* domain = rules.findDomain(request.domain);
  if (domain == nullptr) {
    return makeError(ErrorKind::kNotFound, "domain: unknown domain \"" + request.domain + "\"");
  }
  std::vector<std::string> prefixes;
  if (request.descriptors.empty()) {
    return BucketKey::domainPrefixes(request.client_id, domain->domain);
  }
  RequestMatch match = matchRequest(*domain, request.descriptors);
  for (const DescriptorMatch& descriptor : match.descriptors) {
    for (const MatchedLimit& limit : descriptor.limits) {
      if (!limit.limit->unlimited) {
        prefixes.push_back(BucketKey::storeKey(request.client_id, limit.bucket_key));
      }
    }
  }
  if (prefixes.empty()) {
    return makeError(
        ErrorKind::kInvalidArgument,
        "descriptors: no rule with a limit matches them in domain \"" + request.domain + "\"");
  }
  return prefixes;
}

void addAdminRoutes(Router& router, const AdminContext& context) {
  router.add("DELETE", "/limits", [context](const Request& request, Respond respond) {
    Result<DecisionRequest> parsed =
        parseDecisionRequest(request.body, context.operations.default_domain);
    if (!parsed) {
      respond(jsonError(400, parsed.error().message));
      return;
    }
    RuleSetPtr rules = context.operations.rules();
    if (!rules) {
      respond(jsonError(503, "rules: not loaded"));
      return;
    }
    auto prefixes = resetKeyPrefixes(*rules, *parsed);
    if (!prefixes) {
      respond(jsonError(prefixes.error().kind == ErrorKind::kNotFound ? 404 : 400,
                        prefixes.error().message));
      return;
    }
    context.reset(std::move(*prefixes), [domain = parsed->domain, client = parsed->client_id,
                                         peer = request.peer, respond = std::move(respond)](
                                            Result<std::size_t> removed) {
      if (!removed) {
        spdlog::warn("admin: reset of client \"{}\" in domain {} from {} failed: {}", client,
                     domain, peer, removed.error().message);
        respond(decisionErrorResponse(removed.error()));
        return;
      }
      // An audit trail of every state change made through the admin port.
      spdlog::info("admin: reset {} bucket(s) of client \"{}\" in domain {} (from {})", *removed,
                   client, domain, peer);
      respond(jsonResponse(200, {{"reset", true},
                                 {"domain", domain},
                                 {"clientId", client},
                                 {"buckets_removed", *removed}}));
    });
  });
  addOperationsRoutes(router, context.operations);
}

}  // namespace sluice::http
