#include "http/listener.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <utility>

#include "http/session.hpp"
#include "http/worker.hpp"

namespace sluice::http {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using ReusePort = net::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

}  // namespace

Listener::Listener(Worker& worker, tcp::acceptor acceptor)
    : worker_(worker), acceptor_(std::move(acceptor)) {}

void Listener::accept() {
  acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
    onAccept(ec, std::move(socket));
  });
}

void Listener::close() {
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  if (retry_) {
    retry_->cancel();
  }
}

void Listener::onAccept(boost::system::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || worker_.stopping) {
    return;
  }
  if (ec) {
    // Typically EMFILE: back off instead of spinning on the error.
    if (!failing_) {
      spdlog::warn("accept on thread {} failing: {}; retrying every {} ms", worker_.index,
                   ec.message(), kAcceptRetryDelay.count());
      failing_ = true;
    }
    retry_.emplace(worker_.ioc);
    retry_->expires_after(kAcceptRetryDelay);
    retry_->async_wait([this](boost::system::error_code wec) {
      if (!wec && !worker_.stopping) {
        accept();
      }
    });
    return;
  }
  if (failing_) {
    spdlog::info("accept on thread {} works again", worker_.index);
    failing_ = false;
  }
  if (worker_.sessions.size() >= worker_.options.max_connections_per_thread) {
    boost::system::error_code ignored;
    socket.close(ignored);
  } else {
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
    std::make_shared<Session>(std::move(socket), worker_)->start();
  }
  accept();
}

Result<tcp::endpoint> probeListenEndpoint(net::io_context& control, const std::string& host,
                                          std::uint16_t port) {
  const std::string where = host + ":" + std::to_string(port);
  boost::system::error_code ec;
  tcp::endpoint endpoint;
  auto address = net::ip::make_address(host, ec);
  if (!ec) {
    endpoint = tcp::endpoint(address, port);
  } else {
    tcp::resolver resolver(control);
    auto results = resolver.resolve(host, std::to_string(port), ec);
    if (ec || results.empty()) {
      return makeError(ErrorKind::kUnavailable,
                       "cannot resolve listen address " + where + ": " + ec.message());
    }
    endpoint = results.begin()->endpoint();
  }

  // SO_REUSEPORT would silently share the port with another process of ours; a probe
  // bind without it fails if anyone already listens there.
  tcp::acceptor probe(control);
  probe.open(endpoint.protocol(), ec);
  if (!ec) {
    probe.set_option(net::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    probe.bind(endpoint, ec);
  }
  if (ec) {
    return makeError(ErrorKind::kUnavailable, "cannot listen on " + where + ": " + ec.message());
  }
  endpoint.port(probe.local_endpoint().port());
  return endpoint;
}

Result<tcp::acceptor> openSharedAcceptor(net::io_context& ioc, const tcp::endpoint& endpoint,
                                         const std::string& where) {
  boost::system::error_code ec;
  tcp::acceptor acceptor(ioc);
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) {
    acceptor.set_option(net::socket_base::reuse_address(true), ec);
  }
  if (!ec) {
    acceptor.set_option(ReusePort(true), ec);
  }
  if (!ec) {
    acceptor.bind(endpoint, ec);
  }
  if (!ec) {
    acceptor.listen(net::socket_base::max_listen_connections, ec);
  }
  if (ec) {
    return makeError(ErrorKind::kUnavailable, "cannot listen on " + where + ": " + ec.message());
  }
  return acceptor;
}

}  // namespace sluice::http
