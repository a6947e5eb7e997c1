// What bench/http_load.cpp and bench/soak_load.cpp share: the target ("HOST:PORT" or
// "unix:PATH"), Sluice's POST /shouldAllowRequest, and one keep-alive HTTP/1.1 connection that
// sends a request and reads its whole answer (head, then Content-Length bytes of body; no
// pipelining, no chunked bodies: what Sluice answers). Header-only, one io_context thread.
#pragma once

#include <sys/socket.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/system/error_code.hpp>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sluice::bench {

namespace net = boost::asio;
using Socket = net::generic::stream_protocol::socket;
using Endpoint = net::generic::stream_protocol::endpoint;

/// "unix:/path" or "HOST:PORT" (resolved now: every address, in the resolver's order).
/// Throws boost::system::system_error when HOST:PORT cannot be resolved.
inline std::vector<Endpoint> resolveTarget(net::io_context& io, const std::string& target) {
  if (target.starts_with("unix:")) {
    return {Endpoint(net::local::stream_protocol::endpoint(target.substr(5)))};
  }
  const std::size_t colon = target.rfind(':');
  net::ip::tcp::resolver resolver(io);
  std::vector<Endpoint> endpoints;
  for (const auto& entry : resolver.resolve(target.substr(0, colon), target.substr(colon + 1))) {
    endpoints.emplace_back(entry.endpoint());
  }
  return endpoints;
}

/// Appends Sluice's decision request with `body` to `out`.
inline void appendDecisionRequest(std::string& out, std::string_view body) {
  out += "POST /shouldAllowRequest HTTP/1.1\r\nHost: localhost\r\n";
  out += "Content-Type: application/json\r\nContent-Length: ";
  out += std::to_string(body.size());
  out += "\r\n\r\n";
  out += body;
}

/// What the load tools look at in an answer.
struct Answer {
  int status = 0;         ///< 0 when the status line could not be read
  bool degraded = false;  ///< X-Sluice-Degraded: true (a failure mode answered)
};

/// The size of the first whole answer at the start of `received` (0: not complete yet), and
/// what it said.
inline std::size_t completeAnswer(std::string_view received, Answer& answer) {
  const std::size_t end = received.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    return 0;
  }
  const std::string_view head = received.substr(0, end);
  std::size_t length = 0;
  constexpr std::string_view kLength = "\r\nContent-Length: ";
  if (const std::size_t field = head.find(kLength); field != std::string_view::npos) {
    length = std::strtoul(head.data() + field + kLength.size(), nullptr, 10);
  }
  if (received.size() < end + 4 + length) {
    return 0;
  }
  answer.status = head.size() > 12 ? std::atoi(head.data() + 9) : 0;
  answer.degraded = head.find("\r\nX-Sluice-Degraded: true") != std::string_view::npos;
  return end + 4 + length;
}

/// One keep-alive HTTP/1.1 connection. Its handlers capture `this`: whoever owns it keeps
/// itself alive in the handlers it passes (shared_from_this()).
class KeepAliveConnection {
 public:
  explicit KeepAliveConnection(net::io_context& io) : io_(io), socket_(io) {}

  Socket& socket() { return socket_; }

  /// Connects at once (the first endpoint that accepts); throws boost::system::system_error.
  void connect(const std::vector<Endpoint>& endpoints) {
    reset();
    net::connect(socket_, endpoints);
    noDelay();
  }

  /// Connects on a new socket; done(error_code).
  template <class Done>
  void asyncConnect(const std::vector<Endpoint>& endpoints, Done done) {
    reset();
    net::async_connect(
        socket_, endpoints,
        [this, done = std::move(done)](boost::system::error_code ec, const Endpoint&) mutable {
          if (!ec) {
            noDelay();
          }
          done(ec);
        });
  }

  /// The request exchange() sends: fill it in before each call.
  std::string& request() { return request_; }

  /// Sends request() and reads one whole answer: done(error_code, Answer).
  template <class Done>
  void exchange(Done done) {
    net::async_write(
        socket_, net::buffer(request_),
        [this, done = std::move(done)](boost::system::error_code ec, std::size_t) mutable {
          if (ec) {
            return done(ec, Answer{});
          }
          read(std::move(done));
        });
  }

 private:
  template <class Done>
  void read(Done done) {
    Answer answer;
    if (const std::size_t size = completeAnswer(received_, answer); size > 0) {
      received_.erase(0, size);
      return done(boost::system::error_code{}, answer);
    }
    socket_.async_read_some(
        net::buffer(chunk_),
        [this, done = std::move(done)](boost::system::error_code ec, std::size_t n) mutable {
          if (ec) {
            return done(ec, Answer{});
          }
          received_.append(chunk_.data(), n);
          read(std::move(done));
        });
  }

  void reset() {
    socket_ = Socket(io_);
    received_.clear();
  }

  void noDelay() {
    boost::system::error_code ec;
    const Endpoint local = socket_.local_endpoint(ec);
    if (!ec && local.protocol().family() != AF_UNIX) {
      socket_.set_option(net::ip::tcp::no_delay(true), ec);
    }
  }

  net::io_context& io_;
  Socket socket_;
  std::string request_;
  std::string received_;
  std::array<char, 4096> chunk_{};
};

}  // namespace sluice::bench
