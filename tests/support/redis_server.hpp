#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <sys/types.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/store/store.hpp"

/// Test fixtures around a real redis-server (no mock stands in for Redis).
namespace sluice::test {

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

struct RedisServerOptions {
  bool unix_socket = false;             ///< also listen on <tempdir>/redis.sock
  std::string password;                 ///< requirepass (default user)
  std::vector<std::string> extra_args;  ///< e.g. {"--user", "alice on >pw ~* +@all"}
  /// A Redis Cluster node: its cluster bus gets a free port of its own (`--cluster-port`).
  /// Redis' default, port + 10 000, is refused above 65 535 (a fifth of the ephemeral ports)
  /// and may be taken by anyone.
  bool cluster_bus = false;
  std::chrono::milliseconds start_timeout{5000};
};

/// A real `redis-server` on a free loopback port, with its own temporary directory,
/// no persistence (`--save "" --appendonly no`). Started by the constructor (throws
/// std::runtime_error when it cannot start), stopped by the destructor.
class RedisServer {
 public:
  explicit RedisServer(RedisServerOptions options = {});
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const { return port_; }
  std::string host() const { return "127.0.0.1"; }
  /// redis://127.0.0.1:<port>/<db>
  std::string url(int db = 0) const;
  /// unix://<tempdir>/redis.sock (only with options.unix_socket).
  std::string unixUrl() const;
  const std::string& unixPath() const { return unix_path_; }
  bool running() const { return pid_ > 0; }

  /// Kills the server at once (SIGKILL: a crash, not a shutdown) and reaps it.
  void stop();
  /// Starts it again on the same port (after stop()), with its data directory (a dump.rdb
  /// written by SAVE is loaded); returns once it answers, -LOADING included. Throws when it
  /// cannot.
  void restart();

  /// A new blocking connection (authenticated when a password is set); for assertions.
  ContextPtr connect() const;
  /// Runs one command on a cached blocking connection; throws on a connection error.
  ReplyPtr command(const std::vector<std::string>& argv);
  /// How many times `command` (lower case, e.g. "evalsha", "hset") ran since the server
  /// started or its last CONFIG RESETSTAT, scripts' calls included (INFO commandstats; 0
  /// before the first). Throws when INFO does not answer.
  long long commandCalls(std::string_view command);

  /// A loopback TCP port that was free a moment ago.
  static int freePort();

 private:
  void launch();
  bool waitForPing(std::chrono::milliseconds timeout) const;

  RedisServerOptions options_;
  std::string dir_;
  std::string unix_path_;
  int port_ = 0;
  int bus_port_ = 0;  ///< the cluster bus's, with options_.cluster_bus
  pid_t pid_ = -1;
  ContextPtr client_;
};

/// A TCP listener on a free loopback port that accepts connections and never answers:
/// a Redis that hangs. Reads and discards whatever it receives.
class BlackholeServer {
 public:
  enum class Mode {
    kSilent,  ///< never sends a byte
    /// Answers a client's first bytes with a reply that never ends (a bulk string header,
    /// then one byte of it every 50 ms): a blocking client whose read timeout is longer
    /// than that waits in its read until stopReplying(); no timer of its own ends the wait.
    kEndlessReply,
  };

  explicit BlackholeServer(Mode mode = Mode::kSilent);
  ~BlackholeServer();
  BlackholeServer(const BlackholeServer&) = delete;
  BlackholeServer& operator=(const BlackholeServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_) + "/0"; }
  int acceptedConnections() const { return accepted_.load(); }
  /// Clients that have sent at least one byte (for kEndlessReply: are being answered).
  int clientsThatSpoke() const { return spoke_.load(); }
  /// From now on sends nothing more (kEndlessReply turns into kSilent); connections stay open.
  void stopReplying() { replying_ = false; }

 private:
  void run();

  Mode mode_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<bool> replying_{true};
  std::atomic<int> accepted_{0};
  std::atomic<int> spoke_{0};
  std::thread thread_;
};

/// Runs `io` (on the calling thread) until `done()` is true or `timeout` passes; returns
/// done(). For tests that drive an async store from the test thread.
inline bool runUntil(boost::asio::io_context& io, const std::function<bool()>& done,
                     std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  if (io.stopped()) {
    io.restart();
  }
  auto guard = boost::asio::make_work_guard(io);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(5));
  }
  return done();
}

/// Runs `io` for `duration` (lets timers and reconnects happen).
inline void runFor(boost::asio::io_context& io, std::chrono::milliseconds duration) {
  if (io.stopped()) {
    io.restart();
  }
  auto guard = boost::asio::make_work_guard(io);
  auto deadline = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(5));
  }
}

/// Evaluates `request` on an asynchronous store driven by `io` from the test thread. The
/// callback must run exactly once: a late reply must never complete a request twice.
inline Result<StoreResponse> evaluateOnce(boost::asio::io_context& io, Store& store,
                                          const StoreRequest& request) {
  std::optional<Result<StoreResponse>> result;
  int calls = 0;
  store.evaluate(request, [&](Result<StoreResponse> r) {
    ++calls;
    result.emplace(std::move(r));
  });
  EXPECT_TRUE(runUntil(io, [&] { return result.has_value(); }));
  runFor(io, std::chrono::milliseconds(1));
  EXPECT_EQ(calls, 1);
  if (!result) {
    return makeError(ErrorKind::kInternal, "no answer");
  }
  return std::move(*result);
}

}  // namespace sluice::test
