#include "sluice/http/server.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "http/listener.hpp"
#include "http/worker.hpp"

namespace sluice::http {

namespace net = boost::asio;

ListenAddress ListenAddress::tcp(std::string host, std::uint16_t port) {
  ListenAddress address;
  address.host = std::move(host);
  address.port = port;
  return address;
}

ListenAddress ListenAddress::unixSocket(std::string path) {
  ListenAddress address;
  address.kind = Kind::kUnix;
  address.host.clear();
  address.port = 0;
  address.path = std::move(path);
  return address;
}

std::string ListenAddress::toString() const {
  if (kind == Kind::kUnix) {
    return "unix:" + path;
  }
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

struct Server::Impl {
  Impl(ServerOptions opts, Metrics& m) : options(std::move(opts)), metrics(m) {
    unsigned n = std::max(1u, options.threads);
    for (unsigned i = 0; i < n; ++i) {
      workers.push_back(std::make_unique<Worker>(options, i));
    }
  }

  ServerOptions options;
  Metrics& metrics;
  std::vector<ListenAddress> bound;  // as listen() bound them
  std::atomic<bool> stop_requested{false};
  std::atomic<unsigned> running{0};
  net::io_context control{1};
  std::vector<std::unique_ptr<Worker>> workers;
  std::function<void(std::function<void()>)> stop_participant;
};

Server::Server(ServerOptions options, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), metrics)) {}

Server::~Server() = default;

Status Server::listen() {
  Impl& impl = *impl_;
  std::vector<Worker*> all;
  for (auto& worker : impl.workers) {
    all.push_back(worker.get());
  }
  impl.bound.clear();
  for (const ListenAddress& address : impl.options.listen) {
    if (address.kind == ListenAddress::Kind::kUnix) {
      // SO_REUSEPORT does not work on unix sockets: one acceptor, on thread 0, for all.
      Worker& owner = *impl.workers.front();
      SocketFile file;
      auto acceptor =
          openUnixAcceptor(owner.ioc, address.path, impl.options.unix_socket_mode, file);
      if (!acceptor) {
        return acceptor.error();
      }
      owner.listeners.push_back(
          std::make_unique<Listener>(owner, std::move(*acceptor), all, std::move(file)));
      impl.bound.push_back(address);
      continue;
    }
    const std::string where = address.toString();
    auto endpoint = probeListenEndpoint(impl.control, address.host, address.port);
    if (!endpoint) {
      return endpoint.error();
    }
    for (auto& worker : impl.workers) {
      auto acceptor = openSharedAcceptor(worker->ioc, *endpoint, where);
      if (!acceptor) {
        return acceptor.error();
      }
      worker->listeners.push_back(std::make_unique<Listener>(
          *worker, std::move(*acceptor), std::vector<Worker*>{worker.get()}, std::nullopt));
    }
    impl.bound.push_back(ListenAddress::tcp(address.host, endpoint->port()));
  }
  return {};
}

std::uint16_t Server::port() const {
  for (const ListenAddress& address : impl_->bound) {
    if (address.kind == ListenAddress::Kind::kTcp) {
      return address.port;
    }
  }
  return 0;
}

std::vector<ListenAddress> Server::boundAddresses() const { return impl_->bound; }

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
  if (impl.bound.empty() || impl.bound.size() != impl.options.listen.size()) {
    spdlog::error("Server::run() needs listen() and setRouter() for every thread");
    return;
  }
  for (auto& worker : impl.workers) {
    if (!worker->router) {
      spdlog::error("Server::run() needs listen() and setRouter() for every thread");
      return;
    }
  }
  for (auto& worker : impl.workers) {
    for (auto& listener : worker->listeners) {
      listener->accept();
    }
    threads.emplace_back([&impl, w = worker.get()] {
      // A thread without listeners of its own (unix sockets only) waits for the connections
      // thread 0 hands it; it ends when beginStop() stops its io_context.
      // "sluice-io-N" in top -H, perf and gdb (and for tests/tools/alloc_counter.cpp).
      std::string name = "sluice-io-" + std::to_string(w->index);
      name.resize(std::min<std::size_t>(name.size(), 15));
      pthread_setname_np(pthread_self(), name.c_str());
      auto work = net::make_work_guard(w->ioc);
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

void Server::setStopParticipant(std::function<void(std::function<void()> release)> begin) {
  impl_->stop_participant = std::move(begin);
}

void Server::stop() {
  if (impl_->stop_requested.exchange(true)) {
    return;
  }
  const bool hold = static_cast<bool>(impl_->stop_participant);
  for (auto& worker : impl_->workers) {
    net::post(worker->ioc, [w = worker.get(), hold] { w->beginStop(hold); });
  }
  if (hold) {
    impl_->stop_participant([impl = impl_.get()] {
      for (auto& worker : impl->workers) {
        net::post(worker->ioc, [w = worker.get()] { w->release(); });
      }
    });
  }
}

}  // namespace sluice::http
