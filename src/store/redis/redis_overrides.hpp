#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/store/limit_override.hpp"
#include "sluice/store/store.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/redis_store_internal.hpp"

/// Runtime overrides in Redis (src/store/redis/lua/15_overrides.lua has the layout): the
/// admin side's calls, and the part of a request script's reply that says which applied.
namespace sluice::redis {

/// "<prefix>:{<tag>}#o": the hash of one tag's overrides, in the slot of its buckets.
std::string overrideHashKey(std::string_view redis_prefix, std::string_view tag);
/// "<prefix>:overrides": the index of every override (listing, the bound on their number).
std::string overrideIndexKey(std::string_view redis_prefix);

/// Sets an override: the index first (where the bound is checked), then the tag's hash.
void setOverrideIn(std::shared_ptr<RedisBackend> backend, std::string_view redis_prefix,
                   const OverrideSlot& slot, const StoredOverride& value, std::size_t max_overrides,
                   std::chrono::milliseconds timeout, OverrideSetCallback done);
/// Removes one: the tag's hash first (decisions stop applying it), then the index.
void removeOverrideIn(std::shared_ptr<RedisBackend> backend, std::string_view redis_prefix,
                      const OverrideSlot& slot, std::chrono::milliseconds timeout,
                      OverrideRemoveCallback done);
/// Every override of the index (entries that cannot be read are left out).
void listOverridesIn(std::shared_ptr<RedisBackend> backend, std::string_view redis_prefix,
                     std::chrono::milliseconds timeout, OverrideListCallback done);

/// A limit that may take a runtime override names its rule's field after the limits' own
/// values (and the sketches'), and its flags say where: flags + `flag` x that field's ARGV
/// index (15_overrides.lua). `values_per_limit`: the limits' stride in `args`, after its
/// first (time) value. Sketches are never overridden.
void appendOverrideFields(const StoreRequest& request, std::size_t values_per_limit,
                          std::int64_t flag, std::vector<std::string>& args);

/// The overrides a request script's reply says it applied (its element after the limits'
/// and sketches' values, when present) into `out`. False when that element is malformed.
bool readAppliedOverrides(const Reply& element, std::size_t limits,
                          std::vector<AppliedOverride>& out);

}  // namespace sluice::redis
