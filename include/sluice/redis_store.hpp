#pragma once

#include <chrono>
#include <string>

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
  std::chrono::milliseconds request_timeout{20};      ///< per-request deadline
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds max_reconnect_backoff{1000};
};

/// Parses a Redis URL into `base` (keeps base's non-URL fields). Errors name the problem.
Result<RedisOptions> parseRedisUrl(const std::string& url, RedisOptions base = {});

/// A Redis store bound to one I/O thread's io_context (one connection per I/O thread,
/// commands pipelined on it). evaluate() must be called on that io_context's thread.
StorePtr makeRedisStore(boost::asio::io_context& io, const RedisOptions& options, Metrics& metrics);

enum class FailureMode { kOpen, kClosed, kLocal };

/// Wraps a primary store with the failure mode: `open` allows (degraded), `closed` fails,
/// `local` answers from `fallback` (the memory store) until the primary is healthy again.
/// Transitions are logged once and counted.
StorePtr makeFailoverStore(StorePtr primary, StorePtr fallback, FailureMode mode, Metrics& metrics);

}  // namespace sluice
