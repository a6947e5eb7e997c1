#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "http/router.hpp"
#include "http/routes.hpp"
#include "sluice/common/result.hpp"
#include "sluice/common/top_denials.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/limit_reset.hpp"
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
};

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
