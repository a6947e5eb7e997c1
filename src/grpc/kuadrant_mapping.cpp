#include "grpc/kuadrant_mapping.hpp"

#include <algorithm>

#include "grpc/rls_mapping.hpp"

namespace sluice::grpc {
namespace {

Error invalid(const std::string& field, const std::string& what) {
  return makeError(ErrorKind::kInvalidArgument, field + ": " + what);
}

/// The domain and descriptors of a Kuadrant message, read as Envoy's RateLimitRequest is
/// (the same bounds and errors), with the hits of the step.
template <typename Message>
Result<DecisionRequest> stepOf(const Message& message, std::uint64_t hits) {
  rls::RateLimitRequest envoy;
  envoy.set_domain(message.domain());
  *envoy.mutable_descriptors() = message.descriptors();
  auto request = toDecisionRequest(envoy);
  if (!request) {
    return request.error();
  }
  request->envoy_api = false;
  request->hits = static_cast<std::int64_t>(
      std::min<std::uint64_t>(hits, static_cast<std::uint64_t>(kRequestBounds.max_hits) + 1));
  return request;
}

}  // namespace

Result<DecisionRequest> fromReserveRequest(const kuadrant::ReserveRequest& request) {
  if (request.amount() == 0) {
    return invalid("amount", "must be over 0");
  }
  if (request.amount() > static_cast<std::uint64_t>(kRequestBounds.max_hits)) {
    return invalid("amount", "must be at most " + std::to_string(kRequestBounds.max_hits));
  }
  auto step = stepOf(request, request.amount());
  if (!step) {
    return step.error();
  }
  step->reservation.op = HoldOp::kReserve;
  if (request.has_ttl()) {
    const auto& ttl = request.ttl();
    if (ttl.seconds() < 0 || ttl.nanos() < 0 || (ttl.seconds() == 0 && ttl.nanos() == 0)) {
      return invalid("ttl", "must be over 0");
    }
    // Beyond any bound, and so refused by --max-reservation-ttl in its words.
    const std::int64_t seconds = std::min<std::int64_t>(ttl.seconds(), 100LL * 365 * 86400);
    step->reservation.ttl_us = seconds * kMicrosPerSecond + std::max(ttl.nanos() / 1000, 1);
  }
  return step;
}

Result<DecisionRequest> fromCommitRequest(const kuadrant::CommitRequest& request) {
  if (request.actual_amount() > static_cast<std::uint64_t>(kRequestBounds.max_hits)) {
    return invalid("actual_amount", "must be at most " + std::to_string(kRequestBounds.max_hits));
  }
  auto step = stepOf(request, request.actual_amount());
  if (!step) {
    return step.error();
  }
  step->reservation.op = HoldOp::kCommit;
  step->reservation.id = request.reservation_id();
  return step;
}

std::optional<CallError> reservationError(const Decision& decision) {
  if (decision.reservation.status == HoldStatus::kUnknown) {
    return CallError{StatusCode::kNotFound,
                     "reservation_id: " + decision.request.reservation.id +
                         " holds nothing on these limits and has not expired: not a "
                         "reservation of this store"};
  }
  return std::nullopt;
}

void toReserveResponse(const Decision& decision, kuadrant::ReserveResponse& response) {
  if (decision.reservation.status == HoldStatus::kReserved) {
    response.set_code(rls::RateLimitResponse::OK);
    response.set_reservation_id(decision.reservation.id);
  } else {
    response.set_code(rls::RateLimitResponse::OVER_LIMIT);
  }
}

void toCommitResponse(const Decision& decision, kuadrant::CommitResponse& response) {
  response.set_reservation_released(decision.reservation.status == HoldStatus::kCommitted);
}

}  // namespace sluice::grpc
