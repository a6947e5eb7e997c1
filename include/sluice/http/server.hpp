#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/http/router.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice::http {

/// One address the HTTP server listens on: a TCP host and port, or a unix socket file.
struct ListenAddress {
  enum class Kind : std::uint8_t { kTcp, kUnix };

  Kind kind = Kind::kTcp;
  std::string host = "127.0.0.1";  ///< kTcp: an address or a name to resolve
  std::uint16_t port = 8080;       ///< kTcp; 0: any free port (see Server::port())
  std::string path;                ///< kUnix: the socket file

  static ListenAddress tcp(std::string host, std::uint16_t port);
  static ListenAddress unixSocket(std::string path);
  /// "127.0.0.1:8080", "[::1]:8080" or "unix:/run/sluice.sock".
  std::string toString() const;
  friend bool operator==(const ListenAddress&, const ListenAddress&) = default;
};

/// Limits and timeouts of the HTTP listener. Every read has a deadline and every buffer a
/// bound (docs/architecture.md, "Conventions").
struct ServerOptions {
  /// Where to listen: one or more addresses, all served by the same I/O threads.
  std::vector<ListenAddress> listen{ListenAddress{}};
  /// Permissions of the unix socket files (chmod), set before they accept connections.
  unsigned unix_socket_mode = 0660;
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

/// The HTTP/1.1 server: one io_context per I/O thread. On a TCP address each thread has its
/// own acceptor bound with SO_REUSEPORT, so the kernel spreads connections and no lock is
/// shared between threads. A unix socket cannot be shared that way (EOPNOTSUPP): one
/// acceptor, on I/O thread 0, hands its connections to the threads in turn. Sessions read with
/// deadlines, answer pipelined requests in order (at most max_pipelined queued), and never block
/// their thread.
///
/// Life cycle: construct, listen(), setRouter() for every thread (handlers may capture
/// per-thread objects built on ioContext(i)), run() on the main thread until stop().
class Server {
 public:
  Server(ServerOptions options, Metrics& metrics);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// Binds and listens on every address. Fails (kUnavailable) when a TCP address is already
  /// in use by anyone else, cannot be resolved or bound; when a unix socket file is live
  /// (a connect() to it succeeds), is not a socket, or cannot be bound. A stale socket file
  /// (connect() refused: its server is gone) is replaced. The socket files are removed when
  /// the server stops accepting, or is destroyed.
  Status listen();

  /// The bound port of the first TCP address (useful with port 0), valid after listen();
  /// 0 without a TCP address.
  std::uint16_t port() const;
  /// The addresses listened on, TCP ports as bound; valid after listen().
  std::vector<ListenAddress> boundAddresses() const;
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

  /// Something else served from the I/O threads that must drain too (the gRPC server):
  /// stop() calls `begin(release)` on the stopping thread, and the I/O threads keep running
  /// until `release()` is called (from any thread), or drain_timeout plus a few seconds.
  /// `begin` must not block. Set before run().
  void setStopParticipant(std::function<void(std::function<void()> release)> begin);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice::http
