#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/store/redis_store.hpp"
#include "sluice/store/store.hpp"
#include "store/redis/redis_connection.hpp"

namespace boost::asio {
class io_context;
}

/// Private to the Redis store and its tests.
namespace sluice::redis {

/// The request script: time prelude + every algorithm file + 99_evaluate.lua.
/// ScriptTime::kStoreClock selects the prelude that reads the time from ARGV[1].
std::string composeScript(ScriptTime time);

/// Declares the metrics every Redis-backed store and backend shares
/// (store_call_duration_seconds, local_cache_hits_total, redis_reconnects_total,
/// redis_script_calls_total).
Metrics& describeRedisMetrics(Metrics& metrics);

/// Where a Redis store sends its calls: one connection (`redis`) or a cluster router
/// (`redis_cluster`). Methods other than ready() run on the store's io_context thread;
/// handlers complete exactly once, on that thread.
class RedisBackend {
 public:
  virtual ~RedisBackend() = default;

  /// EVALSHA of the request script (composeScript) over `keys`, which share one hash slot,
  /// with a deadline of `timeout` from now covering every retry and redirect.
  virtual void evalScript(std::vector<std::string> keys, std::vector<std::string> args,
                          std::chrono::milliseconds timeout, ReplyHandler done) = 0;

  /// The nodes that hold keys (the masters), named for command(); for admin reset's SCAN.
  virtual std::vector<std::string> keyNodes() const = 0;

  /// Runs one command on `node` (one of keyNodes()), without redirection.
  virtual void command(const std::string& node, std::vector<std::string> argv,
                       std::chrono::milliseconds timeout, ReplyHandler done) = 0;

  /// True when keys are spread over hash slots: a multi-key command (UNLINK) must name keys
  /// of one slot only.
  virtual bool clustered() const = 0;

  /// Runs `fn` on the store's io_context thread after the handlers ready now (the end of
  /// this event-loop turn): the store sends the batch it collected in the turn from there.
  virtual void post(std::function<void()> fn) = 0;

  /// The backend's health (StoreHealth): kConnecting at start-up until every connection
  /// it needs has been made once (or RedisOptions::connect_wait has passed), during which
  /// calls wait for their connection; kHealthy while every connection is up and answers
  /// its pings; kFailing otherwise. Thread-safe.
  virtual StoreHealth health() const = 0;
};

/// A Redis store over `backend`; `kind` is "redis" or "redis_cluster" (Store::kind() and
/// the store label of store_call_duration_seconds); `clock` as in makeRedisStore.
StorePtr makeRedisStoreOver(std::shared_ptr<RedisBackend> backend, const RedisOptions& options,
                            Metrics& metrics, std::string_view kind, const Clock& clock);

}  // namespace sluice::redis
