#include "store/redis/redis_connection.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <csignal>
#include <cstdint>
#include <mutex>
#include <new>

#include "sluice/common/words.hpp"
#include "store/redis/hiredis_replies.hpp"
#include "store/redis/redis_errors.hpp"

namespace sluice::redis {

namespace net = boost::asio;

void AsyncContextDeleter::operator()(redisAsyncContext* context) const {
  // Runs every pending callback with a null reply, then the ev.cleanup hook; when called
  // from inside a hiredis callback the free is deferred until that callback returns.
  redisAsyncFree(context);
}

/// The hiredis event hooks mapped onto an Asio stream_descriptor. hiredis owns the file
/// descriptor: the descriptor is release()d (never closed) when hiredis cleans up.
/// Pending waits keep this object alive through shared_from_this; once closed they do
/// nothing.
class AsioSocket : public std::enable_shared_from_this<AsioSocket> {
 public:
  AsioSocket(net::io_context& io, redisAsyncContext* context, RedisConnection* owner)
      : descriptor_(io), context_(context), owner_(owner) {}

  ~AsioSocket() { close(); }

  /// Registers the hooks; false when Asio cannot watch the descriptor.
  bool attach(std::string& error) {
    boost::system::error_code ec;
    descriptor_.assign(context_->c.fd, ec);
    if (ec) {
      error = ec.message();
      return false;
    }
    context_->ev.data = this;
    context_->ev.addRead = [](void* p) { static_cast<AsioSocket*>(p)->want(kRead, true); };
    context_->ev.delRead = [](void* p) { static_cast<AsioSocket*>(p)->want(kRead, false); };
    context_->ev.addWrite = [](void* p) { static_cast<AsioSocket*>(p)->want(kWrite, true); };
    context_->ev.delWrite = [](void* p) { static_cast<AsioSocket*>(p)->want(kWrite, false); };
    context_->ev.cleanup = [](void* p) {
      auto* self = static_cast<AsioSocket*>(p);
      self->close();
      self->owner_->onContextGone(self);
    };
    return true;
  }

  /// Stops watching; the fd stays open for hiredis to close.
  void close() {
    if (closed_) {
      return;
    }
    closed_ = true;
    context_ = nullptr;
    if (descriptor_.is_open()) {
      // release() cancels the outstanding waits (their handlers see operation_aborted)
      // and hands the fd back without closing it.
      descriptor_.release();
    }
  }

 private:
  enum Direction { kRead = 0, kWrite = 1 };

  void want(Direction d, bool on) {
    wanted_[d] = on;
    if (on) {
      arm(d);
    }
  }

  void arm(Direction d) {
    if (closed_ || !wanted_[d] || armed_[d]) {
      return;
    }
    armed_[d] = true;
    auto kind = d == kRead ? net::posix::stream_descriptor::wait_read
                           : net::posix::stream_descriptor::wait_write;
    descriptor_.async_wait(kind, [self = shared_from_this(), d](boost::system::error_code ec) {
      self->onReady(d, ec);
    });
  }

  void onReady(Direction d, boost::system::error_code ec) {
    armed_[d] = false;
    if (closed_ || ec == net::error::operation_aborted || !wanted_[d]) {
      return;
    }
    // Any other wait error is left to hiredis: its read/write will see the socket error.
    auto keep_alive = shared_from_this();
    if (d == kRead) {
      redisAsyncHandleRead(context_);
    } else {
      redisAsyncHandleWrite(context_);
    }
    arm(d);
  }

