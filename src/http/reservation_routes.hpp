#pragma once

#include <string_view>

#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/http/message.hpp"
#include "sluice/http/routes.hpp"

/// POST /reserve, /commit and /release (README.md, "Reservations"; docs/reservations.md):
/// the body of /shouldAllowRequest (domain, clientId, descriptors, timestamp) plus the
/// step's own fields.
namespace sluice::http {

/// Parses a body of `op`'s endpoint: /reserve takes `amount` (required, 1..10^9) and
/// `ttl_ms` (optional, > 0); /commit `reservation_id` and `actual` (both required,
/// actual 0..10^9); /release `reservation_id`. `hits`, `refund` and `report` are refused.
/// A body of the usual shape takes the fast path (parseReservationRequestFastInto(),
/// fast_decision_parser.hpp); any other, errors included, the complete parser below.
Result<DecisionRequest> parseReservationRequest(std::string_view body, HoldOp op,
                                                std::string_view default_domain);

/// The complete parser: every body, every error message is defined here.
/// parseReservationRequest() answers the same.
Result<DecisionRequest> parseReservationRequestComplete(std::string_view body, HoldOp op,
                                                        std::string_view default_domain);

/// The answer of a reservation step: /shouldAllowRequest's body with the step's fields
/// (`reservation_id`, `status`, ...), 200, or 429 for a denied reserve; a commit or release
/// of an id already settled or expired is 409, of an unknown id 404 (nothing touched).
Response reservationResponse(const Decision& decision);

/// The handler of `op`'s endpoint (a body parsed by parseReservationRequest, decided, answered
/// by reservationResponse).
Handler reservationHandler(const HandlerContext& context, HoldOp op);

/// POST /reserve and /commit. POST /release is shared with leases (lease_routes.hpp), which
/// hands a body with "reservation_id" to reservationHandler(context, HoldOp::kRelease).
void addReservationRoutes(Router& router, const HandlerContext& context);

}  // namespace sluice::http
