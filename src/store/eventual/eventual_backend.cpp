#include "store/eventual/eventual_backend.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <utility>

#include "store/redis/redis_connection.hpp"

namespace sluice::eventual {

namespace net = boost::asio;

namespace {

/// One Redis over one connection. Unlike the Redis store's backend it reports no health: a
/// lost connection makes the engine decide locally (eventual_redis_unreachable_total), it does
/// not make the sidecar unready.
class ConnectionBackend final : public redis::RedisBackend {
 public:
  ConnectionBackend(net::io_context& io, const RedisOptions& options, const std::string& script)
      : io_(io) {
    redis::ConnectionOptions copts;
    copts.redis = options;
    copts.stall_timeout = options.stall_timeout;
    copts.scripts.push_back(script);
    connection_ = redis::RedisConnection::create(io, std::move(copts));
    net::post(io, [weak = std::weak_ptr<redis::RedisConnection>(connection_)] {
      if (auto c = weak.lock()) {
        c->start();
      }
    });
  }
  ~ConnectionBackend() override { connection_->stop(); }
  ConnectionBackend(const ConnectionBackend&) = delete;
  ConnectionBackend& operator=(const ConnectionBackend&) = delete;

  void evalScript(std::vector<std::string> keys, std::vector<std::string> args,
                  std::chrono::milliseconds timeout, redis::ReplyHandler done) override {
    connection_->evalScript(0, std::move(keys), std::move(args), timeout, std::move(done));
  }
  std::vector<std::string> keyNodes() const override { return {std::string()}; }
  void command(const std::string& /*node*/, std::vector<std::string> argv,
               std::chrono::milliseconds timeout, redis::ReplyHandler done) override {
    connection_->command(std::move(argv), timeout, std::move(done));
  }
  bool clustered() const override { return false; }
  void post(std::function<void()> fn) override { net::post(io_, std::move(fn)); }
  StoreHealth health() const override { return connection_->health(); }
  bool ready() const override { return connection_->ready(); }
  std::uint64_t connectCount() const override { return connection_->connectCount(); }
  int masterOf(int /*slot*/) const override { return 0; }
  void evalScriptOnMasterOf(int /*slot*/, std::vector<std::string> args,
                            std::chrono::milliseconds timeout, redis::ReplyHandler done) override {
    connection_->evalScript(0, {}, std::move(args), timeout, std::move(done));
  }
  void stop() override { connection_->stop(); }

 private:
  net::io_context& io_;
  std::shared_ptr<redis::RedisConnection> connection_;
};

}  // namespace

std::shared_ptr<redis::RedisBackend> makeBackend(net::io_context& io, const RedisOptions& local,
                                                 const std::vector<RedisOptions>& cluster_seeds,
                                                 Metrics& metrics, const std::string& script) {
  if (!cluster_seeds.empty()) {
    return redis::makeClusterBackend(io, cluster_seeds, metrics, script);
  }
  return std::make_shared<ConnectionBackend>(io, local, script);
}

}  // namespace sluice::eventual
