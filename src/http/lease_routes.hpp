#pragma once

#include "sluice/http/router.hpp"
#include "sluice/http/routes.hpp"

namespace sluice::http {

/// POST /release and POST /renew: `{"lease": "<id>"}` (docs/algorithms.md, "concurrency").
/// 200 with what happened, 400 for a body or id that is not one, 404 when no bucket holds
/// the lease live (nothing changed), 503 when the store or rules are unavailable.
void addLeaseRoutes(Router& router, const HandlerContext& context);

}  // namespace sluice::http
