#pragma once

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sluice/common/manual_executor.hpp"
#include "store/redis/redis_errors.hpp"
#include "store/redis/redis_store_internal.hpp"
#include "support/redis_server.hpp"

/// A RedisBackend for the eventual engine's unit tests: the engine's calls run on a real
/// redis-server (the real script, the real keys), over a link the test controls on the
/// ManualExecutor's time: a one-way delay (a call runs `delay` after it is sent and its reply
/// arrives `delay` later), a cut (calls fail, ready() is false) and a renewed connection (a
/// Redis that restarted). Only the link is simulated; Redis is not.
namespace sluice::test {

class RedisLink final : public redis::RedisBackend {
 public:
  RedisLink(ManualExecutor& executor, RedisServer& server, std::string script)
      : executor_(executor), server_(server), script_(std::move(script)) {}

  /// Cuts the link (true) or restores it.
  void cut(bool down) { cut_ = down; }
  /// The one-way delay of every later call.
  void setDelay(std::chrono::microseconds one_way) { delay_ = one_way; }
  /// A new connection (to a Redis that may have restarted empty).
  void reconnect() {
    context_.reset();
    ++connects_;
  }
  std::uint64_t callsSent() const { return calls_; }

  void evalScript(std::vector<std::string> keys, std::vector<std::string> args,
                  std::chrono::milliseconds /*timeout*/, redis::ReplyHandler done) override {
    ++calls_;
    if (!ready()) {
      executor_.post([done = std::move(done)] { done(lost()); });
      return;
    }
    auto reply = std::make_shared<Result<redis::Reply>>(lost());
    auto deliver = [this, reply, done = std::move(done)]() mutable {
      done(cut_ ? lost() : std::move(*reply));
    };
    auto run = [this, keys = std::move(keys), args = std::move(args), reply,
                deliver = std::move(deliver)]() mutable {
      if (!cut_) {
        *reply = eval(keys, args);
      }
      later(std::move(deliver));
    };
    later(std::move(run));
  }
  void evalScriptOnMasterOf(int /*slot*/, redis::RespArgs args, std::chrono::milliseconds timeout,
                            redis::ReplyHandler done) override {
    evalScript(redis::RespArgs{}, std::move(args), timeout, std::move(done));
  }
  void evalScript(redis::RespArgs keys, redis::RespArgs args, std::chrono::milliseconds timeout,
                  redis::ReplyHandler done) override {
    evalScript(split(keys), split(args), timeout, std::move(done));
  }
  std::vector<std::string> keyNodes() const override { return {"node"}; }
  void command(const std::string&, std::vector<std::string>, std::chrono::milliseconds,
               redis::ReplyHandler done) override {
    executor_.post([done = std::move(done)] { done(lost()); });
  }
  bool clustered() const override { return false; }
  void post(std::function<void()> fn) override { executor_.post(std::move(fn)); }
  StoreHealth health() const override {
    return ready() ? StoreHealth::kHealthy : StoreHealth::kFailing;
  }
  bool ready() const override { return !cut_ && !stopped_; }
  std::uint64_t connectCount() const override { return connects_; }
  int masterOf(int /*slot*/) const override { return 0; }
  void stop() override { stopped_ = true; }

 private:
  static std::vector<std::string> split(const redis::RespArgs& args) {
    std::vector<std::string> out;
    args.forEach([&](std::string_view arg) { out.emplace_back(arg); });
    return out;
  }

  static Error lost() {
    return redis::redisError(redis::FailureSource::kContext, REDIS_ERR_EOF, "link cut");
  }

  /// Runs `fn` after the one-way delay (at once, on the next runReady(), without one).
  void later(std::function<void()> fn) {
    if (delay_.count() == 0) {
      executor_.post(std::move(fn));
      return;
    }
    std::erase_if(timers_, [](const auto& t) { return *t.second; });
    auto fired = std::make_shared<bool>(false);
    TimerPtr timer = executor_.makeTimer();
    timer->schedule(delay_, [fired, fn = std::move(fn)] {
      *fired = true;
      fn();
    });
    timers_.emplace_back(std::move(timer), std::move(fired));
  }

  static redis::Reply convert(const redisReply* r) {
    redis::Reply out;
    switch (r->type) {
      case REDIS_REPLY_STRING:
        out.type = redis::Reply::Type::kString;
        out.str.assign(r->str, r->len);
        break;
      case REDIS_REPLY_STATUS:
        out.type = redis::Reply::Type::kStatus;
        out.str.assign(r->str, r->len);
        break;
      case REDIS_REPLY_ERROR:
        out.type = redis::Reply::Type::kError;
        out.str.assign(r->str, r->len);
        break;
      case REDIS_REPLY_INTEGER:
        out.type = redis::Reply::Type::kInteger;
        out.integer = r->integer;
        break;
      case REDIS_REPLY_ARRAY:
        out.type = redis::Reply::Type::kArray;
        for (std::size_t i = 0; i < r->elements; ++i) {
          out.elements.push_back(convert(r->element[i]));
        }
        break;
      default:
        break;
    }
    return out;
  }

  Result<redis::Reply> eval(const std::vector<std::string>& keys,
                            const std::vector<std::string>& args) {
    if (!context_) {
      context_ = server_.connect();
    }
    std::vector<std::string> argv = {"EVAL", script_, std::to_string(keys.size())};
    argv.insert(argv.end(), keys.begin(), keys.end());
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<const char*> parts;
    std::vector<std::size_t> lengths;
    for (const std::string& a : argv) {
      parts.push_back(a.data());
      lengths.push_back(a.size());
    }
    ReplyPtr reply(static_cast<redisReply*>(redisCommandArgv(
        context_.get(), static_cast<int>(argv.size()), parts.data(), lengths.data())));
    if (!reply) {
      context_.reset();
      return lost();
    }
    if (reply->type == REDIS_REPLY_ERROR) {
      return redis::redisError(redis::FailureSource::kReply, 0,
                               std::string(reply->str, reply->len));
    }
    return convert(reply.get());
  }

  ManualExecutor& executor_;
  RedisServer& server_;
  std::string script_;
  ContextPtr context_;
  std::chrono::microseconds delay_{0};
  std::vector<std::pair<TimerPtr, std::shared_ptr<bool>>> timers_;
  bool cut_ = false;
  bool stopped_ = false;
  std::uint64_t connects_ = 1;
  std::uint64_t calls_ = 0;
};

}  // namespace sluice::test
