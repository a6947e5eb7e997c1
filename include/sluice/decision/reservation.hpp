#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/clock.hpp"
#include "sluice/common/flag_registry.hpp"
#include "sluice/common/result.hpp"
#include "sluice/store/store.hpp"

/// Reservations (docs/reservations.md): a hold on every matched limit while the work runs,
/// settled by a commit (the actual amount), a release or its expiry. What every transport
/// shares: the bounds, the id, and the words of an outcome.
namespace sluice {

struct DecisionRequest;

/// The bounds of reservations (flags --reservation-ttl, --max-reservation-ttl,
/// --max-reservation-fraction, --max-reservation-holds).
struct ReservationSettings {
  Micros default_ttl_us = 60 * kMicrosPerSecond;  ///< a reserve that names no ttl
  Micros max_ttl_us = 600 * kMicrosPerSecond;     ///< longer ttls are refused
  /// A reservation may hold at most this fraction of each matched limit's capacity.
  double max_fraction = 1.0;
  /// Most live holds one bucket may carry (a reserve beyond it is denied).
  std::int64_t max_holds = 1000;
};

/// Registers the reservation flags (section "Reservations") on `settings`.
void addReservationFlags(FlagRegistry& registry, ReservationSettings& settings);

/// What a transport asks of a reservation (DecisionRequest::reservation). The amount of a
/// reserve and the actual amount of a commit are DecisionRequest::hits.
struct ReservationRequest {
  HoldOp op = HoldOp::kNone;
  Micros ttl_us = 0;  ///< kReserve: the hold's lifetime; 0: the default
  std::string id{};   ///< kCommit, kRelease: the id the reserve answered
};

/// What a reservation step did (Decision::reservation).
struct ReservationOutcome {
  HoldStatus status = HoldStatus::kNone;
  std::string id{};           ///< kReserved: the id to commit or release with
  Micros expires_at_us = 0;   ///< kReserved: on the store's clock
  Micros ttl_us = 0;          ///< kReserved: the lifetime granted
  std::int64_t reserved = 0;  ///< kCommitted: the amount the hold was made for
};

/// A reservation id's parts: `r1.<expiry µs>.<nonce: 16 hex>.<fingerprint: 16 hex>`. The
/// fingerprint binds the id to the domain, client and descriptors it was made for.
struct ReservationId {
  Micros expires_at_us = 0;
  std::string nonce{};
  std::uint64_t fingerprint = 0;
};

std::string formatReservationId(const ReservationId& id);
/// Errors (kInvalidArgument) say what is wrong with the text.
Result<ReservationId> parseReservationId(std::string_view text);

/// The fingerprint of a request's domain, client id and descriptors (entries in order).
std::uint64_t reservationFingerprint(const DecisionRequest& request);

/// A fresh random nonce: 16 lower-case hex digits.
std::string newReservationNonce();

/// "reserved", "denied", "full", "committed", "late", "released", "settled", "expired",
/// "unknown" ("" for kNone).
std::string_view holdStatusName(HoldStatus status);

}  // namespace sluice
