#include "http/admin_server.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <thread>
#include <utility>

namespace sluice::http {
namespace net = boost::asio;

struct AdminListener::Impl {
  explicit Impl(ServerOptions options, Metrics& metrics) : server(std::move(options), metrics) {}

  Server server;
  std::thread thread;
};

AdminListener::AdminListener(ServerOptions options, Metrics& metrics, HandlerContext operations,
                             const LimitReset& reset, const TopDenialsBoard* top) {
  options.threads = 1;
  impl_ = std::make_unique<Impl>(std::move(options), metrics);
  AdminContext context;
  context.operations = std::move(operations);
  context.top = top;
  context.reset = &reset;
  context.answer_on = [io = &impl_->server.ioContext(0)](std::function<void()> task) {
    net::post(*io, std::move(task));
  };
  auto router = std::make_shared<Router>();
  addAdminRoutes(*router, context);
  impl_->server.setRouter(0, std::move(router));
}

AdminListener::~AdminListener() { stop(); }

Status AdminListener::listen() { return impl_->server.listen(); }

std::uint16_t AdminListener::port() const { return impl_->server.port(); }

void AdminListener::start() {
  if (impl_->thread.joinable()) {
    return;
  }
  impl_->thread = std::thread([impl = impl_.get()] {
    try {
      impl->server.run();
    } catch (const std::exception& e) {
      spdlog::error("admin listener stopped: {}", e.what());
    }
  });
}

void AdminListener::stop() {
  impl_->server.stop();
  if (impl_->thread.joinable()) {
    impl_->thread.join();
  }
}

}  // namespace sluice::http
