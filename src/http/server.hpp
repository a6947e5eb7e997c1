#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "http/router.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice::http {

/// Limits and timeouts of the HTTP listener. Every read has a deadline and every buffer a
/// bound (docs/architecture.md, "Conventions").
struct ServerOptions {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;                ///< 0: any free port (see Server::port())
  unsigned threads = 1;                     ///< I/O threads, each with its own io_context
  std::size_t max_body_bytes = 1 << 20;     ///< larger bodies get 413
  std::size_t max_header_bytes = 16 << 10;  ///< larger header sections get 431
  std::size_t max_pipelined = 16;           ///< requests read ahead of their answers
  std::size_t max_connections_per_thread = 10'000;
  /// From the first byte of a request to its last: slow senders are dropped.
  std::chrono::milliseconds request_timeout{10'000};
  /// An idle keep-alive connection (nothing pending) is closed after this.
  std::chrono::milliseconds idle_timeout{60'000};
  /// A client that does not read its answer is dropped after this.
  std::chrono::milliseconds write_timeout{10'000};
  /// Graceful shutdown waits this long for in-flight requests (including shaped holds).
  std::chrono::milliseconds drain_timeout{30'000};
};

/// The HTTP/1.1 server: one io_context per I/O thread, each with its own acceptor bound
/// to the same address with SO_REUSEPORT, so the kernel spreads connections and no lock is
/// shared between threads. Sessions read with deadlines, answer pipelined requests in
/// order (at most max_pipelined queued), and never block their thread.
///
/// Life cycle: construct, listen(), setRouter() for every thread (handlers may capture
/// per-thread objects built on ioContext(i)), run() on the main thread until stop().
class Server {
 public:
  Server(ServerOptions options, Metrics& metrics);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds and listens on every thread's acceptor. Fails (kUnavailable) when the address is
  /// already in use by anyone else, cannot be resolved or bound.
  Status listen();

  /// The bound port (useful with port 0), valid after listen().
  std::uint16_t port() const;
  unsigned threadCount() const;

  /// The io_context of I/O thread `thread` (< threadCount()).
  boost::asio::io_context& ioContext(unsigned thread);
  /// A context run by run()'s caller for signals and housekeeping, never for requests.
  boost::asio::io_context& controlContext();

  /// The routing table of one I/O thread; must be set for each before run().
  void setRouter(unsigned thread, std::shared_ptr<const Router> router);

  /// Runs all I/O threads and the control context; returns after stop() once every
  /// connection has finished (or drain_timeout passed).
  void run();

  /// Graceful shutdown: stop accepting, close idle connections, finish in-flight requests
  /// (held answers included), then let run() return. Thread-safe and idempotent.
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::http
