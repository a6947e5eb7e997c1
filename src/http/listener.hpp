#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "sluice/common/result.hpp"

namespace sluice::http {

struct Worker;

/// Accepts the connections of one I/O thread and starts a session for each (the listener
/// of Beast's advanced_server example). Every thread has its own acceptor on the same
/// address (SO_REUSEPORT), so the kernel spreads the connections and no lock is shared.
/// A failing accept (typically EMFILE) is retried every 100 ms, logged once per streak.
class Listener {
 public:
  Listener(Worker& worker, boost::asio::ip::tcp::acceptor acceptor);

  /// Starts accepting; runs until close() or the worker stops.
  void accept();
  /// Stops accepting (the pending accept completes as aborted).
  void close();

 private:
  void onAccept(boost::system::error_code ec, boost::asio::ip::tcp::socket socket);

  Worker& worker_;
  boost::asio::ip::tcp::acceptor acceptor_;
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
Result<boost::asio::ip::tcp::acceptor> openSharedAcceptor(
    boost::asio::io_context& ioc, const boost::asio::ip::tcp::endpoint& endpoint,
    const std::string& where);

}  // namespace sluice::http
