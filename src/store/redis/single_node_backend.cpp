#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "store/redis/redis_connection.hpp"
#include "store/redis/redis_errors.hpp"
#include "store/redis/redis_store_internal.hpp"
#include "store/store_health.hpp"

namespace sluice::redis {
namespace {

namespace net = boost::asio;

/// The single-node backend: one pipelined connection.
class SingleNodeBackend final : public RedisBackend {
 public:
  SingleNodeBackend(net::io_context& io, const RedisOptions& options, Metrics* metrics,
                    std::string script)
      : io_(io) {
    ConnectionOptions copts;
    copts.redis = options;
    copts.stall_timeout = options.stall_timeout;
    copts.scripts.push_back(std::move(script));
    if (metrics != nullptr) {
      joinHealthGroup(options, *metrics, copts);
    }
    connection_ = RedisConnection::create(io, std::move(copts));
    // The connection is started on its own thread: the factory may run elsewhere.
    net::post(io, [weak = std::weak_ptr<RedisConnection>(connection_)] {
      if (auto c = weak.lock()) {
        c->start();
      }
    });
  }

  SingleNodeBackend(const SingleNodeBackend&) = delete;
  SingleNodeBackend& operator=(const SingleNodeBackend&) = delete;

 private:
  /// The store's connection: waits for its first handshake (connect_wait), pings, reports its
  /// health and faults to the `redis` group, counts reconnections.
  static void joinHealthGroup(const RedisOptions& options, Metrics& metrics,
                              ConnectionOptions& copts) {
    copts.connect_wait = options.connect_wait;
    copts.ping_interval = options.ping_interval;
    auto member = std::make_shared<store::StoreHealthGroup::Member>(
        store::StoreHealthGroup::of(metrics, "redis"));
    copts.on_health = [member](StoreHealth health, const std::string& reason) {
      member->report(health, reason);
    };
    copts.on_connect_error = [member](const Error& error) {
      member->group().fault(faultKind(error), error.message);
    };
    // A lost connection, a PING refused: faults even when no call was in flight (and
    // `local` does not call a failing store at all), counted and logged like the calls'.
    copts.on_fault = [member](const Error& error) {
      member->group().fault(faultKind(error), error.message);
    };
    copts.on_connected = [&reconnects = describeRedisMetrics(metrics).counter(
                              "redis_reconnects_total")](std::uint64_t count) {
      if (count > 1) {
        reconnects.inc();
      }
    };
  }

 public:
  void evalScript(std::vector<std::string> keys, std::vector<std::string> args,
                  std::chrono::milliseconds timeout, ReplyHandler done) override {
    connection_->evalScript(0, std::move(keys), std::move(args), timeout, std::move(done));
  }
  std::vector<std::string> keyNodes() const override { return {std::string()}; }
  void command(const std::string& /*node*/, std::vector<std::string> argv,
               std::chrono::milliseconds timeout, ReplyHandler done) override {
    connection_->command(std::move(argv), timeout, std::move(done));
  }
  bool clustered() const override { return false; }
  void post(std::function<void()> fn) override { net::post(io_, std::move(fn)); }
  StoreHealth health() const override { return connection_->health(); }
  bool ready() const override { return connection_->ready(); }
  std::uint64_t connectCount() const override { return connection_->connectCount(); }
  int masterOf(int /*slot*/) const override { return 0; }
  void evalScriptOnMasterOf(int /*slot*/, RespArgs args, std::chrono::milliseconds timeout,
                            ReplyHandler done) override {
    connection_->evalScript(0, RespArgs{}, std::move(args), timeout, std::move(done));
  }
  void evalScript(RespArgs keys, RespArgs args, std::chrono::milliseconds timeout,
                  ReplyHandler done) override {
    connection_->evalScript(0, std::move(keys), std::move(args), timeout, std::move(done));
  }
  void stop() override { connection_->stop(); }

 private:
  net::io_context& io_;
  std::shared_ptr<RedisConnection> connection_;
};

}  // namespace

std::shared_ptr<RedisBackend> makeSingleNodeBackend(net::io_context& io,
                                                    const RedisOptions& options, Metrics* metrics,
                                                    std::string script) {
  return std::make_shared<SingleNodeBackend>(io, options, metrics, std::move(script));
}

}  // namespace sluice::redis
