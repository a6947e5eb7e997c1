#pragma once

#include <optional>
#include <string>

#include "grpc/grpc_connection.hpp"
#include "kuadrant/service/ratelimit/v1/kuadrantrls.pb.h"
#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"

/// Kuadrant's limitador service (`kuadrant.service.ratelimit.v1.RateLimitService`,
/// proto/kuadrant/...) to and from Sluice's decisions: CheckRateLimit is Envoy's
/// ShouldRateLimit, Report a report, Reserve and Commit reservation steps
/// (docs/reservations.md). Pure functions: no gRPC, no I/O.
namespace sluice::grpc {

namespace kuadrant = ::kuadrant::service::ratelimit::v1;

/// A ReserveRequest as a reservation step: `amount` held on every matched limit for `ttl`
/// (unset: --reservation-ttl). A descriptor's own hits_addend is refused.
Result<DecisionRequest> fromReserveRequest(const kuadrant::ReserveRequest& request);

/// A CommitRequest as a reservation step: `actual_amount` charged (as a report) on the
/// matched limits of its domain and descriptors, the hold of `reservation_id` released.
Result<DecisionRequest> fromCommitRequest(const kuadrant::CommitRequest& request);

/// A reservation step's answer that is a gRPC error rather than a message: a commit of an
/// id that holds nothing and has not expired (NOT_FOUND). nullopt otherwise.
struct CallError {
  StatusCode code = StatusCode::kOk;
  std::string message;
};
std::optional<CallError> reservationError(const Decision& decision);

/// ReserveResponse: OK with the id, or OVER_LIMIT (denied, or the bucket holds
/// --max-reservation-holds reservations).
void toReserveResponse(const Decision& decision, kuadrant::ReserveResponse& response);

/// CommitResponse: reservation_released is true when a live hold was released; a late
/// commit (charged as a report) or one already settled (charged nothing) answers false.
void toCommitResponse(const Decision& decision, kuadrant::CommitResponse& response);

}  // namespace sluice::grpc
