#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "http/admin_token.hpp"
#include "sluice/common/result.hpp"
#include "sluice/common/top_denials.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/limit_overrides.hpp"
#include "sluice/decision/limit_reset.hpp"
#include "sluice/http/router.hpp"
#include "sluice/http/routes.hpp"
#include "sluice/rules/rules.hpp"

/// The admin listener's endpoints (`--admin-listen`): the state-changing actions, which the
/// decision port never serves, plus the read-only operations views.
namespace sluice::http {

struct AdminContext {
  HandlerContext operations;          ///< rules, metrics, store health, default domain
  const LimitReset* reset = nullptr;  ///< DELETE /limits; outlives the routes
  /// Where DELETE /limits answers: LimitReset calls back on a decision thread, and the
  /// answer belongs to the admin listener's I/O thread (null: answered where called back).
  PostTask answer_on;
  const TopDenialsBoard* top = nullptr;  ///< null: GET /limits/top answers 404
  /// /limits/overrides (null: those paths answer 404); outlives the routes.
  const LimitOverrides* overrides = nullptr;
  /// `--admin-token-file`: every admin request needs `Authorization: Bearer <token>`
  /// (401 otherwise, logged); null: no token asked.
  std::shared_ptr<AdminToken> token;
};

/// PUT, GET and DELETE /limits/overrides (docs/overrides.md).
void addOverrideRoutes(Router& router, const AdminContext& context);

/// The answer `respond` gets once `post` (AdminContext::answer_on) has moved it to the
/// listener's thread; `post` empty: at once.
Respond answeredOn(const PostTask& post, Respond respond);

/// Reads GET /limits/top's query string (`domain`, `rule`, `n` from 1 to kMaxTopClients,
/// default 10); kInvalidArgument names the bad parameter.
Result<TopDenialsQuery> parseTopQuery(std::string_view query);

inline constexpr std::size_t kMaxTopClients = 1000;

/// The JSON body of GET /limits/top (see docs/operations.md).
/// A client with a runtime override of its rule carries it as "override" (its limit, reason
/// and expiry) from `overrides`.
std::string topDenialsJson(const TopDenialsReport& report, const TopDenialsOptions& options,
                           const std::vector<StoredOverridePtr>& overrides = {});

/// With AdminContext::token, every route asks for the token first.
/// `DELETE /limits` (body as POST /shouldAllowRequest; answers
/// {"reset": true, "domain", "clientId", "buckets_removed"}), `GET /limits/top` (the most
/// denied clients per rule), and GET /healthz, /readyz, /rules, /metrics.
void addAdminRoutes(Router& router, const AdminContext& context);

}  // namespace sluice::http
