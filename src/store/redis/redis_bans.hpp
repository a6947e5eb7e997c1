#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sluice/store/ban_applies.hpp"
#include "sluice/store/store.hpp"

/// The penalty box on the Redis stores (docs/bans.md; the script side is 85_ban.lua).
namespace sluice::redis {

/// Appends the ban values of each limit whose penalty box applies (banApplies) after the
/// arguments already in `args`, and marks its quota group slot "<group>@<k>" with their ARGV
/// index k. `values_per_limit`: the limits' stride in `args`, after its first (time) value.
void appendBanArguments(const StoreRequest& request, std::size_t values_per_limit,
                        std::vector<std::string>& args);

/// The ban's numbers of `limit` for the argument lists' signature (all 0 when none applies).
void appendBanSignature(const StoreRequest& request, const StoreLimit& limit,
                        std::vector<std::int64_t>& signature);

/// Reads the script's never slot of one limit into `outcome`: 1 never, 2 banned, 2 + s a
/// ban of step s started by this request.
void readNeverSlot(std::int64_t value, Outcome& outcome);

}  // namespace sluice::redis
