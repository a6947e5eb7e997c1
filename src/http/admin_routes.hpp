#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "http/router.hpp"
#include "http/routes.hpp"
#include "sluice/common/result.hpp"
#include "sluice/common/top_denials.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/rules/rules.hpp"

/// The admin listener's endpoints (`--admin-listen`): the state-changing actions, which the
/// decision port never serves, plus the read-only operations views.
namespace sluice::http {

/// Deletes the buckets whose store keys start with any of the prefixes, on every store that
/// holds or caches them; `done` gets the number of buckets removed and must be called on
/// the admin listener's I/O thread.
using ResetFunction = std::function<void(std::vector<std::string> key_prefixes,
                                         std::function<void(Result<std::size_t>)> done)>;

struct AdminContext {
  HandlerContext operations;  ///< rules, metrics, store health, default domain
  ResetFunction reset;
  const TopDenialsBoard* top = nullptr;  ///< null: GET /limits/top answers 404
};

/// The store-key prefixes that `DELETE /limits` resets for a request shaped like a
/// decision request, in BucketKey's grammar (the keys the DecisionService charges):
/// - with descriptors: the buckets of every limit those descriptors match, for this client
///   (exactly the keys a decision would charge);
/// - without descriptors: every bucket of this client in the domain (domain-level limit
///   and all descriptors).
/// kNotFound for an unknown domain, kInvalidArgument when descriptors match no rule.
Result<std::vector<std::string>> resetKeyPrefixes(const RuleSet& rules,
                                                  const DecisionRequest& request);

/// Reads GET /limits/top's query string (`domain`, `rule`, `n` from 1 to kMaxTopClients,
/// default 10); kInvalidArgument names the bad parameter.
Result<TopDenialsQuery> parseTopQuery(std::string_view query);

inline constexpr std::size_t kMaxTopClients = 1000;

/// The JSON body of GET /limits/top (see docs/operations.md).
std::string topDenialsJson(const TopDenialsReport& report, const TopDenialsOptions& options);

/// `DELETE /limits` (body as POST /shouldAllowRequest; answers
/// {"reset": true, "domain", "clientId", "buckets_removed"}), `GET /limits/top` (the most
/// denied clients per rule), and GET /healthz, /readyz, /rules, /metrics.
void addAdminRoutes(Router& router, const AdminContext& context);

}  // namespace sluice::http
