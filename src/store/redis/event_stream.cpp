#include "sluice/store/event_stream.hpp"

#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>
#include <sys/time.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace sluice {
namespace {

struct ContextDeleter {
  void operator()(redisContext* context) const { redisFree(context); }
};
using ContextPtr = std::unique_ptr<redisContext, ContextDeleter>;

struct ReplyDeleter {
  void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

timeval toTimeval(std::chrono::milliseconds ms) {
  timeval tv{};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

std::string describeContextError(const redisContext* context) {
  if (context == nullptr) {
    return "cannot allocate a hiredis context";
  }
  return context->errstr[0] != '\0' ? std::string(context->errstr) : "unknown error";
}

using Clock = std::chrono::steady_clock;

/// The time left until `deadline` as the socket's send and receive timeout; false once it
/// has passed (a zero timeout would mean none at all).
bool armTimeout(redisContext* context, Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) {
    return false;
  }
  redisSetTimeout(context, toTimeval(left));
  return true;
}

/// Sends what is buffered on `context` and reads one reply into `out`, the whole of it by
/// `deadline`. The socket's timeout bounds one read only: a Redis that trickles a reply a
/// byte at a time would otherwise hold the writer, and shutdown, which joins it, for ever.
/// The error text when it fails (the connection is then unusable).
std::optional<std::string> awaitReply(redisContext* context, Clock::time_point deadline,
                                      std::chrono::milliseconds budget, ReplyPtr& out) {
  const auto late = [&] {
    return "no complete reply within " + std::to_string(budget.count()) + " ms";
  };
  const auto failed = [&] {
    const bool timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
    return timed_out ? late() : describeContextError(context);
  };
  int flushed = 0;
  while (flushed == 0) {
    if (!armTimeout(context, deadline)) {
      return late();
    }
    if (redisBufferWrite(context, &flushed) != REDIS_OK) {
      return failed();
    }
  }
  for (;;) {
    void* raw = nullptr;
    if (redisGetReplyFromReader(context, &raw) != REDIS_OK) {
      return describeContextError(context);
    }
    if (raw != nullptr) {
      out.reset(static_cast<redisReply*>(raw));
      return std::nullopt;
    }
    if (!armTimeout(context, deadline)) {
      return late();
    }
    if (redisBufferRead(context) != REDIS_OK) {
      return failed();
    }
  }
}

/// Runs one command within `timeout`; the error text when it fails or Redis answers an error.
std::optional<std::string> runCommand(redisContext* context, const std::vector<std::string>& argv,
                                      std::chrono::milliseconds timeout) {
  std::vector<const char*> args;
  std::vector<std::size_t> lengths;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lengths.push_back(a.size());
  }
  redisAppendCommandArgv(context, static_cast<int>(args.size()), args.data(), lengths.data());
  ReplyPtr reply;
  if (auto error = awaitReply(context, Clock::now() + timeout, timeout, reply)) {
    return error;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    return std::string(reply->str, reply->len);
  }
  return std::nullopt;
}

class RedisEventPublisher final : public EventPublisher {
 public:
  RedisEventPublisher(EventStreamOptions options, Metrics& metrics)
      : options_(std::move(options)),
        published_(describe(metrics).counter("events_published_total")),
        dropped_full_(metrics.counter("events_dropped_total", {{"reason", "queue_full"}})),
        dropped_unavailable_(
            metrics.counter("events_dropped_total", {{"reason", "redis_unavailable"}})),
        dropped_stopped_(metrics.counter("events_dropped_total", {{"reason", "stopped"}})),
        queue_length_(metrics.gauge("events_queue_length")),
        max_len_text_(std::to_string(std::max<std::size_t>(options_.max_len, 1))) {
    options_.batch_size = std::max<std::size_t>(options_.batch_size, 1);
    options_.queue_capacity = std::max<std::size_t>(options_.queue_capacity, 1);
  }

  ~RedisEventPublisher() override { stop(); }

