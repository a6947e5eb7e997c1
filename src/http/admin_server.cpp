#include "http/admin_server.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

namespace sluice::http {
namespace {

namespace net = boost::asio;

/// One DELETE /limits fanned out to every decision thread's store.
struct ResetFanOut {
  std::mutex mutex;
  std::size_t pending = 0;
  std::size_t removed = 0;
  std::optional<Error> error;
  std::function<void(Result<std::size_t>)> done;
  net::io_context* reply_io = nullptr;

  void arrive(Result<std::size_t> result, const std::shared_ptr<ResetFanOut>& self) {
    std::lock_guard lock(mutex);
    if (result) {
      removed += *result;
    } else if (!error) {
      error = result.error();
    }
    if (--pending != 0) {
      return;
    }
    Result<std::size_t> total = error ? Result<std::size_t>(*error) : Result<std::size_t>(removed);
    // The answer belongs to the admin thread that received the request.
    net::post(*reply_io,
              [self, total = std::move(total)]() mutable { self->done(std::move(total)); });
  }
};

}  // namespace

struct AdminListener::Impl {
  Impl(ServerOptions options, Metrics& metrics, std::vector<AdminResetTarget> targets)
      : server(std::move(options), metrics), targets(std::move(targets)) {}

  void reset(std::vector<std::string> prefixes, std::function<void(Result<std::size_t>)> done) {
    if (targets.empty()) {
      done(std::size_t{0});
      return;
    }
    auto fan_out = std::make_shared<ResetFanOut>();
    fan_out->pending = targets.size();
    fan_out->done = std::move(done);
    fan_out->reply_io = &server.ioContext(0);
    auto shared_prefixes = std::make_shared<const std::vector<std::string>>(std::move(prefixes));
    for (const AdminResetTarget& target : targets) {
      net::post(*target.io, [store = target.store, shared_prefixes, fan_out] {
        store->reset(*shared_prefixes, [fan_out](Result<std::size_t> result) {
          fan_out->arrive(std::move(result), fan_out);
        });
      });
    }
  }

  Server server;
  std::vector<AdminResetTarget> targets;
  std::thread thread;
};

AdminListener::AdminListener(ServerOptions options, Metrics& metrics, HandlerContext operations,
                             std::vector<AdminResetTarget> targets, const TopDenialsBoard* top) {
  options.threads = 1;
  impl_ = std::make_unique<Impl>(std::move(options), metrics, std::move(targets));
  AdminContext context;
  context.operations = std::move(operations);
  context.top = top;
  context.reset = [impl = impl_.get()](std::vector<std::string> prefixes,
                                       std::function<void(Result<std::size_t>)> done) {
    impl->reset(std::move(prefixes), std::move(done));
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
