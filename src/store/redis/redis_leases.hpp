#pragma once

#include <chrono>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/store/lease.hpp"
#include "sluice/store/store.hpp"
#include "store/redis/redis_store_internal.hpp"

/// Releases and renews of concurrency leases on Redis (Store::changeLease): one call of the
/// request script in its lease mode (65_concurrency.lua), over the keys of one lease, which
/// share one hash slot (one client, one domain).
namespace sluice::redis {

/// Sends `request` through `backend`; `test_time` is the test clock's time for a script
/// composed with ScriptTime::kStoreClock, else 0 (Redis's clock decides).
void changeLeaseOnRedis(RedisBackend& backend, const std::string& prefix, Micros test_time,
                        const LeaseRequest& request, std::chrono::milliseconds timeout,
                        Store::LeaseCallback done);

}  // namespace sluice::redis
