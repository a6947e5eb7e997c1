#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/clock.hpp"
#include "sluice/metrics.hpp"
#include "sluice/result.hpp"
#include "sluice/store.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice {

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
  /// Local over-limit cache: a key Redis denied until T is denied locally until T without
  /// a round trip (never for requests with a count_rejected limit). Per store instance.
  bool local_cache = true;
  std::size_t local_cache_max_keys = 100'000;
};

/// The Redis key of one bucket: "<prefix>:{<escapeKeyPart(client)>}:<bucket_key>".
/// The `{...}` hash tag makes every key of one request of one client land in the same
/// Redis Cluster slot (one script call may touch them all). Without a client id the tag is
/// empty ("<prefix>:{}:<bucket_key>"): Redis Cluster then hashes each whole key, so a
/// request with several limits and no client id may span slots. `prefix` must not contain
/// '{' or '}' (the store replaces them by %7B / %7D); `bucket_key` is the already-escaped
/// StoreLimit::key. Distinct (client, bucket_key) pairs always give distinct keys.
std::string redisBucketKey(std::string_view prefix, std::string_view client,
                           std::string_view bucket_key);

/// Parses a Redis URL into `base` (keeps base's non-URL fields). Errors name the problem.
Result<RedisOptions> parseRedisUrl(const std::string& url, RedisOptions base = {});

/// A Redis store bound to one I/O thread's io_context (one connection per I/O thread,
/// commands pipelined on it). evaluate() must be called on that io_context's thread; the
/// connection starts asynchronously (healthy() turns true once it is ready). Destroy the
/// store before its io_context. Each evaluate() is one EVALSHA with the request deadline
/// `options.request_timeout`; errors: kTimeout, kConnection (not connected / lost),
/// kScript, kUnavailable. Metrics: store_call_duration_seconds{store="redis"},
/// local_cache_hits_total, redis_reconnects_total.
StorePtr makeRedisStore(boost::asio::io_context& io, const RedisOptions& options, Metrics& metrics);

enum class FailureMode { kOpen, kClosed, kLocal };

/// "open", "closed", "local".
std::string_view failureModeName(FailureMode mode);
/// Parses the flag spelling; kInvalidArgument when unknown.
Result<FailureMode> parseFailureMode(std::string_view text);

/// Wraps a primary store with the failure mode: `open` allows (degraded), `closed` fails,
/// `local` answers from `fallback` (the memory store) until the primary is healthy again.
/// Transitions are logged once and counted. `local` answers from the fallback while the
/// primary is not healthy() and for each request the primary failed; a healthy primary is
/// asked again at once (the Redis store reconnects within max_reconnect_backoff, 0.5 s by
/// default). Metrics: store_errors_total{kind}, store_failure_mode_activations_total{mode},
/// store_degraded_decisions_total{mode}. Thread-safe as far as the wrapped stores are.
StorePtr makeFailoverStore(StorePtr primary, StorePtr fallback, FailureMode mode, Metrics& metrics);

}  // namespace sluice
