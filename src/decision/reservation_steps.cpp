#include "decision/reservation_steps.hpp"

#include <algorithm>
#include <cmath>

namespace sluice::reservation_detail {
namespace {

Error invalid(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

std::string seconds(Micros us) {
  if (us % kMicrosPerSecond == 0) {
    return std::to_string(us / kMicrosPerSecond) + "s";
  }
  return std::to_string(us / 1000) + "ms";
}

}  // namespace

void resetOutcome(ReservationOutcome& out) {
  out.status = HoldStatus::kNone;
  out.id.clear();  // keeps its capacity for the next reserve's id
  out.expires_at_us = 0;
  out.ttl_us = 0;
  out.reserved = 0;
}

Status prepareStep(const DecisionRequest& request, const ReservationSettings& settings,
                   StoreRequest& store_request) {
  const ReservationRequest& step = request.reservation;
  HoldCall& call = store_request.hold;
  call.op = step.op;
  call.nonce.clear();  // keeps its capacity: the slot's next step writes its own
  call.ttl_us = 0;
  call.expires_at_us = 0;
  call.keep_us = settings.max_ttl_us;
  call.max_holds = settings.max_holds;
  if (!request.descriptor_hits.empty()) {
    for (const auto& hits : request.descriptor_hits) {
      if (hits) {
        return invalid(
            "hits_addend: a descriptor's own hits_addend is not taken by a reservation step "
            "(its amount applies to every limit)");
      }
    }
  }
  if (request.refund || !request.descriptor_refunds.empty()) {
    return invalid("refund: a reservation step cannot be a refund");
  }
  switch (step.op) {
    case HoldOp::kNone:
      return {};
    case HoldOp::kReserve: {
      if (request.hits <= 0) {
        return invalid("amount: must be a whole number over 0, got " +
                       std::to_string(request.hits));
      }
      // The default never passes the bound: --max-reservation-ttl 30s alone shortens it.
      const Micros ttl =
          step.ttl_us == 0 ? std::min(settings.default_ttl_us, settings.max_ttl_us) : step.ttl_us;
      if (ttl < 0) {
        return invalid("ttl: must be over 0, got " + std::to_string(ttl / 1000) + "ms");
      }
      if (ttl > settings.max_ttl_us) {
        return invalid("ttl: " + seconds(ttl) + " is over --max-reservation-ttl (" +
                       seconds(settings.max_ttl_us) + ")");
      }
      call.ttl_us = std::min(ttl, settings.max_ttl_us);
      assignReservationNonce(call.nonce);
      store_request.charge = Charge::kAllOrNothing;
      store_request.cost = request.hits;
      return {};
    }
    case HoldOp::kCommit:
    case HoldOp::kRelease: {
      Micros expires_at_us = 0;
      std::string_view nonce;
      if (!splitReservationId(step.id, reservationFingerprint(request), expires_at_us, nonce)) {
        if (auto parsed = parseReservationId(step.id); !parsed) {
          return parsed.error();  // words what is wrong
        }
        return invalid("reservation_id: \"" + step.id +
                       "\" was made for another domain, client or descriptors than this "
                       "request's (send the ones the reservation was made with)");
      }
      if (step.op == HoldOp::kCommit && request.hits < 0) {
        return invalid("actual: must be 0 or more");
      }
      call.nonce.append(nonce);  // cleared above, its capacity kept
      call.expires_at_us = expires_at_us;
      store_request.charge = step.op == HoldOp::kCommit ? Charge::kReport : Charge::kAllOrNothing;
      store_request.cost = step.op == HoldOp::kCommit ? request.hits : 0;
      return {};
    }
  }
  return {};
}

std::string refusal(const StoreRequest& store_request, const ReservationSettings& settings,
                    const std::function<std::string(std::size_t)>& where) {
  const HoldCall& call = store_request.hold;
  std::int64_t largest = -1;
  for (std::size_t i = 0; i < store_request.limits.size(); ++i) {
    const StoreLimit& limit = store_request.limits[i];
    if (const std::string_view why = holdRefusal(limit.params); !why.empty()) {
      return where(i) + std::string(why);
    }
    const std::int64_t capacity = limitCapacity(limit.params);
    largest = std::max(largest, capacity);
    if (call.op == HoldOp::kReserve) {
      // The default fraction, 1, holds the whole capacity (exactly what the product gives
      // below 2^53), without the arithmetic in doubles.
      const auto most = settings.max_fraction == 1.0 && capacity < (std::int64_t{1} << 53)
                            ? capacity
                            : static_cast<std::int64_t>(std::floor(static_cast<double>(capacity) *
                                                                   settings.max_fraction));
      if (store_request.cost > most) {
        return where(i) + "a reservation of " + std::to_string(store_request.cost) +
               " is over what it may hold: " + std::to_string(most) + " (" +
               std::to_string(capacity) + " x --max-reservation-fraction " +
               std::to_string(settings.max_fraction).substr(0, 4) + ")";
      }
    }
  }
  if (call.op == HoldOp::kCommit && largest >= 0 && store_request.cost > largest) {
    return "actual: " + std::to_string(store_request.cost) +
           " is larger than any matched limit can ever admit (the largest is " +
           std::to_string(largest) + "): not a cost this reservation can have had";
  }
  return {};
}

Status settle(const DecisionRequest& request, const StoreRequest& store_request,
              const StoreResponse& response, Decision& decision) {
  if (response.degraded) {
    // A failure mode answered: there is no hold to count on, nor one to settle.
    return makeError(ErrorKind::kUnavailable,
                     "store unavailable: a reservation step needs the store itself, not a "
                     "failure mode's answer");
  }
  ReservationOutcome& out = decision.reservation;
  resetOutcome(out);
  out.status = response.hold_status;
  if (request.reservation.op == HoldOp::kReserve) {
    if (out.status == HoldStatus::kReserved) {
      out.expires_at_us = response.hold_expires_at_us;
      out.ttl_us = store_request.hold.ttl_us;
      assignReservationId(out.id, response.hold_expires_at_us, store_request.hold.nonce,
                          reservationFingerprint(request));
    } else if (out.status != HoldStatus::kFull) {
      out.status = HoldStatus::kDenied;
    }
    decision.allowed = out.status == HoldStatus::kReserved;
    return {};
  }
  out.reserved = response.hold_amount;
  // A step that charges nothing decides nothing: its answer is where the limits stand.
  decision.allowed = true;
  return {};
}

void settleWithoutLimits(const DecisionRequest& request, const StoreRequest& store_request,
                         Micros now, Decision& decision) {
  ReservationOutcome& out = decision.reservation;
  resetOutcome(out);
  switch (request.reservation.op) {
    case HoldOp::kNone:
      return;
    case HoldOp::kReserve:
      // Nothing limits this request: the id holds nothing, and its commit charges nothing.
      out.status = HoldStatus::kReserved;
      out.ttl_us = store_request.hold.ttl_us;
      out.expires_at_us = now + store_request.hold.ttl_us;
      assignReservationId(out.id, out.expires_at_us, store_request.hold.nonce,
                          reservationFingerprint(request));
      return;
    case HoldOp::kCommit:
      out.status = HoldStatus::kCommitted;
      return;
    case HoldOp::kRelease:
      out.status = HoldStatus::kReleased;
      return;
  }
}

}  // namespace sluice::reservation_detail