  net::posix::stream_descriptor descriptor_;
  redisAsyncContext* context_;
  RedisConnection* owner_;
  bool closed_ = false;
  bool wanted_[2] = {false, false};
  bool armed_[2] = {false, false};
};

namespace {

void replyThunk(redisAsyncContext* context, void* reply, void* privdata) {
  auto* self = static_cast<RedisConnection*>(context->data);
  self->onReply(reinterpret_cast<std::uintptr_t>(privdata),
                reply == nullptr ? nullptr : replyOf(reply), context);
}

// Commands whose reply nobody waits for (the SCRIPT LOAD before a NOSCRIPT retry).
constexpr std::uint64_t kIgnoredReply = 0;

std::string describe(const RedisOptions& o) {
  if (!o.unix_path.empty()) {
    return "unix:" + o.unix_path;
  }
  return o.host + ":" + std::to_string(o.port);
}

/// `argv` as one RESP command.
std::string encodeCommand(const std::vector<std::string>& argv) {
  std::size_t bytes = 16;
  for (const std::string& a : argv) {
    bytes += a.size() + 16;
  }
  std::string wire;
  wire.reserve(bytes);
  appendArrayHeader(wire, argv.size());
  for (const std::string& a : argv) {
    appendBulkString(wire, a);
  }
  return wire;
}

}  // namespace

std::shared_ptr<RedisConnection> RedisConnection::create(net::io_context& io,
                                                         ConnectionOptions options) {
  // hiredis writes with write(2): a peer that closed would raise SIGPIPE and kill the
  // process instead of returning EPIPE. Ignoring it process-wide is what hiredis asks of
  // its users; Sluice's own sockets (Beast) do not rely on SIGPIPE either.
  static std::once_flag sigpipe_once;
  std::call_once(sigpipe_once, [] { std::signal(SIGPIPE, SIG_IGN); });
  return std::shared_ptr<RedisConnection>(new RedisConnection(io, std::move(options)));
}

RedisConnection::RedisConnection(net::io_context& io, ConnectionOptions options)
    : io_(io),
      options_(std::move(options)),
      endpoint_(describe(options_.redis)),
      resolver_(io),
      timer_(io),
      reconnect_(io),
      start_wait_(io),
      ping_timer_(io),
      backoff_(options_.initial_backoff) {
  shas_.resize(options_.scripts.size());
}

RedisConnection::~RedisConnection() {
  // Handlers are dropped, not called: their owners may already be gone.
  destroying_ = true;
  state_ = State::kStopped;
  pending_.clear();
  deadlines_.clear();
  waiting_.clear();
  context_.reset();
  socket_.reset();
}

void RedisConnection::start() {
  if (state_ != State::kIdle) {
    return;
  }
  if (options_.connect_wait.count() > 0) {
    start_wait_.expires_after(options_.connect_wait);
    start_wait_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) {
        self->onStartWaitOver();
      }
    });
  } else {
    start_wait_over_ = true;
  }
  connect();
}

void RedisConnection::onStartWaitOver() {
  if (start_wait_over_) {
    return;
  }
  start_wait_over_ = true;
  if (state_ == State::kStopped) {
    return;
  }
  if (connects_.load(std::memory_order_relaxed) == 0) {
    setHealth(StoreHealth::kFailing,
              "not connected " + std::to_string(options_.connect_wait.count()) + " ms after start" +
                  (last_failure_.empty() ? "" : ": " + last_failure_));
  }
  releaseWaiting();
}

bool RedisConnection::waitingForFirstConnection() const {
  return !start_wait_over_ && state_ != State::kStopped &&
         connects_.load(std::memory_order_relaxed) == 0;
}

void RedisConnection::releaseWaiting() {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& resend : waiting) {
    resend();
  }
}

void RedisConnection::setHealth(StoreHealth health, const std::string& reason) {
  if (health_.load(std::memory_order_relaxed) == health) {
    return;
  }
  health_.store(health, std::memory_order_release);
  if (options_.on_health) {
    options_.on_health(health, reason);
  }
}

void RedisConnection::schedulePing() {
  if (options_.ping_interval.count() <= 0) {
    return;
  }
  ping_timer_.expires_after(options_.ping_interval);
  ping_timer_.async_wait(
      [weak = weak_from_this(), attempt = attempt_](boost::system::error_code ec) {
        if (auto self = weak.lock(); self && !ec) {
          self->ping(attempt);
        }
      });
}

