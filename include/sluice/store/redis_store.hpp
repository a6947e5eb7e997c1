#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/store/store.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice {

/// Where the Redis script reads the decision time.
enum class ScriptTime {
  kRedis,       ///< Redis TIME (production: every Sluice instance shares one clock)
  kStoreClock,  ///< TESTS ONLY: the store's Clock, sent with each call (00_time_test.lua), so
                ///< that a trace on a ManualClock can be compared with the C++ limiter
};

/// Connection settings parsed from redis://[user:password@]host:port/db or unix:///path.
struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string unix_path;  ///< set for unix:// URLs
  std::string user;
  std::string password;
  int db = 0;
  std::string key_prefix = "sluice";
  std::chrono::milliseconds request_timeout{20};  ///< per-request deadline
  std::chrono::milliseconds connect_timeout{1000};
  /// Cap of the reconnect backoff: a Redis that is back is used again within this much
  /// (plus one handshake).
  std::chrono::milliseconds max_reconnect_backoff{500};
  /// A connection whose oldest command got no reply for this long is re-established.
  std::chrono::milliseconds stall_timeout{1000};
  /// Start-up (`--store-connect-wait-ms`): until every connection has been made once, or
  /// this long after the store was created, the store's health is kConnecting and a
  /// request waits for its connection instead of failing (its deadline, request_timeout,
  /// starts when it is sent). Zero: requests fail at once while not connected.
  std::chrono::milliseconds connect_wait{2000};
  /// Every connection is pinged this often; an error or no answer makes the store's health
  /// kFailing (the answer to a lost PING: the connection is re-established).
  std::chrono::milliseconds ping_interval{1000};
  /// Local over-limit cache: a key Redis denied until T is denied locally until T without
  /// a round trip (never for requests with a count_rejected limit). Per store instance.
  bool local_cache = true;
  std::size_t local_cache_max_keys = 100'000;
  /// Most decisions in one script call (`--redis-max-batch`). The decisions that reach the
  /// store in one turn of its io_context go to Redis as one EVALSHA per node (a cluster: per
  /// hash slot), decided one after another by the script, each still atomic; a full batch
  /// goes at once and the next one starts. 1: one EVALSHA per decision.
  std::size_t max_batch = 32;
  /// Most batches awaiting Redis's answer at once from one store (one I/O thread) on a
  /// single node, or per hash slot in a cluster (`--redis-batches-in-flight`); while that
  /// many are, the turn's decisions for that node (slot) wait in the next batch, sent once
  /// one is answered, or at once when it is full (max_batch). The slower Redis answers, the
  /// more decisions each call carries, so the cheaper each is for Redis. 0: no bound (every
  /// turn's batches go at its end).
  std::size_t max_batches_in_flight = 1;
  /// No flag sets it: only tests choose kStoreClock.
  ScriptTime script_time = ScriptTime::kRedis;
};

/// Parses a Redis URL into `base` (keeps base's non-URL fields). Errors name the problem.
Result<RedisOptions> parseRedisUrl(const std::string& url, RedisOptions base = {});

/// A Redis store bound to one I/O thread's io_context (one connection per I/O thread,
/// commands pipelined on it). evaluate() must be called on that io_context's thread; the
/// connection starts asynchronously (healthy() turns true once it is ready). Destroy the
/// store before its io_context. Each evaluate() is one EVALSHA with the request deadline
/// `options.request_timeout`; errors: kTimeout, kConnection (not connected / lost),
/// kScript, kUnavailable. Keys: BucketKey::redisKey of each StoreLimit::key with the
/// configured prefix. `clock` dates the local over-limit cache (and, with
/// ScriptTime::kStoreClock, the script's decisions); it must outlive the store. Metrics:
/// store_call_duration_seconds{store="redis"}, local_cache_hits_total, redis_reconnects_total.
StorePtr makeRedisStore(boost::asio::io_context& io, const RedisOptions& options, Metrics& metrics,
                        const Clock& clock);

/// Parses `--redis` for `--store redis_cluster`: one or more comma-separated seed URLs
/// (redis://[user:password@]host:port, database 0), each into `base`. The seeds only serve
/// to discover the cluster; every seed must carry the same user and password (used for
/// every node). Errors name the seed. `separator`: between the seeds (`--regions` joins a
/// cluster region's seeds with '+', its regions being separated by commas).
Result<std::vector<RedisOptions>> parseRedisClusterUrls(const std::string& urls,
                                                        RedisOptions base = {},
                                                        char separator = ',');

/// A Redis Cluster store bound to one I/O thread's io_context, with the Redis store's
/// semantics, script, deadline and local cache. It reads the slot map with CLUSTER SLOTS
/// from any reachable seed or known node, sends each request (whose keys share one slot,
/// see redisClusterBucketKey) as one EVALSHA to its slot's master over one connection per
/// master (made on first use), follows MOVED (updating the map and re-reading the topology,
/// at most every 200 ms) and ASK (ASKING, once, map unchanged), at most 5 redirects within
/// the request deadline, and re-reads the topology when a master is lost until a replica
/// has been promoted. Calls to a master that is not connected fail at once with
/// kConnection (the failure mode answers). healthy() while every slot has a reachable
/// master. `seeds` must not be empty (parseRedisClusterUrls); their first gives the
/// credentials, timeouts, key prefix and script time. `clock` as in makeRedisStore. Metrics: those
/// of makeRedisStore plus redis_cluster_redirects_total{kind},
/// redis_cluster_topology_refreshes_total{result}, redis_cluster_failovers_total.
StorePtr makeRedisClusterStore(boost::asio::io_context& io, const std::vector<RedisOptions>& seeds,
                               Metrics& metrics, const Clock& clock);

}  // namespace sluice
