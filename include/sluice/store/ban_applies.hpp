#pragma once

#include "sluice/store/store.hpp"

namespace sluice {

/// Whether `limit`'s penalty box (LimitParams::ban, docs/bans.md) applies to `request`:
/// ordinary requests and reserves are refused during a ban and counted towards one; reports,
/// refunds, commits and releases settle what already happened and are never refused. The
/// one owner of that rule for every store.
inline bool banApplies(const StoreRequest& request, const StoreLimit& limit) {
  return limit.params.ban.enabled() && !limit.refund && request.charge != Charge::kReport &&
         (request.hold.op == HoldOp::kNone || request.hold.op == HoldOp::kReserve);
}

}  // namespace sluice