void RedisConnection::ping(std::uint64_t attempt) {
  if (attempt != attempt_ || state_ != State::kReady) {
    return;
  }
  enqueue(Wire(encodeCommand({"PING"})), Clock::now() + options_.stall_timeout, std::nullopt,
          [weak = weak_from_this(), attempt](Result<Reply> reply) {
            auto self = weak.lock();
            if (!self || attempt != self->attempt_ || self->state_ != State::kReady) {
              return;
            }
            if (reply && !(reply->type == Reply::Type::kStatus && reply->str == "PONG")) {
              // Another command's reply: the reply stream is out of step with the commands
              // (a broken proxy, a bug). Nothing on this connection can be trusted.
              self->fail("PING answered with something other than PONG");
              return;
            }
            if (reply) {
              self->setHealth(StoreHealth::kHealthy, "PING answered");
            } else if (reply.error().kind == ErrorKind::kTimeout) {
              self->fail("no answer to PING for " +
                         std::to_string(self->options_.stall_timeout.count()) + " ms");
              return;
            } else if (replyErrorText(reply.error())) {
              // The server is up but refuses work (LOADING, BUSY, ...): keep the
              // connection, ping again.
              self->setHealth(StoreHealth::kFailing, "PING: " + reply.error().message);
              if (self->options_.on_fault) {
                self->options_.on_fault(reply.error());
              }
            } else {
              return;  // the connection is gone: fail() already ran
            }
            self->schedulePing();
          });
}

void RedisConnection::stop() {
  if (state_ == State::kStopped) {
    return;
  }
  state_ = State::kStopped;
  ready_.store(false, std::memory_order_release);
  resolver_.cancel();
  reconnect_.cancel();
  timer_.cancel();
  start_wait_.cancel();
  ping_timer_.cancel();
  auto waiting = std::move(waiting_);
  waiting_.clear();
  for (auto& resend : waiting) {
    resend();  // fails at once: stopped
  }
  auto pending = std::move(pending_);
  pending_.clear();
  deadlines_.clear();
  context_.reset();
  socket_.reset();
  for (auto& [id, p] : pending) {
    p.done(makeError(ErrorKind::kUnavailable, "redis store is shutting down"));
  }
}

void RedisConnection::connect() {
  state_ = State::kConnecting;
  const std::uint64_t attempt = ++attempt_;
  // The connect watchdog: resolution, TCP connect and the handshake must all finish
  // within connect_timeout.
  reconnect_.expires_after(options_.redis.connect_timeout);
  reconnect_.async_wait([weak = weak_from_this(), attempt](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->attempt_ != attempt || self->state_ != State::kConnecting) {
      return;
    }
    self->fail("connect timed out after " +
               std::to_string(self->options_.redis.connect_timeout.count()) + " ms");
  });

  if (!options_.redis.unix_path.empty()) {
    AsyncContextPtr context(redisAsyncConnectUnix(options_.redis.unix_path.c_str()));
    attach(std::move(context));
    return;
  }
  boost::system::error_code ec;
  net::ip::make_address(options_.redis.host, ec);
  if (!ec) {
    onResolved(attempt, options_.redis.host);
    return;
  }
  // Host names are resolved by Asio (off the I/O thread), never by hiredis' blocking
  // getaddrinfo.
  resolver_.async_resolve(
      options_.redis.host, std::to_string(options_.redis.port),
      [weak = weak_from_this(), attempt](boost::system::error_code rec,
                                         net::ip::tcp::resolver::results_type results) {
        auto self = weak.lock();
        if (!self || self->attempt_ != attempt || self->state_ != State::kConnecting) {
          return;
        }
        if (rec || results.empty()) {
          self->fail("cannot resolve " + self->options_.redis.host + ": " + rec.message());
          return;
        }
        self->onResolved(attempt, results.begin()->endpoint().address().to_string());
      });
}

void RedisConnection::onResolved(std::uint64_t attempt, const std::string& ip) {
  if (attempt != attempt_ || state_ != State::kConnecting) {
    return;
  }
  AsyncContextPtr context(redisAsyncConnect(ip.c_str(), options_.redis.port));
  attach(std::move(context));
}

void RedisConnection::attach(AsyncContextPtr context) {
  if (!context) {
    fail("cannot allocate a hiredis context");
    return;
  }
  if (context->err != 0) {
    std::string reason = redisError(FailureSource::kContext, context->err, context->errstr).message;
    context.reset();  // no hooks attached yet: a plain free
    fail(reason);
    return;
  }
  context->data = this;
  // const_cast: hiredis' reader never writes through fn (it is a pointer to non-const only
  // because C has no better type for a table of callbacks).
  context->c.reader->fn = const_cast<redisReplyObjectFunctions*>(&kReplyFunctions);
  auto socket = std::make_shared<AsioSocket>(io_, context.get(), this);
  std::string error;
  if (!socket->attach(error)) {
    context.reset();
    fail("cannot watch the redis socket: " + error);
    return;
  }
  socket_ = std::move(socket);
  context_ = std::move(context);
  sendHandshake();
}

