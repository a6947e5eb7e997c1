#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/store/redis_store.hpp"
#include "store/redis/resp_args.hpp"

struct redisAsyncContext;

namespace sluice::redis {

/// A Redis reply, built by hiredis' reader in this type directly (redis_connection.cpp).
/// kError appears only inside arrays: an error reply to a whole command is a typed Error.
struct Reply {
  enum class Type { kNil, kInteger, kString, kStatus, kArray, kError };
  Type type = Type::kNil;
  long long integer = 0;
  std::string str;
  std::vector<Reply> elements;
};

/// Completes exactly once: with the reply, or with a typed error (an error reply, the
/// deadline, a lost connection). Runs on the connection's io_context thread.
using ReplyHandler = std::function<void(Result<Reply>)>;

struct ConnectionOptions {
  RedisOptions redis;
  /// Lua sources loaded with SCRIPT LOAD on every (re)connect; evalScript(i) runs scripts[i].
  std::vector<std::string> scripts;
  /// First reconnect delay; doubles per failed attempt up to redis.max_reconnect_backoff.
  std::chrono::milliseconds initial_backoff{25};
  /// A connection whose oldest command has had no reply for this long is dropped and
  /// re-established (a server that accepts but never answers).
  std::chrono::milliseconds stall_timeout{1000};
  /// Called on the connection's thread after each successful handshake (1 = first).
  std::function<void(std::uint64_t connect_count)> on_connected;
  /// Called on the connection's thread each time the connection is lost or an attempt to
  /// (re)connect fails, with the reason; a reconnect follows with backoff.
  std::function<void(const std::string& reason)> on_disconnected;
  /// Start-up: commands made before the first successful handshake wait for it, up to this
  /// long after start() (then they fail with kConnection and health() turns kFailing).
  /// Zero: they fail at once, as after start-up.
  std::chrono::milliseconds connect_wait{0};
  /// A PING goes out this often while connected (zero: never). A PING answered with an
  /// error (LOADING, BUSY, ...) makes health() kFailing until one is answered with PONG; a
  /// PING unanswered for stall_timeout drops the connection.
  std::chrono::milliseconds ping_interval{0};
  /// Called on the connection's thread when a (re)connection attempt fails with `error`
  /// (refused, timed out, an error reply to AUTH or SCRIPT LOAD such as WRONGPASS or LOADING).
  std::function<void(const Error& error)> on_connect_error;
  /// Called on the connection's thread for the faults that no call may see (`local` does
  /// not call a failing store): a ready connection lost (reset, closed by the server, a
  /// stall, a PING out of step; kConnection, before on_disconnected) and a PING answered
  /// with an error reply (LOADING, BUSY, ...). Failed attempts to reconnect are reported by
  /// on_connect_error instead.
  std::function<void(const Error& error)> on_fault;
  /// Called on the connection's thread each time health() changes, with the reason.
  std::function<void(StoreHealth health, const std::string& reason)> on_health;
};

struct AsyncContextDeleter {
  void operator()(redisAsyncContext* context) const;
};
using AsyncContextPtr = std::unique_ptr<redisAsyncContext, AsyncContextDeleter>;

class AsioSocket;

/// One hiredis async connection driven by one Asio io_context: commands are pipelined,
/// each with a deadline; the connection re-establishes itself with capped exponential
/// backoff, re-authenticates, re-selects the database and reloads the scripts. Nothing
/// blocks: name resolution, connect and I/O are asynchronous.
/// All methods except ready() must be called on the io_context's thread.
class RedisConnection : public std::enable_shared_from_this<RedisConnection> {
 public:
  static std::shared_ptr<RedisConnection> create(boost::asio::io_context& io,
                                                 ConnectionOptions options);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  /// Starts connecting (asynchronously).
  void start();
  /// Fails every pending command with kUnavailable and closes; no reconnect afterwards.
  void stop();

  /// True once connected, authenticated and with every script loaded. Thread-safe.
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  /// kConnecting until the first handshake succeeds (or connect_wait has passed), then
  /// kHealthy while connected with pings answered, kFailing otherwise. Thread-safe.
  StoreHealth health() const { return health_.load(std::memory_order_acquire); }

  /// EVALSHA of scripts[script] with a deadline of `timeout` from now. A NOSCRIPT reply
  /// (Redis restarted, SCRIPT FLUSH) reloads the script and retries once, transparently,
  /// within the same deadline. Fails at once with kConnection when not ready().
  void evalScript(std::size_t script, std::vector<std::string> keys, std::vector<std::string> args,
                  std::chrono::milliseconds timeout, ReplyHandler done);
  /// The same with arguments already in RESP (a call of many keys).
  void evalScript(std::size_t script, RespArgs keys, RespArgs args,
                  std::chrono::milliseconds timeout, ReplyHandler done);

