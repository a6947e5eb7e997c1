#pragma once

#include <string>

#include "sluice/clock.hpp"
#include "sluice/metrics.hpp"
#include "sluice/redis_store.hpp"
#include "sluice/store.hpp"

namespace boost::asio {
class io_context;
}

/// Private to the Redis store and its tests.
namespace sluice::redis {

/// The request script: time prelude + every algorithm file + 99_evaluate.lua.
/// `test_time` selects the prelude that reads the time from ARGV[1].
std::string composeScript(bool test_time);

/// TESTS ONLY (not reachable from configuration or the public headers): a Redis store whose
/// script takes the decision time from `script_clock` (sent as ARGV[1]) instead of Redis
/// TIME, so that it can be compared with the C++ limiter on a simulated timeline. Its local
/// over-limit cache uses the same clock. `script_clock` must outlive the store.
StorePtr makeRedisStoreForTesting(boost::asio::io_context& io, const RedisOptions& options,
                                  Metrics& metrics, const Clock& script_clock);

}  // namespace sluice::redis