void RedisConnection::sendHandshake() {
  std::vector<std::vector<std::string>> steps;
  if (!options_.redis.password.empty()) {
    if (options_.redis.user.empty()) {
      steps.push_back({"AUTH", options_.redis.password});
    } else {
      steps.push_back({"AUTH", options_.redis.user, options_.redis.password});
    }
  }
  if (options_.redis.db != 0) {
    steps.push_back({"SELECT", std::to_string(options_.redis.db)});
  }
  for (const auto& source : options_.scripts) {
    steps.push_back({"SCRIPT", "LOAD", source});
  }
  steps.push_back({"PING"});
  const std::uint64_t attempt = attempt_;
  const std::size_t count = steps.size();
  auto deadline = Clock::now() + options_.redis.connect_timeout;
  for (std::size_t i = 0; i < count; ++i) {
    enqueue(Wire(encodeCommand(steps[i])), deadline, std::nullopt,
            [weak = weak_from_this(), attempt, i, count](Result<Reply> reply) {
              if (auto self = weak.lock()) {
                self->onHandshakeStep(attempt, i == count - 1 ? SIZE_MAX : i, std::move(reply));
              }
            });
  }
}

void RedisConnection::onHandshakeStep(std::uint64_t attempt, std::size_t step,
                                      Result<Reply> reply) {
  if (attempt != attempt_ || state_ != State::kConnecting) {
    return;
  }
  if (!reply) {
    if (options_.on_connect_error) {
      options_.on_connect_error(reply.error());
    }
    fail("handshake failed: " + reply.error().message);
    return;
  }
  // Steps: [AUTH] [SELECT] SCRIPT LOAD x N, PING (step == SIZE_MAX).
  std::size_t first_script =
      (options_.redis.password.empty() ? 0 : 1) + (options_.redis.db != 0 ? 1 : 0);
  if (step != SIZE_MAX && step >= first_script) {
    if (reply->type != Reply::Type::kString) {
      fail("SCRIPT LOAD returned no SHA");
      return;
    }
    shas_[step - first_script] = reply->str;
    return;
  }
  if (step != SIZE_MAX) {
    return;
  }
  reconnect_.cancel();
  state_ = State::kReady;
  backoff_ = options_.initial_backoff;
  const std::uint64_t count = connects_.fetch_add(1, std::memory_order_relaxed) + 1;
  ready_.store(true, std::memory_order_release);
  last_failure_.clear();
  if (down_logged_) {
    spdlog::debug("redis {}: connection re-established", endpoint_);
    down_logged_ = false;
  } else {
    spdlog::debug("redis {}: connected", endpoint_);
  }
  setHealth(StoreHealth::kHealthy,
            count == 1 ? "connected to " + endpoint_ : "reconnected to " + endpoint_);
  if (options_.on_connected) {
    options_.on_connected(count);
  }
  schedulePing();
  if (count == 1) {
    releaseWaiting();
  }
}

void RedisConnection::fail(const std::string& reason) {
  if (state_ == State::kStopped) {
    return;
  }
  // The store's health group logs the outage once per process; per connection and per
  // attempt it is a debug line.
  const bool lost = state_ == State::kReady;
  spdlog::debug("redis {}: {}; reconnecting with backoff up to {} ms", endpoint_, reason,
                options_.redis.max_reconnect_backoff.count());
  down_logged_ = true;
  last_failure_ = reason;
  ping_timer_.cancel();
  state_ = State::kBackoff;
  ready_.store(false, std::memory_order_release);
  in_flight_.clear();
  // Frees the context: in-flight commands complete with kConnection via null replies.
  context_.reset();
  socket_.reset();
  scheduleReconnect();
  if (!waitingForFirstConnection()) {
    setHealth(StoreHealth::kFailing, endpoint_ + ": " + reason);
  }
  if (lost && options_.on_fault) {
    options_.on_fault(
        makeError(ErrorKind::kConnection, "redis connection to " + endpoint_ + " lost: " + reason));
  }
  if (options_.on_disconnected) {
    options_.on_disconnected(reason);
  }
}

