#pragma once

#include "sluice/http/router.hpp"
#include "sluice/http/routes.hpp"

namespace sluice::http {

/// POST /renew: `{"lease": "<id>"}` (docs/algorithms.md, "concurrency"). 200 with what
/// happened, 400 for a body or id that is not one, 404 when no bucket holds the lease live
/// (nothing changed), 503 when the store or rules are unavailable.
/// POST /release, shared by leases and reservations and routed on the body's key: a body
/// with "lease" releases a lease as /renew renews one; a body with "reservation_id" is a
/// reservation's release (reservation_routes.hpp); neither or both is a 400.
void addLeaseRoutes(Router& router, const HandlerContext& context);

}  // namespace sluice::http
