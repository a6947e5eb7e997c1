#pragma once

#include <sys/types.h>

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sluice/common/result.hpp"

namespace sluice::http {

struct Worker;

/// A listening socket of either kind (TCP or unix), as the sessions' sockets are.
using GenericAcceptor = boost::asio::basic_socket_acceptor<boost::asio::generic::stream_protocol>;
using GenericSocket = boost::asio::generic::stream_protocol::socket;

/// A unix socket file this process bound, removed by whoever owns it when listening ends;
/// only while it is still the file bound (same device and inode), so that a file another
/// server has put there since is left alone.
struct SocketFile {
  std::string path;
  dev_t device = 0;
  ino_t inode = 0;

  /// Removes the file if it is still this one; then forgets it. Idempotent.
  void remove();
};

/// Accepts the connections of one listening socket and starts a session for each (the
/// listener of Beast's advanced_server example). It runs on its owner's I/O thread and hands
/// the connections to `targets` in turn, each session running on its target's thread: on a
/// TCP address every thread has its own listener (SO_REUSEPORT) and is its only target; a
/// unix socket has one listener, on thread 0, whose targets are all the threads. A failing
/// accept (typically EMFILE) is retried every 100 ms, logged once per streak.
class Listener {
 public:
  Listener(Worker& owner, GenericAcceptor acceptor, std::vector<Worker*> targets,
           std::optional<SocketFile> socket_file);
  ~Listener();
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  /// Starts accepting; runs until close() or the owner stops.
  void accept();
  /// Stops accepting (the pending accept completes as aborted) and removes the socket file.
  void close();

 private:
  void onAccept(boost::system::error_code ec, GenericSocket socket, Worker& target);
  static void startSession(Worker& worker, GenericSocket socket, bool tcp);

  Worker& owner_;
  GenericAcceptor acceptor_;
  std::vector<Worker*> targets_;
  std::size_t next_target_ = 0;
  std::optional<SocketFile> socket_file_;
  bool tcp_;
  std::optional<boost::asio::steady_timer> retry_;
  bool failing_ = false;  // logged once per streak of failures, not per retry
};

/// The endpoint to listen on: `host` as an address, else its first resolution, with the
/// port a probe bind got (so port 0 becomes a free port). The probe binds without
/// SO_REUSEPORT: it fails (kUnavailable) when anyone else already listens there.
Result<boost::asio::ip::tcp::endpoint> probeListenEndpoint(boost::asio::io_context& control,
                                                           const std::string& host,
                                                           std::uint16_t port);

/// A listening acceptor on `endpoint` for `ioc`, sharing the address with the other I/O
/// threads' (SO_REUSEPORT). `where` names the address in the error (kUnavailable).
Result<GenericAcceptor> openSharedAcceptor(boost::asio::io_context& ioc,
                                           const boost::asio::ip::tcp::endpoint& endpoint,
                                           const std::string& where);

/// A listening acceptor on the unix socket file `path` with permissions `mode`, set before
/// it listens. A live socket there (connect() succeeds or would block) is never taken; a
/// stale one (connect() refused) is replaced; anything that is not a socket is left alone.
/// Errors (kUnavailable) say which. `socket_file` receives what to remove on exit.
Result<GenericAcceptor> openUnixAcceptor(boost::asio::io_context& ioc, const std::string& path,
                                         unsigned mode, SocketFile& socket_file);

}  // namespace sluice::http