void RedisConnection::scheduleReconnect() {
  state_ = State::kBackoff;
  const std::uint64_t attempt = attempt_;
  reconnect_.expires_after(backoff_);
  reconnect_.async_wait([weak = weak_from_this(), attempt](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec || self->attempt_ != attempt || self->state_ != State::kBackoff) {
      return;
    }
    self->connect();
  });
  backoff_ = std::min(backoff_ * 2, options_.redis.max_reconnect_backoff);
}

void RedisConnection::onContextGone(AsioSocket* socket) {
  if (socket != socket_.get()) {
    return;
  }
  std::string reason = "connection closed";
  if (context_) {
    // hiredis freed the context on its own (EOF, I/O error, failed connect).
    redisAsyncContext* raw = context_.release();
    if (raw->err != 0) {
      reason = redisError(FailureSource::kContext, raw->err, raw->errstr).message;
    }
  }
  in_flight_.clear();
  if (destroying_ || state_ == State::kStopped || state_ == State::kBackoff) {
    return;
  }
  // Our own fail() already cleared context_ and socket_; this path is hiredis' initiative.
  // socket_ is still referenced by the caller (the cleanup hook): keep it alive until the
  // hook returns by moving it to a local that dies after fail() drops the context.
  auto keep = std::move(socket_);
  fail(reason);
}

std::uint64_t RedisConnection::enqueue(Wire wire, Clock::time_point deadline,
                                       std::optional<std::size_t> script, ReplyHandler done) {
  const std::uint64_t id = next_id_++;
  auto it = deadlines_.emplace(deadline, id);
  Pending& p = pending_[id];
  p.done = std::move(done);
  p.deadline = deadline;
  p.deadline_it = it;
  p.script = script;
  p.wire = std::move(wire.bytes);
  if (!write(id, p.wire)) {
    complete(id, redisError(FailureSource::kDisconnected, 0,
                            context_ && context_->errstr ? context_->errstr : "cannot send"));
    return id;
  }
  armTimer();
  return id;
}

bool RedisConnection::write(std::uint64_t id, std::string_view wire) {
  if (!context_) {
    return false;
  }
  // The command is RESP already (encoded here rather than by hiredis' printf-style formatter,
  // which costs several thousand instructions per call).
  int rc = redisAsyncFormattedCommand(context_.get(), replyThunk, reinterpret_cast<void*>(id),
                                      wire.data(), wire.size());
  if (rc != REDIS_OK) {
    return false;
  }
  in_flight_.push_back(Clock::now());
  return true;
}

std::string RedisConnection::evalHeader(std::size_t script, std::size_t keys, std::size_t argc,
                                        std::size_t reserve) const {
  std::string wire;
  wire.reserve(64 + shas_[script].size() + reserve);
  appendArrayHeader(wire, 3 + argc);
  appendBulkString(wire, "EVALSHA");
  appendBulkString(wire, shas_[script]);
  appendBulkString(wire, words::Decimal(static_cast<std::int64_t>(keys)).view());
  return wire;
}

void RedisConnection::evalScript(std::size_t script, std::vector<std::string> keys,
                                 std::vector<std::string> args, std::chrono::milliseconds timeout,
                                 ReplyHandler done) {
  evalScript(script, RespArgs::of(keys), RespArgs::of(args), timeout, std::move(done));
}

void RedisConnection::evalScript(std::size_t script, RespArgs keys, RespArgs args,
                                 std::chrono::milliseconds timeout, ReplyHandler done) {
  if (state_ != State::kReady && waitingForFirstConnection()) {
    waiting_.push_back([weak = weak_from_this(), script, keys = std::move(keys),
                        args = std::move(args), timeout, done = std::move(done)]() mutable {
      if (auto self = weak.lock()) {
        self->evalScript(script, std::move(keys), std::move(args), timeout, std::move(done));
      }
    });
    return;
  }
  if (state_ != State::kReady || script >= shas_.size()) {
    done(redisError(FailureSource::kNotReady, 0, endpoint_));
    return;
  }
  std::string wire = evalHeader(script, keys.size(), keys.size() + args.size(),
                                keys.wire().size() + args.wire().size());
  wire += keys.wire();
  wire += args.wire();
  enqueue(Wire(std::move(wire)), Clock::now() + timeout, script, std::move(done));
}

