#include "sluice/http/admin_server.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <thread>
#include <utility>

#include "http/admin_routes.hpp"
#include "http/admin_token.hpp"

namespace sluice::http {
namespace net = boost::asio;

struct AdminListener::Impl {
  explicit Impl(ServerOptions options, Metrics& metrics) : server(std::move(options), metrics) {}

  Server server;
  std::thread thread;
  std::shared_ptr<AdminToken> token;
};

AdminListener::AdminListener(ServerOptions options, Metrics& metrics, HandlerContext operations,
                             const LimitReset& reset, AdminExtras extras) {
  options.threads = 1;
  impl_ = std::make_unique<Impl>(std::move(options), metrics);
  if (!extras.token_file.empty()) {
    impl_->token = std::make_shared<AdminToken>(extras.token_file);
  }
  AdminContext context;
  context.operations = std::move(operations);
  context.top = extras.top;
  context.overrides = extras.overrides;
  context.token = impl_->token;
  context.reset = &reset;
  context.answer_on = [io = &impl_->server.ioContext(0)](std::function<void()> task) {
    net::post(*io, std::move(task));
  };
  auto router = std::make_shared<Router>();
  addAdminRoutes(*router, context);
  impl_->server.setRouter(0, std::move(router));
}

AdminListener::~AdminListener() { stop(); }

Status AdminListener::listen() {
  if (impl_->token) {
    if (auto loaded = impl_->token->load(); !loaded) {
      return loaded;
    }
  }
  return impl_->server.listen();
}

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