  void publish(DenialEvent event) override {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        dropped_stopped_.inc();
        return;
      }
      if (queue_.size() >= options_.queue_capacity) {
        dropped_full_.inc();
        return;
      }
      queue_.push_back(std::move(event));
      queue_length_.set(static_cast<double>(queue_.size()));
    }
    wake_.notify_one();
  }

  void start() override {
    std::lock_guard lock(mutex_);
    if (thread_.joinable() || stopping_) {
      return;
    }
    thread_ = std::thread([this] { run(); });
  }

  void stop() override {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (thread_.joinable()) {
      thread_.join();
    }
  }

 private:
  static Metrics& describe(Metrics& metrics) {
    metrics.describe("events_published_total", Metrics::Type::kCounter,
                     "Denied-request events written to the Redis stream.");
    metrics.describe("events_dropped_total", Metrics::Type::kCounter,
                     "Denied-request events dropped, by reason (queue_full, "
                     "redis_unavailable, stopped).");
    metrics.describe("events_queue_length", Metrics::Type::kGauge,
                     "Denied-request events waiting to be written.");
    return metrics;
  }

  void run() {
    std::vector<DenialEvent> batch;
    batch.reserve(options_.batch_size);
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) {
          break;  // stopping with nothing left
        }
        const std::size_t n = std::min(queue_.size(), options_.batch_size);
        for (std::size_t i = 0; i < n; ++i) {
          batch.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
        queue_length_.set(static_cast<double>(queue_.size()));
      }
      write(batch);
      batch.clear();
    }
    context_.reset();
  }

  /// Writes one batch, or drops it (counted) when Redis cannot be reached.
  void write(const std::vector<DenialEvent>& batch) {
    if (!context_ && !connect()) {
      dropped_unavailable_.inc(batch.size());
      return;
    }
    for (const DenialEvent& event : batch) {
      appendXadd(event);
    }
    std::size_t confirmed = 0;
    std::optional<std::string> error;
    // One round trip for the batch, and one deadline for all of it.
    const auto deadline = Clock::now() + options_.command_timeout;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      ReplyPtr reply;
      if (auto failed = awaitReply(context_.get(), deadline, options_.command_timeout, reply)) {
        error = std::move(failed);
        break;
      }
      if (reply->type == REDIS_REPLY_ERROR) {
        // A command error (e.g. WRONGTYPE on the stream key) leaves the connection usable.
        error = std::string(reply->str, reply->len);
        continue;
      }
      ++confirmed;
    }
    published_.inc(confirmed);
    if (confirmed < batch.size()) {
      dropped_unavailable_.inc(batch.size() - confirmed);
    }
    if (error) {
      fail("XADD to " + options_.stream + " failed: " + *error);
    } else if (failing_) {
      failing_ = false;
      spdlog::warn("events: Redis stream {} reachable again; publishing resumes", options_.stream);
    }
  }

  void appendXadd(const DenialEvent& event) {
    const std::string time_ms = std::to_string(event.time_us / kMicrosPerMilli);
    const std::array<std::string_view, 16> argv = {
        "XADD",       options_.stream,  "MAXLEN", "~",          max_len_text_, "*",
        "time",       time_ms,          "domain", event.domain, "client",      event.client,
        "descriptor", event.descriptor, "rule",   event.rule};
    std::array<const char*, argv.size()> args{};
    std::array<std::size_t, argv.size()> lengths{};
    for (std::size_t i = 0; i < argv.size(); ++i) {
      args[i] = argv[i].data();
      lengths[i] = argv[i].size();
    }
    redisAppendCommandArgv(context_.get(), static_cast<int>(args.size()), args.data(),
                           lengths.data());
  }

  /// Opens, authenticates and selects the database; false (logged once per outage) when it
  /// cannot, or while the reconnect backoff has not passed.
  bool connect() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_attempt_) {
      return false;
    }
    const RedisOptions& r = options_.redis;
    const timeval timeout = toTimeval(options_.command_timeout);
    ContextPtr context(r.unix_path.empty()
                           ? redisConnectWithTimeout(r.host.c_str(), r.port, timeout)
                           : redisConnectUnixWithTimeout(r.unix_path.c_str(), timeout));
    if (!context || context->err != 0) {
      fail("cannot connect to Redis: " + describeContextError(context.get()));
      return false;
    }
    redisSetTimeout(context.get(), timeout);
    std::optional<std::string> error;
    if (!r.password.empty()) {
      error =
          r.user.empty()
              ? runCommand(context.get(), {"AUTH", r.password}, options_.command_timeout)
              : runCommand(context.get(), {"AUTH", r.user, r.password}, options_.command_timeout);
    }
    if (!error && r.db != 0) {
      error = runCommand(context.get(), {"SELECT", std::to_string(r.db)}, options_.command_timeout);
    }
    if (error) {
      fail("Redis refused the events connection: " + *error);
      return false;
    }
    context_ = std::move(context);
    return true;
  }

  /// Drops the connection and logs the first failure of an outage only.
  void fail(const std::string& reason) {
    context_.reset();
    next_attempt_ = std::chrono::steady_clock::now() + options_.reconnect_backoff;
    if (!failing_) {
      failing_ = true;
      spdlog::warn(
          "events: {}; denied-request events are dropped (events_dropped_total) "
          "until it answers",
          reason);
    }
  }

  EventStreamOptions options_;
  Counter& published_;
  Counter& dropped_full_;
  Counter& dropped_unavailable_;
  Counter& dropped_stopped_;
  Gauge& queue_length_;
  const std::string max_len_text_;

  std::mutex mutex_;  // guards queue_, stopping_, thread_ start
  std::condition_variable wake_;
  std::deque<DenialEvent> queue_;
  bool stopping_ = false;
  std::thread thread_;

  // Touched by the background thread only.
  ContextPtr context_;
  bool failing_ = false;
  std::chrono::steady_clock::time_point next_attempt_{};
};

}  // namespace

std::unique_ptr<EventPublisher> makeRedisEventPublisher(const EventStreamOptions& options,
                                                        Metrics& metrics) {
  return std::make_unique<RedisEventPublisher>(options, metrics);
}

}  // namespace sluice