void RedisConnection::command(std::vector<std::string> argv, std::chrono::milliseconds timeout,
                              ReplyHandler done) {
  if (state_ != State::kReady && waitingForFirstConnection()) {
    waiting_.push_back([weak = weak_from_this(), argv = std::move(argv), timeout,
                        done = std::move(done)]() mutable {
      if (auto self = weak.lock()) {
        self->command(std::move(argv), timeout, std::move(done));
      }
    });
    return;
  }
  if (state_ != State::kReady) {
    done(redisError(FailureSource::kNotReady, 0, endpoint_));
    return;
  }
  enqueue(Wire(encodeCommand(argv)), Clock::now() + timeout, std::nullopt, std::move(done));
}

void RedisConnection::onReply(std::uint64_t id, Reply* reply, const redisAsyncContext* context) {
  if (reply != nullptr && !in_flight_.empty()) {
    in_flight_.pop_front();
  }
  if (destroying_ || id == kIgnoredReply) {
    return;
  }
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    return;  // the deadline already answered this request: a late reply is dropped
  }
  if (reply == nullptr) {
    complete(id, redisError(FailureSource::kDisconnected, context->err,
                            context->errstr != nullptr ? context->errstr : ""));
    return;
  }
  if (reply->type == Reply::Type::kError) {
    std::string_view text = reply->str;
    Pending& p = it->second;
    if (isNoScript(text) && p.script && p.noscript_retries < kNoScriptRetries && context_) {
      // The script cache lost our script: load it and retry, pipelined, within the
      // original deadline. NOSCRIPT means the script ran nothing: a retry counts once.
      ++p.noscript_retries;
      std::vector<std::string> load = {"SCRIPT", "LOAD", options_.scripts[*p.script]};
      std::vector<const char*> args = {load[0].data(), load[1].data(), load[2].data()};
      std::vector<std::size_t> lens = {load[0].size(), load[1].size(), load[2].size()};
      if (redisAsyncCommandArgv(context_.get(), replyThunk, reinterpret_cast<void*>(kIgnoredReply),
                                3, args.data(), lens.data()) == REDIS_OK) {
        in_flight_.push_back(Clock::now());
        if (write(id, p.wire)) {
          return;
        }
      }
      complete(id, redisError(FailureSource::kDisconnected, 0, "cannot resend after NOSCRIPT"));
      return;
    }
    complete(id, redisError(FailureSource::kReply, 0, text));
    return;
  }
  complete(id, std::move(*reply));
}

void RedisConnection::complete(std::uint64_t id, Result<Reply> result) {
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    return;
  }
  ReplyHandler done = std::move(it->second.done);
  deadlines_.erase(it->second.deadline_it);
  pending_.erase(it);
  done(std::move(result));
}

void RedisConnection::armTimer() {
  std::optional<Clock::time_point> next;
  if (!deadlines_.empty()) {
    next = deadlines_.begin()->first;
  }
  if (!in_flight_.empty()) {
    auto stall = in_flight_.front() + options_.stall_timeout;
    next = next ? std::min(*next, stall) : stall;
  }
  if (!next || (timer_at_ && *timer_at_ <= *next)) {
    return;
  }
  timer_at_ = next;
  timer_.expires_at(*next);
  timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    auto self = weak.lock();
    if (!self || ec == net::error::operation_aborted) {
      return;
    }
    self->onTimer();
  });
}

void RedisConnection::onTimer() {
  timer_at_.reset();
  if (state_ == State::kStopped) {
    return;
  }
  auto now = Clock::now();
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    std::uint64_t id = deadlines_.begin()->second;
    complete(id, redisError(FailureSource::kDeadline, 0, endpoint_ + " did not answer in time"));
  }
  if (context_ && !in_flight_.empty() && now - in_flight_.front() >= options_.stall_timeout) {
    fail("no reply for " + std::to_string(options_.stall_timeout.count()) + " ms");
  }
  armTimer();
}

}  // namespace sluice::redis
