#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/reservation.hpp"
#include "sluice/store/store.hpp"

/// The decision service's part of a reservation step (docs/reservations.md): what it checks
/// before the store call, and how the store's answer becomes Decision::reservation.
namespace sluice::reservation_detail {

// Allocation-free forms of reservation.hpp's id functions, for the steps' hot path
// (defined in reservation.cpp beside them).

/// formatReservationId() into `out`, replacing it and keeping its capacity.
void assignReservationId(std::string& out, Micros expires_at_us, std::string_view nonce,
                         std::uint64_t fingerprint);
/// The parts of `text` without copying them (`nonce` points into it), when it is an id made
/// for a request of this `fingerprint`; false where parseReservationId() answers an error or
/// the id carries another fingerprint.
bool splitReservationId(std::string_view text, std::uint64_t fingerprint, Micros& expires_at_us,
                        std::string_view& nonce);
/// newReservationNonce() into `out`, keeping its capacity.
void assignReservationNonce(std::string& out);

/// `out` back to an outcome of no step (ReservationOutcome{}), keeping the id's capacity.
void resetOutcome(ReservationOutcome& out);

/// Checks what a reservation step asks before any rule is read and fills the store's
/// HoldCall (and charge and cost): a reserve's amount (> 0) and ttl (0: the default; over
/// --max-reservation-ttl refused), a commit's or release's id (well formed, made for this
/// domain, client and descriptors). Errors are kInvalidArgument with the field's name.
Status prepareStep(const DecisionRequest& request, const ReservationSettings& settings,
                   StoreRequest& store_request);

/// Why the store must not see this reservation step, or "": a limit that cannot hold one
/// (holdRefusal), a reserve over --max-reservation-fraction of a limit, a commit larger
/// than every limit can ever admit. `where(i)` names limit i ("descriptors[0]: limit
/// \"x\": ").
std::string refusal(const StoreRequest& store_request, const ReservationSettings& settings,
                    const std::function<std::string(std::size_t)>& where);

/// Decision::reservation from the store's answer; a reserve that was not held answers
/// denied. An answer of a failure mode (degraded) is kUnavailable: a reservation step never
/// degrades.
Status settle(const DecisionRequest& request, const StoreRequest& store_request,
              const StoreResponse& response, Decision& decision);

/// A reservation step on a request that matched no limit: nothing to hold or charge.
void settleWithoutLimits(const DecisionRequest& request, const StoreRequest& store_request,
                         Micros now, Decision& decision);

}  // namespace sluice::reservation_detail