  /// Any other command, with a deadline of `timeout` from now.
  void command(std::vector<std::string> argv, std::chrono::milliseconds timeout, ReplyHandler done);

  /// Number of successful handshakes so far (tests, logs).
  std::uint64_t connectCount() const { return connects_.load(std::memory_order_relaxed); }

  /// Called by AsioSocket when hiredis releases the context (error, EOF, or our free).
  void onContextGone(AsioSocket* socket);
  /// The hiredis reply trampoline.
  void onReply(std::uint64_t id, Reply* reply, const redisAsyncContext* context);

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::uint8_t kNoScriptRetries = 3;

  struct Pending {
    ReplyHandler done;
    Clock::time_point deadline;
    std::multimap<Clock::time_point, std::uint64_t>::iterator deadline_it;
    std::optional<std::size_t> script;  ///< set for EVALSHA: NOSCRIPT retry
    /// NOSCRIPT retries made (each after its own SCRIPT LOAD): a SCRIPT FLUSH landing
    /// between a retry's LOAD and its EVALSHA (Redis reads a long pipeline of LOADs in
    /// pieces, serving other clients in between) costs one more, up to kNoScriptRetries.
    std::uint8_t noscript_retries = 0;
    std::string wire;  ///< the command in RESP, kept for a NOSCRIPT retry
  };

  RedisConnection(boost::asio::io_context& io, ConnectionOptions options);

  void connect();
  void onResolved(std::uint64_t attempt, const std::string& ip);
  void attach(AsyncContextPtr context);
  void sendHandshake();
  void onHandshakeStep(std::uint64_t attempt, std::size_t step, Result<Reply> reply);
  void fail(const std::string& reason);
  void scheduleReconnect();
  void setHealth(StoreHealth health, const std::string& reason);
  /// True while a command must wait for the first connection (start-up).
  bool waitingForFirstConnection() const;
  /// Runs the commands that waited for the first connection (now ready, or too late).
  void releaseWaiting();
  void onStartWaitOver();
  void schedulePing();
  void ping(std::uint64_t attempt);

  /// The start of an EVALSHA of scripts[script] with `argc` arguments after the script's
  /// name, the first `keys` of them keys; the arguments follow.
  std::string evalHeader(std::size_t script, std::size_t keys, std::size_t argc,
                         std::size_t reserve) const;
  /// A whole command in RESP (explicit: `enqueue({"PING"}, ...)` must not compile as bytes).
  struct Wire {
    explicit Wire(std::string b) : bytes(std::move(b)) {}
    std::string bytes;
  };
  std::uint64_t enqueue(Wire wire, Clock::time_point deadline, std::optional<std::size_t> script,
                        ReplyHandler done);
  bool write(std::uint64_t id, std::string_view wire);
  void complete(std::uint64_t id, Result<Reply> result);
  void armTimer();
  void onTimer();

  boost::asio::io_context& io_;
  ConnectionOptions options_;
  std::string endpoint_;  ///< for logs
  boost::asio::ip::tcp::resolver resolver_;
  boost::asio::steady_timer timer_;       ///< deadlines and stall detection
  boost::asio::steady_timer reconnect_;   ///< backoff
  boost::asio::steady_timer start_wait_;  ///< end of connect_wait
  boost::asio::steady_timer ping_timer_;
  std::optional<Clock::time_point> timer_at_;

  AsyncContextPtr context_;
  std::shared_ptr<AsioSocket> socket_;
  std::vector<std::string> shas_;

  enum class State { kIdle, kConnecting, kReady, kBackoff, kStopped };
  State state_ = State::kIdle;
  std::atomic<bool> ready_{false};
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<StoreHealth> health_{StoreHealth::kConnecting};
  bool start_wait_over_ = false;
  std::string last_failure_;  ///< why the last attempt failed (for the health log)
  /// Commands made during start-up before the first connection: each re-issues itself.
  std::vector<std::function<void()>> waiting_;
  std::uint64_t attempt_ = 0;
  std::chrono::milliseconds backoff_;
  bool down_logged_ = false;
  bool destroying_ = false;

  std::uint64_t next_id_ = 1;
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::multimap<Clock::time_point, std::uint64_t> deadlines_;
  std::deque<Clock::time_point> in_flight_;  ///< send times of unanswered hiredis commands
};

}  // namespace sluice::redis
