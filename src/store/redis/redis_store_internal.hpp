#pragma once

#include <chrono>
#include <cstdint>
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

  // --- For the eventual engine (src/store/eventual/), which syncs keys of many slots ------

  /// True when calls can go out now: the connection is up (one node), the slot map is known
  /// (a cluster; a call to a master that is down still fails).
  virtual bool ready() const = 0;
  /// Grows with every (re)connection of any connection: a change means a Redis may have
  /// restarted empty.
  virtual std::uint64_t connectCount() const = 0;
  /// The master serving `slot` (an index stable for the backend's life), -1 when unknown;
  /// always 0 for one node.
  virtual int masterOf(int slot) const = 0;
  /// EVALSHA of the script with no declared key and `args`, on the master of `slot`: the
  /// script names keys of any slot that master serves in `args` (a script may declare keys
  /// of one slot only). No redirect is followed: a key that moved fails the call (the
  /// topology is read again).
  virtual void evalScriptOnMasterOf(int slot, RespArgs args, std::chrono::milliseconds timeout,
                                    ReplyHandler done) = 0;
  /// evalScript() with the keys and arguments already in RESP: a call of many keys (a sync
  /// or a replication step) built without a string per argument.
  virtual void evalScript(RespArgs keys, RespArgs args, std::chrono::milliseconds timeout,
                          ReplyHandler done) = 0;
  /// Fails the calls in flight and closes every connection; nothing reconnects afterwards.
  virtual void stop() = 0;
};

/// The one-node backend, started: one pipelined connection (made on io's thread). With
/// `metrics` it is a store's: it waits for its first handshake (connect_wait), pings, and
/// joins the `redis` health group; without, a plain connection whose failures the caller
/// handles (the eventual engine's).
std::shared_ptr<RedisBackend> makeSingleNodeBackend(boost::asio::io_context& io,
                                                    const RedisOptions& options, Metrics* metrics,
                                                    std::string script);

/// The Redis Cluster backend (redis_cluster_store.cpp), started: routes by hash slot over one
/// connection per master (made on io's thread), follows MOVED/ASK, re-reads the topology.
/// `script` is the one script evalScript() runs. Joins the `redis_cluster` health group,
/// unless it is another `region`'s cluster (--regions): that one's outages are the eventual
/// engine's to report (they do not make this sidecar unready), and its logs name the region.
std::shared_ptr<RedisBackend> makeClusterBackend(boost::asio::io_context& io,
                                                 std::vector<RedisOptions> seeds, Metrics& metrics,
                                                 std::string script, std::string region = {});

/// A Redis store over `backend`; `kind` is "redis" or "redis_cluster" (Store::kind() and
/// the store label of store_call_duration_seconds); `clock` as in makeRedisStore.
StorePtr makeRedisStoreOver(std::shared_ptr<RedisBackend> backend, const RedisOptions& options,
                            Metrics& metrics, std::string_view kind, const Clock& clock);

}  // namespace sluice::redis
