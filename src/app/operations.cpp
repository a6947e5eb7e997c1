#include "app/operations.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <utility>

#include "app/options.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice::app {

namespace {

TopDenialsOptions topOptions(const OperationsOptions& o) {
  TopDenialsOptions top;
  top.window_us = o.top_window_ms * kMicrosPerMilli;
  top.capacity = o.top_capacity;
  return top;
}

}  // namespace

Operations::Operations(const AppOptions& options, Metrics& metrics, const Clock& clock)
    : metrics_(metrics),
      clock_(clock),
      admin_enabled_(options.operations.admin),
      top_(topOptions(options.operations), clock) {
  admin_options_.listen = {
      options.operations.admin_socket.empty()
          ? http::ListenAddress::tcp(options.operations.admin_host, options.operations.admin_port)
          : http::ListenAddress::unixSocket(options.operations.admin_socket)};
  admin_options_.unix_socket_mode = options.operations.admin_socket_mode;
  admin_token_file_ = options.operations.admin_token_file;
  max_overrides_ = options.operations.max_overrides;
  admin_options_.threads = 1;
  admin_options_.max_body_bytes = options.max_body_bytes;
  admin_options_.request_timeout = options.request_timeout;
  admin_options_.idle_timeout = options.idle_timeout;
  // Admin requests are short; shutdown should not wait for a long drain on this port.
  admin_options_.drain_timeout = std::min(options.drain_timeout, std::chrono::milliseconds(2000));
}

Operations::~Operations() { stop(); }

Result<std::unique_ptr<Operations>> Operations::create(const AppOptions& options, Metrics& metrics,
                                                       const Clock& clock) {
  std::unique_ptr<Operations> ops(new Operations(options, metrics, clock));
  const OperationsOptions& o = options.operations;
  if (!o.access_log.empty()) {
    auto log = AccessLog::open(o.access_log, o.access_log_format.value_or(o.log_format));
    if (!log) {
      return log.error();
    }
    ops->access_log_ = std::move(*log);
  }
  if (o.events) {
    const std::string& url = o.events_redis.empty() ? options.redis_url : o.events_redis;
    auto redis = parseRedisUrl(url);
    if (!redis) {
      return makeError(ErrorKind::kInvalidArgument,
                       "--events-redis " + url + ": " + redis.error().message);
    }
    EventStreamOptions events;
    events.redis = std::move(*redis);
    events.stream = o.events_stream;
    events.max_len = o.events_maxlen;
    ops->events_ = makeRedisEventPublisher(events, metrics);
    ops->observers_.push_back(makeDenialEvents(*ops->events_, clock));
  }
  if (ops->access_log_) {
    ops->observers_.push_back(makeAccessLogObserver(*ops->access_log_, clock));
  }
  return ops;
}

std::vector<DecisionObserver*> Operations::observers() {
  std::vector<DecisionObserver*> out;
  for (const auto& observer : observers_) {
    out.push_back(observer.get());
  }
  // Only the admin listener reads the counts: without it, nothing is counted.
  if (admin_enabled_) {
    top_observers_.push_back(makeTopDenialsRecorder(top_.addThread()));
    out.push_back(top_observers_.back().get());
  }
  return out;
}

void Operations::addResetTarget(boost::asio::io_context& io, Store& store,
                                const http::HandlerContext& context) {
  targets_.push_back(ResetTarget{
      [io = &io](std::function<void()> task) { boost::asio::post(*io, std::move(task)); }, &store});
  admin_context_ = context;
  admin_context_.decisions = nullptr;  // the admin port decides nothing
}

Status Operations::start() {
  if (events_) {
    events_->start();
  }
  if (!admin_enabled_) {
    return {};
  }
  ResetDone deleted;
  if (leases_ != nullptr) {
    deleted = [leases = leases_, clock = &clock_](const std::vector<std::string>& prefixes) {
      leases->reset(prefixes, clock->nowMicros());
    };
  }
  reset_ = makeLimitReset(admin_context_.rules, targets_, std::move(deleted));
  http::AdminExtras extras;
  extras.top = &top_;
  if (!targets_.empty()) {
    // One decision thread's store serves the overrides: they live in the store (Redis, or
    // the memory store shared by every thread), so any thread's sees every change.
    overrides_ =
        makeLimitOverrides(admin_context_.rules, targets_, clock_, metrics_, max_overrides_);
    extras.overrides = overrides_.get();
  }
  extras.token_file = admin_token_file_;
  admin_ = std::make_unique<http::AdminListener>(admin_options_, metrics_, admin_context_, *reset_,
                                                 std::move(extras));
  if (auto status = admin_->listen(); !status) {
    return makeError(status.error().kind, "--admin-listen: " + status.error().message);
  }
  admin_->start();
  http::ListenAddress address = admin_options_.listen.front();
  if (address.kind == http::ListenAddress::Kind::kTcp) {
    address.port = admin_->port();
  }
  spdlog::info(
      "admin listener on {}{} (DELETE /limits, /limits/overrides, GET /limits/top, /metrics, "
      "/rules, /healthz, /readyz)",
      address.toString(), admin_token_file_.empty() ? "" : ", bearer token required");
  return {};
}

void Operations::stop() {
  if (admin_) {
    admin_->stop();
  }
  if (events_) {
    events_->stop();
  }
}

}  // namespace sluice::app
