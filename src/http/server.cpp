#include "http/server.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <exception>
#include <thread>
#include <utility>
#include <vector>

#include "http/listener.hpp"
#include "http/worker.hpp"

namespace sluice::http {

namespace net = boost::asio;

struct Server::Impl {
  Impl(ServerOptions opts, Metrics& m) : options(std::move(opts)), metrics(m) {
    unsigned n = std::max(1u, options.threads);
    for (unsigned i = 0; i < n; ++i) {
      workers.push_back(std::make_unique<Worker>(options, i));
    }
  }

  ServerOptions options;
  Metrics& metrics;
  std::uint16_t bound_port = 0;
  std::atomic<bool> stop_requested{false};
  std::atomic<unsigned> running{0};
  net::io_context control{1};
  std::vector<std::unique_ptr<Worker>> workers;
};

Server::Server(ServerOptions options, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), metrics)) {}

Server::~Server() = default;

Status Server::listen() {
  const ServerOptions& o = impl_->options;
  const std::string where = o.host + ":" + std::to_string(o.port);
  auto endpoint = probeListenEndpoint(impl_->control, o.host, o.port);
  if (!endpoint) {
    return endpoint.error();
  }
  for (auto& worker : impl_->workers) {
    auto acceptor = openSharedAcceptor(worker->ioc, *endpoint, where);
    if (!acceptor) {
      return acceptor.error();
    }
    worker->listener.emplace(*worker, std::move(*acceptor));
  }
  impl_->bound_port = endpoint->port();
  return {};
}

std::uint16_t Server::port() const { return impl_->bound_port; }

unsigned Server::threadCount() const { return static_cast<unsigned>(impl_->workers.size()); }

net::io_context& Server::ioContext(unsigned thread) { return impl_->workers.at(thread)->ioc; }

net::io_context& Server::controlContext() { return impl_->control; }

void Server::setRouter(unsigned thread, std::shared_ptr<const Router> router) {
  Worker& worker = *impl_->workers.at(thread);
  worker.latency.clear();
  for (const auto& route : router->routes()) {
    worker.latency.push_back(
        &impl_->metrics.histogram("http_request_duration_seconds", {{"endpoint", route.pattern}}));
  }
  worker.latency.push_back(&impl_->metrics.histogram(
      "http_request_duration_seconds", {{"endpoint", std::string(kUnmatchedEndpoint)}}));
  worker.router = std::move(router);
}

void Server::run() {
  Impl& impl = *impl_;
  auto guard = net::make_work_guard(impl.control);
  std::vector<std::thread> threads;
  impl.running = static_cast<unsigned>(impl.workers.size());
  for (auto& worker : impl.workers) {
    if (!worker->listener || !worker->router) {
      spdlog::error("Server::run() needs listen() and setRouter() for every thread");
      return;
    }
  }
  for (auto& worker : impl.workers) {
    worker->listener->accept();
    threads.emplace_back([&impl, w = worker.get()] {
      for (;;) {
        try {
          w->ioc.run();
          break;
        } catch (const std::exception& e) {
          spdlog::error("I/O thread {}: unexpected exception: {}", w->index, e.what());
        }
      }
      if (--impl.running == 0) {
        net::post(impl.control, [&impl] { impl.control.stop(); });
      }
    });
  }
  impl.control.run();
  for (auto& thread : threads) {
    thread.join();
  }
}

void Server::stop() {
  if (impl_->stop_requested.exchange(true)) {
    return;
  }
  for (auto& worker : impl_->workers) {
    net::post(worker->ioc, [w = worker.get()] { w->beginStop(); });
  }
}

}  // namespace sluice::http
