#include "grpc/rls_server.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grpc/grpc_connection.hpp"
#include "grpc/rls_mapping.hpp"
#include "grpc/unix_socket.hpp"

namespace sluice::grpc {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using GenericSocket = net::generic::stream_protocol::socket;
using GenericAcceptor = net::basic_socket_acceptor<net::generic::stream_protocol>;
using Clock = std::chrono::steady_clock;
using TlsStream = net::ssl::stream<GenericSocket>;

constexpr std::string_view kCallsMetric = "grpc_calls_total";
constexpr std::string_view kInFlightMetric = "grpc_calls_in_flight";
constexpr std::string_view kCancelledMetric = "grpc_calls_cancelled_total";
constexpr std::string_view kTlsReloadsMetric = "grpc_tls_reloads_total";
constexpr std::string_view kUnixPrefix = "unix:";
constexpr std::size_t kReadChunk = 16 << 10;
/// Output a connection may have queued before it stops reading its client.
constexpr std::size_t kMaxPendingOutput = 1 << 20;
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
/// After the drain, how long shutdown() waits for the I/O threads to close what is left.
constexpr auto kCloseWait = std::chrono::seconds(2);

StatusCode statusCodeOf(const Error& error) {
  switch (error.kind) {
    case ErrorKind::kInvalidArgument:
      return StatusCode::kInvalidArgument;
    default:
      // The store failed (timeout, connection, script) with --failure-mode closed, or the
      // server is not ready: UNAVAILABLE, so that Envoy's failure_mode_deny applies.
      return StatusCode::kUnavailable;
  }
}

/// "HOST:PORT" or "[V6]:PORT" into host and port.
std::optional<std::pair<std::string, std::string>> splitHostPort(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) {
    return std::nullopt;
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return std::make_pair(host.empty() ? std::string("0.0.0.0") : host, address.substr(colon + 1));
}

}  // namespace

class RlsSession;

/// One I/O thread serving connections: its io_context, and its sessions (touched only there).
struct IoSlot {
  net::io_context* io = nullptr;
  /// The worker whose io_context this is (decisions run inline), or -1.
  int worker = -1;
  std::unordered_set<RlsSession*> sessions;
};

/// What the sessions share with the server, kept alive by them (handlers may outlive it).
struct RlsShared {
  RlsShared(RlsServerOptions opts, std::vector<RlsWorker> w, Metrics& m)
      : options(std::move(opts)),
        workers(std::move(w)),
        metrics(m),
        in_flight(metrics.gauge(kInFlightMetric)) {
    describeGrpcMetrics(metrics);
    for (auto code :
         {StatusCode::kOk, StatusCode::kInvalidArgument, StatusCode::kUnavailable,
          StatusCode::kCancelled, StatusCode::kDeadlineExceeded, StatusCode::kResourceExhausted,
          StatusCode::kInternal, StatusCode::kUnimplemented}) {
      counters[static_cast<int>(code)] =
          &metrics.counter(kCallsMetric, {{"code", statusCodeName(code)}});
    }
    cancelled_queued = &metrics.counter(kCancelledMetric, {{"stage", "queued"}});
    cancelled_deciding = &metrics.counter(kCancelledMetric, {{"stage", "deciding"}});
    tls_reloaded = &metrics.counter(kTlsReloadsMetric, {{"result", "reloaded"}});
    tls_rejected = &metrics.counter(kTlsReloadsMetric, {{"result", "rejected"}});
    limits.max_message_bytes = options.max_message_bytes;
    limits.request_timeout = options.request_timeout;
    state.reflection = options.reflection;
  }

  void count(StatusCode code) {
    if (Counter* counter = counters[static_cast<int>(code)]) {
      counter->inc();
    }
  }

  RlsServerOptions options;
  std::vector<RlsWorker> workers;
  Metrics& metrics;
  Gauge& in_flight;
  std::array<Counter*, 17> counters{};
  Counter* cancelled_queued = nullptr;
  Counter* cancelled_deciding = nullptr;
  Counter* tls_reloaded = nullptr;
  Counter* tls_rejected = nullptr;
  GrpcServerState state;
  GrpcLimits limits;
  std::atomic<std::size_t> next_worker{0};
  std::atomic<bool> stopping{false};
  std::vector<std::unique_ptr<IoSlot>> slots;
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t live_sessions = 0;  // under mutex
  /// The TLS context new connections get (null: plaintext); swapped by a reload.
  std::shared_ptr<net::ssl::context> tls_context;  // under mutex

  std::shared_ptr<net::ssl::context> currentTls() {
    std::lock_guard lock(mutex);
    return tls_context;
  }
};

/// A call decided on another thread than its connection's (the server's own I/O thread
/// posting to the workers): what both threads know of it.
struct PostedCall {
  std::atomic<bool> gone{false};
  std::weak_ptr<RlsSession> session;
  net::io_context* home = nullptr;
  std::shared_ptr<RlsShared> shared;
  std::int32_t stream = 0;
};

/// One gRPC connection on its I/O thread: reads into the HTTP/2 connection, writes what it
/// produces, runs the calls' deadlines and the connection's age on one timer, and decides
/// ShouldRateLimit calls inline (or posts them to a worker).
class RlsSession final : public std::enable_shared_from_this<RlsSession>, public GrpcCallHandler {
 public:
  RlsSession(GenericSocket socket, std::shared_ptr<RlsShared> shared, IoSlot& slot)
      : shared_(std::move(shared)),
        slot_(slot),
        socket_(std::move(socket)),
        timer_(socket_.get_executor()),
        connection_(*this, shared_->state, shared_->limits, Clock::now()) {
    if (auto context = shared_->currentTls()) {
      tls_context_ = std::move(context);
      tls_.emplace(std::move(socket_), *tls_context_);
    }
  }

  void start() {
    slot_.sessions.insert(this);
    {
      std::lock_guard lock(shared_->mutex);
      ++shared_->live_sessions;
    }
    boost::system::error_code ec;
    socket().non_blocking(true, ec);
    const auto now = Clock::now();
    age_at_ = now + shared_->options.max_connection_age;
    if (tls_) {
      // The handshake has the request timeout; HTTP/2 starts once it is done.
      handshake_until_ = now + shared_->options.request_timeout;
      armTimer();
      tls_->async_handshake(
          net::ssl::stream_base::server,
          [self = shared_from_this()](boost::system::error_code hec) { self->onHandshake(hec); });
      return;
    }
    begin();
  }

  void onHandshake(boost::system::error_code ec) {
    handshake_until_.reset();
    if (closed_) {
      return;
    }
    if (ec) {
      // A client without a valid certificate, a wrong SAN, not TLS at all: logged at debug
      // (a scanner must not fill the log), refused.
      spdlog::debug("gRPC: TLS handshake refused: {}", ec.message());
      close();
      return;
    }
    begin();
  }

  void begin() {
    if (shared_->stopping) {
      connection_.goAway();
    }
    flush();
    armTimer();
    doRead();
  }

  GenericSocket& socket() { return tls_ ? tls_->next_layer() : socket_; }

  /// The server is stopping: GOAWAY, serve what was received, then close.
  void goAway() {
    connection_.goAway();
    flush();
    closeIfDone();
  }

  void healthChanged() {
    connection_.healthChanged();
    flush();
  }

  /// Ends the connection now; calls still waiting are abandoned (counted CANCELLED).
  void close() {
    if (closed_) {
      return;
    }
    closed_ = true;
    for (auto& [stream, posted] : posted_) {
      posted->gone = true;
    }
    posted_.clear();
    // Their decisions are still coming: counted when they come, as the client's cancels.
    for (auto [stream, deadline] : dispatched_) {
      if (connection_.waiting(stream)) {
        gone_[stream] = deadline;
      }
    }
    dispatched_.clear();
    boost::system::error_code ignored;
    timer_.cancel();
    socket().shutdown(net::socket_base::shutdown_both, ignored);
    socket().close(ignored);
    slot_.sessions.erase(this);
    std::lock_guard lock(shared_->mutex);
    --shared_->live_sessions;
    shared_->changed.notify_all();
  }

  // GrpcCallHandler ------------------------------------------------------------------

  void onCall(std::int32_t stream, std::string_view message,
              std::optional<Clock::time_point> deadline) override {
    shared_->in_flight.add(1);
    dispatched_.emplace_back(stream, deadline);
    in_call_ = true;
    // One request message per connection, refilled by each call: protobuf's Clear() keeps
    // the strings and repeated fields it allocated, so a warm connection parses without
    // allocating (cheaper than an arena, which registers a destructor per string).
    rls::RateLimitRequest* request = &request_;
    if (deadline && *deadline <= Clock::now()) {
      // Its deadline passed while it was read (a grpc-timeout of a few nanoseconds): not
      // decided, nothing charged.
      shared_->cancelled_queued->inc();
      answerError(stream, StatusCode::kDeadlineExceeded, "deadline passed before decided");
    } else if (!request->ParseFromArray(message.data(), static_cast<int>(message.size()))) {
      answerError(stream, StatusCode::kInternal, "cannot parse RateLimitRequest");
    } else if (auto parsed = toDecisionRequest(*request); !parsed) {
      answerError(stream, StatusCode::kInvalidArgument, parsed.error().message);
    } else if (slot_.worker >= 0) {
      decideHere(stream, std::move(*parsed));
    } else {
      post(stream, std::move(*parsed), deadline);
    }
    in_call_ = false;
  }

  void onCallAbandoned(std::int32_t stream, StatusCode code) override {
    std::optional<Clock::time_point> deadline;
    if (auto it = findDispatched(stream); it != dispatched_.end()) {
      deadline = it->second;
      forgetDispatched(it);
    }
    auto posted = posted_.find(stream);
    if (posted != posted_.end()) {
      posted->second->gone = true;
    }
    if (code == StatusCode::kDeadlineExceeded) {
      // Answered DEADLINE_EXCEEDED by the connection: that is what its client saw.
      shared_->count(code);
      shared_->in_flight.add(-1);
    } else if (posted != posted_.end()) {
      // Waiting in a worker's queue (or decided there): counted now, as what its client saw.
      const bool expired = deadline && *deadline <= Clock::now();
      shared_->count(expired ? StatusCode::kDeadlineExceeded : StatusCode::kCancelled);
      shared_->in_flight.add(-1);
    } else {
      // The client went away while the store decided it here: counted once the decision is
      // in, as what the client saw by then (DEADLINE_EXCEEDED once its deadline passed).
      gone_[stream] = deadline;
    }
  }

  /// A call given up on has been settled (decided, or dropped from the worker's queue).
  void settleGone(std::int32_t stream, Counter* stage) {
    if (stage != nullptr) {
      stage->inc();
    }
    auto it = gone_.find(stream);
    if (it == gone_.end()) {
      return;
    }
    const bool expired = it->second && *it->second <= Clock::now();
    shared_->count(expired ? StatusCode::kDeadlineExceeded : StatusCode::kCancelled);
    shared_->in_flight.add(-1);
    gone_.erase(it);
  }

  void onCallRefused(StatusCode code) override { shared_->count(code); }

 private:
  void answerError(std::int32_t stream, StatusCode code, std::string_view message) {
    if (!connection_.waiting(stream)) {
      return;
    }
    if (auto it = findDispatched(stream); it != dispatched_.end()) {
      forgetDispatched(it);
    }
    shared_->count(code);
    shared_->in_flight.add(-1);
    connection_.fail(stream, code, message);
  }

  void answer(std::int32_t stream, std::string&& framed, bool degraded) {
    if (auto it = findDispatched(stream); it != dispatched_.end()) {
      forgetDispatched(it);
    }
    shared_->count(StatusCode::kOk);
    shared_->in_flight.add(-1);
    connection_.replyFramed(stream, std::move(framed), degraded);
  }

  /// The response message behind its gRPC prefix, in `framed` (its capacity reused).
  static void encode(const Decision& decision, bool headers, rls::RateLimitResponse& response,
                     std::string& framed) {
    response.Clear();
    toResponse(decision, headers, response);
    const std::size_t size = response.ByteSizeLong();
    framed.assign(5 + size, '\0');
    framed[1] = static_cast<char>((size >> 24) & 0xff);
    framed[2] = static_cast<char>((size >> 16) & 0xff);
    framed[3] = static_cast<char>((size >> 8) & 0xff);
    framed[4] = static_cast<char>(size & 0xff);
    response.SerializeWithCachedSizesToArray(reinterpret_cast<std::uint8_t*>(framed.data() + 5));
  }

  void decideHere(std::int32_t stream, DecisionRequest&& request) {
    DecisionService& decisions =
        *shared_->workers[static_cast<std::size_t>(slot_.worker)].decisions;
    decisions.decide(std::move(request),
                     [self = shared_from_this(), stream](Result<Decision> decision) {
                       self->onDecided(stream, std::move(decision));
                     });
  }

  void onDecided(std::int32_t stream, Result<Decision> decision) {
    if (closed_ || !connection_.waiting(stream)) {
      // The client went away (or its deadline passed) while the store decided: the
      // decision stands (charged once), the answer goes nowhere.
      settleGone(stream, shared_->cancelled_deciding);
      if (decision) {
        recycleDecision(std::move(*decision));
      }
      return;
    }
    if (!decision) {
      answerError(stream, statusCodeOf(decision.error()), decision.error().message);
    } else {
      encode(*decision, shared_->options.response_headers, response_, framed_);
      // replyFramed() swaps: framed_ gets the stream's spent buffer, capacity and all.
      answer(stream, std::move(framed_), decision->degraded);
      recycleDecision(std::move(*decision));
    }
    if (!in_call_) {
      flush();
      armTimer();
    }
  }

  /// To a worker of another thread (round-robin); the answer comes back to this thread.
  void post(std::int32_t stream, DecisionRequest&& request,
            std::optional<Clock::time_point> deadline) {
    auto posted = std::make_shared<PostedCall>();
    posted->session = weak_from_this();
    posted->home = slot_.io;
    posted->shared = shared_;
    posted->stream = stream;
    posted_[stream] = posted;
    const std::size_t index =
        shared_->next_worker.fetch_add(1, std::memory_order_relaxed) % shared_->workers.size();
    RlsWorker worker = shared_->workers[index];
    net::post(*worker.io, [worker, posted, deadline, request = std::move(request)]() mutable {
      // Its turn has come: a call nobody waits for any more is not charged.
      if (posted->gone || (deadline && *deadline <= Clock::now())) {
        posted->shared->cancelled_queued->inc();
        net::post(*posted->home, [posted] {
          if (auto self = posted->session.lock()) {
            self->posted_.erase(posted->stream);
            self->answerQueuedLate(posted->stream);
          }
        });
        return;
      }
      worker.decisions->decide(std::move(request), [posted](Result<Decision> decision) {
        onPostedDecided(posted, std::move(decision));
      });
    });
  }

  /// On the worker's thread: the answer is encoded there and handed back to the session's.
  static void onPostedDecided(const std::shared_ptr<PostedCall>& posted,
                              Result<Decision> decision) {
    std::string framed;
    std::optional<Error> error;
    bool degraded = false;
    if (decision) {
      rls::RateLimitResponse response;
      encode(*decision, posted->shared->options.response_headers, response, framed);
      degraded = decision->degraded;
      recycleDecision(std::move(*decision));
    } else {
      error = decision.error();
    }
    net::post(*posted->home,
              [posted, framed = std::move(framed), error = std::move(error), degraded]() mutable {
                auto self = posted->session.lock();
                if (!self) {
                  return;
                }
                const std::int32_t stream = posted->stream;
                self->posted_.erase(stream);
                if (self->closed_ || !self->connection_.waiting(stream)) {
                  self->settleGone(stream, self->shared_->cancelled_deciding);
                  return;
                }
                if (error) {
                  self->answerError(stream, statusCodeOf(*error), error->message);
                } else {
                  self->answer(stream, std::move(framed), degraded);
                }
                self->flush();
                self->armTimer();
              });
  }

  /// A posted call that was not decided because its deadline passed in the worker's queue.
  void answerQueuedLate(std::int32_t stream) {
    if (closed_ || !connection_.waiting(stream)) {
      settleGone(stream, nullptr);  // the worker counted the stage
      return;
    }
    answerError(stream, StatusCode::kDeadlineExceeded, "deadline passed before decided");
    flush();
    armTimer();
  }

  // I/O ----------------------------------------------------------------------------------

  void doRead() {
    if (closed_ || reading_ || read_paused_) {
      return;
    }
    reading_ = true;
    auto done = [self = shared_from_this()](boost::system::error_code ec, std::size_t n) {
      self->onRead(ec, n);
    };
    if (tls_) {
      tls_->async_read_some(net::buffer(input_), std::move(done));
    } else {
      socket_.async_read_some(net::buffer(input_), std::move(done));
    }
  }

  void onRead(boost::system::error_code ec, std::size_t n) {
    reading_ = false;
    if (closed_) {
      return;
    }
    if (ec) {
      close();
      return;
    }
    const bool ok = connection_.receive(std::string_view(input_.data(), n), Clock::now());
    flush();
    if (!ok) {
      closing_ = true;  // written what is pending (a GOAWAY), then closed
      closeIfDone();
      return;
    }
    if (closeIfDone()) {
      return;
    }
    armTimer();
    if (pending_.size() > kMaxPendingOutput) {
      read_paused_ = true;  // the client does not read its answers: stop reading its calls
      return;
    }
    doRead();
  }

  /// Takes what the connection has to send and writes it: a non-blocking send first (the
  /// usual case: all of it goes at once), the rest asynchronously.
  void flush() {
    if (closed_) {
      return;
    }
    connection_.output(pending_);
    if (writing_ || pending_.empty() || handshake_until_) {
      return;
    }
    if (!tls_) {
      boost::system::error_code ec;
      const std::size_t sent = socket_.write_some(net::buffer(pending_), ec);
      if (ec && ec != net::error::would_block && ec != net::error::try_again) {
        close();
        return;
      }
      pending_.erase(0, sent);
      if (pending_.empty()) {
        return;
      }
    }
    writing_ = true;
    writing_buffer_.swap(pending_);
    auto done = [self = shared_from_this()](boost::system::error_code wec, std::size_t) {
      self->onWrite(wec);
    };
    if (tls_) {
      net::async_write(*tls_, net::buffer(writing_buffer_), std::move(done));
    } else {
      net::async_write(socket_, net::buffer(writing_buffer_), std::move(done));
    }
  }

  void onWrite(boost::system::error_code ec) {
    writing_ = false;
    writing_buffer_.clear();
    if (closed_) {
      return;
    }
    if (ec) {
      close();
      return;
    }
    flush();
    if (closeIfDone()) {
      return;
    }
    if (read_paused_ && pending_.size() <= kMaxPendingOutput) {
      read_paused_ = false;
      doRead();
    }
  }

  bool closeIfDone() {
    if (closed_) {
      return true;
    }
    if ((closing_ || connection_.done()) && !writing_ && pending_.empty()) {
      close();
      return true;
    }
    return false;
  }

  /// One timer for the calls' deadlines and the connection's age; re-armed only when it
  /// must fire earlier than it is set to.
  void armTimer() {
    if (closed_) {
      return;
    }
    Clock::time_point next = grace_at_ ? *grace_at_ : age_at_;
    if (auto call = connection_.nextTimer(); call && *call < next) {
      next = *call;
    }
    if (handshake_until_ && *handshake_until_ < next) {
      next = *handshake_until_;
    }
    if (timer_armed_ && timer_at_ <= next) {
      return;
    }
    timer_armed_ = true;
    timer_at_ = next;
    timer_.expires_at(next);
    timer_.async_wait(
        [self = shared_from_this()](boost::system::error_code ec) { self->onTimer(ec); });
  }

  void onTimer(boost::system::error_code ec) {
    // Cancelled: closed, or re-armed (the newer wait is the one that counts).
    if (closed_ || ec) {
      return;
    }
    timer_armed_ = false;
    const auto now = Clock::now();
    if (handshake_until_ && *handshake_until_ <= now) {
      close();  // no TLS handshake within the request timeout
      return;
    }
    connection_.onTimer(now);
    if (grace_at_ && *grace_at_ <= now) {
      // The calls still open after the grace are cut off.
      flush();
      close();
      return;
    }
    if (!grace_at_ && age_at_ <= now) {
      connection_.goAway();
      grace_at_ = now + shared_->options.max_connection_age_grace;
    }
    flush();
    if (!closeIfDone()) {
      armTimer();
    }
  }

  std::shared_ptr<RlsShared> shared_;
  IoSlot& slot_;
  GenericSocket socket_;  // plaintext; with TLS, moved into tls_
  std::shared_ptr<net::ssl::context> tls_context_;
  std::optional<TlsStream> tls_;
  std::optional<Clock::time_point> handshake_until_;
  net::steady_timer timer_;
  GrpcConnection connection_;
  std::array<char, kReadChunk> input_{};
  std::string pending_;
  std::string writing_buffer_;
  rls::RateLimitRequest request_;
  rls::RateLimitResponse response_;
  std::string framed_;
  /// Calls handed to onCall() and not answered, with their deadline.
  /// (A vector: it holds one or two calls, and a map would allocate a node per call.)
  std::vector<std::pair<std::int32_t, std::optional<Clock::time_point>>> dispatched_;

  using DispatchedIt = decltype(dispatched_)::iterator;
  DispatchedIt findDispatched(std::int32_t stream) {
    return std::find_if(dispatched_.begin(), dispatched_.end(),
                        [stream](const auto& call) { return call.first == stream; });
  }
  void forgetDispatched(DispatchedIt it) {
    *it = dispatched_.back();
    dispatched_.pop_back();
  }
  std::unordered_map<std::int32_t, std::shared_ptr<PostedCall>> posted_;
  /// Calls whose client went away while they were decided: their deadline, if any.
  std::unordered_map<std::int32_t, std::optional<Clock::time_point>> gone_;
  Clock::time_point age_at_;
  std::optional<Clock::time_point> grace_at_;
  Clock::time_point timer_at_;
  bool timer_armed_ = false;
  bool reading_ = false;
  bool read_paused_ = false;
  bool writing_ = false;
  bool closing_ = false;
  bool closed_ = false;
  bool in_call_ = false;
};

/// Accepts on one address and hands the connections to the I/O threads in turn.
class RlsAcceptor {
 public:
  RlsAcceptor(GenericAcceptor acceptor, std::shared_ptr<RlsShared> shared, bool tcp)
      : acceptor_(std::move(acceptor)),
        shared_(std::move(shared)),
        retry_(acceptor_.get_executor()),
        tcp_(tcp) {}

  void accept() {
    IoSlot& target = *shared_->slots[next_];
    next_ = (next_ + 1) % shared_->slots.size();
    acceptor_.async_accept(target.io->get_executor(),
                           [this, &target](boost::system::error_code ec, GenericSocket socket) {
                             onAccept(ec, std::move(socket), target);
                           });
  }

  void close() {
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
  }

 private:
  void onAccept(boost::system::error_code ec, GenericSocket socket, IoSlot& target) {
    if (ec == net::error::operation_aborted || shared_->stopping) {
      return;
    }
    if (ec) {
      if (!failing_) {
        spdlog::warn("gRPC: accept failing: {}; retrying every {} ms", ec.message(),
                     kAcceptRetryDelay.count());
        failing_ = true;
      }
      retry_.expires_after(kAcceptRetryDelay);
      retry_.async_wait([this](boost::system::error_code wec) {
        if (!wec && !shared_->stopping) {
          accept();
        }
      });
      return;
    }
    failing_ = false;
    if (tcp_) {
      boost::system::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
    }
    net::post(*target.io, [shared = shared_, &target, socket = std::move(socket)]() mutable {
      if (shared->stopping) {
        return;
      }
      std::make_shared<RlsSession>(std::move(socket), shared, target)->start();
    });
    accept();
  }

  GenericAcceptor acceptor_;
  std::shared_ptr<RlsShared> shared_;
  std::size_t next_ = 0;
  net::steady_timer retry_;
  bool tcp_;
  bool failing_ = false;
};

struct RlsServer::Impl {
  Impl(RlsServerOptions options, std::vector<RlsWorker> workers, Metrics& metrics)
      : shared(std::make_shared<RlsShared>(std::move(options), std::move(workers), metrics)) {}

  /// Runs `job` on every I/O thread and waits (at most `limit`) until all have run it.
  bool onEveryThread(const std::function<void(IoSlot&)>& job, std::chrono::milliseconds limit) {
    auto remaining = std::make_shared<std::pair<std::mutex, std::size_t>>();
    auto done = std::make_shared<std::condition_variable>();
    remaining->second = shared->slots.size();
    for (auto& slot : shared->slots) {
      net::post(*slot->io, [slot = slot.get(), job, remaining, done] {
        job(*slot);
        std::lock_guard lock(remaining->first);
        if (--remaining->second == 0) {
          done->notify_all();
        }
      });
    }
    std::unique_lock lock(remaining->first);
    return done->wait_for(lock, limit, [&] { return remaining->second == 0; });
  }

  // The server's own I/O thread (without serve_on_workers) goes last, after the I/O objects
  // bound to it.
  std::unique_ptr<net::io_context> own_io;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> own_guard;
  std::thread own_thread;
  std::shared_ptr<RlsShared> shared;
  std::vector<std::unique_ptr<RlsAcceptor>> acceptors;
  std::vector<std::string> addresses;
  struct OwnedSocket {
    std::string path;
    dev_t device = 0;
    ino_t inode = 0;
  };
  std::vector<OwnedSocket> owned_sockets;
  std::mutex mutex;
  bool started = false;
  bool shut_down = false;
  // The TLS files' watcher: a thread of its own (reading files is no I/O thread's work).
  std::thread tls_watcher;
  std::mutex tls_mutex;
  std::condition_variable tls_wake;
  bool tls_stop = false;

  void watchTls() {
    const TlsFiles files = *shared->options.tls;
    std::string stamp = tlsFilesStamp(files);
    std::string rejected;
    std::unique_lock lock(tls_mutex);
    while (!tls_wake.wait_for(lock, shared->options.tls_reload_interval,
                              [this] { return tls_stop; })) {
      const std::string now = tlsFilesStamp(files);
      if (now == stamp || now == rejected) {
        continue;
      }
      auto context = makeServerTlsContext(files);
      if (!context) {
        // Often a rotation half done (the certificate written, not yet its key): tried
        // again when the files change next.
        spdlog::warn("gRPC TLS: the changed files do not load, keeping the previous ones: {}",
                     context.error().message);
        shared->tls_rejected->inc();
        rejected = now;
        continue;
      }
      {
        std::lock_guard swap(shared->mutex);
        shared->tls_context = std::move(*context);
      }
      stamp = now;
      rejected.clear();
      shared->tls_reloaded->inc();
      spdlog::info("gRPC TLS: reloaded {} and {}{}; new connections use them", files.cert_file,
                   files.key_file,
                   files.client_ca_file.empty() ? "" : " and " + files.client_ca_file);
    }
  }
};

RlsServer::RlsServer(RlsServerOptions options, std::vector<RlsWorker> workers, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(workers), metrics)) {}

RlsServer::~RlsServer() { shutdown(); }

Status RlsServer::start() {
  Impl& impl = *impl_;
  RlsShared& shared = *impl.shared;
  if (shared.workers.empty()) {
    return makeError(ErrorKind::kInternal, "gRPC: no I/O thread to decide on");
  }
  if (shared.options.tls) {
    auto context = makeServerTlsContext(*shared.options.tls);
    if (!context) {
      return context.error();
    }
    shared.tls_context = std::move(*context);
  }
  if (shared.options.serve_on_workers) {
    for (std::size_t i = 0; i < shared.workers.size(); ++i) {
      auto slot = std::make_unique<IoSlot>();
      slot->io = shared.workers[i].io;
      slot->worker = static_cast<int>(i);
      shared.slots.push_back(std::move(slot));
    }
  } else {
    impl.own_io = std::make_unique<net::io_context>(1);
    auto slot = std::make_unique<IoSlot>();
    slot->io = impl.own_io.get();
    shared.slots.push_back(std::move(slot));
  }
  net::io_context& accept_io = *shared.slots.front()->io;
  for (const std::string& address : shared.options.listen) {
    boost::system::error_code ec;
    GenericAcceptor acceptor(accept_io);
    auto fail = [&](const std::string& why) {
      return makeError(ErrorKind::kUnavailable,
                       "--grpc-listen: cannot listen on " + address + ": " + why);
    };
    if (address.starts_with(kUnixPrefix)) {
      const std::string path = address.substr(kUnixPrefix.size());
      if (auto status = prepareUnixSocketPath(path); !status) {
        return makeError(ErrorKind::kUnavailable, "--grpc-listen: " + status.error().message);
      }
      const net::generic::stream_protocol::endpoint endpoint(
          net::local::stream_protocol::endpoint{path});
      acceptor.open(endpoint.protocol(), ec);
      if (!ec) {
        acceptor.bind(endpoint, ec);
      }
      if (ec) {
        return fail(ec.message());
      }
      struct stat info {};
      if (::lstat(path.c_str(), &info) == 0) {
        impl.owned_sockets.push_back({path, info.st_dev, info.st_ino});
      }
      // Before listen(): until then a connect() is refused, so nobody gets in under the umask.
      if (::chmod(path.c_str(), static_cast<mode_t>(shared.options.unix_mode)) != 0) {
        spdlog::warn("gRPC: cannot chmod {:o} {}", shared.options.unix_mode, path);
      }
      acceptor.listen(net::socket_base::max_listen_connections, ec);
      if (ec) {
        return fail(ec.message());
      }
      impl.addresses.push_back(address);
      impl.acceptors.push_back(
          std::make_unique<RlsAcceptor>(std::move(acceptor), impl.shared, false));
      continue;
    }
    auto parts = splitHostPort(address);
    if (!parts) {
      return fail("expected HOST:PORT or unix:/PATH");
    }
    tcp::resolver resolver(accept_io);
    auto results = resolver.resolve(parts->first, parts->second, ec);
    if (ec || results.empty()) {
      return fail("cannot resolve: " + ec.message());
    }
    const tcp::endpoint endpoint = results.begin()->endpoint();
    const net::generic::stream_protocol::endpoint generic(endpoint);
    acceptor.open(generic.protocol(), ec);
    if (!ec) {
      // SO_REUSEADDR (TIME_WAIT), never SO_REUSEPORT: a port in use fails here.
      acceptor.set_option(net::socket_base::reuse_address(true), ec);
    }
    if (!ec) {
      acceptor.bind(generic, ec);
    }
    if (!ec) {
      acceptor.listen(net::socket_base::max_listen_connections, ec);
    }
    if (ec) {
      return fail(ec.message());
    }
    if (parts->second == "0") {
      const auto local = acceptor.local_endpoint(ec);
      tcp::endpoint bound;
      std::memcpy(bound.data(), local.data(), local.size());
      bound.resize(local.size());
      impl.addresses.push_back(address.substr(0, address.size() - 1) +
                               std::to_string(bound.port()));
    } else {
      impl.addresses.push_back(address);
    }
    impl.acceptors.push_back(std::make_unique<RlsAcceptor>(std::move(acceptor), impl.shared, true));
  }
  for (auto& acceptor : impl.acceptors) {
    acceptor->accept();
  }
  if (impl.own_io) {
    impl.own_guard.emplace(impl.own_io->get_executor());
    impl.own_thread = std::thread([io = impl.own_io.get()] { io->run(); });
  }
  if (shared.options.tls) {
    impl.tls_watcher = std::thread([&impl] { impl.watchTls(); });
  }
  {
    std::lock_guard lock(impl.mutex);
    impl.started = true;
  }
  setServing(true);
  return {};
}

std::vector<std::string> RlsServer::addresses() const { return impl_->addresses; }

void RlsServer::setServing(bool serving) {
  Impl& impl = *impl_;
  std::lock_guard lock(impl.mutex);
  if (!impl.started || impl.shut_down) {
    return;
  }
  if (impl.shared->state.serving.exchange(serving) == serving) {
    return;
  }
  for (auto& slot : impl.shared->slots) {
    net::post(*slot->io, [slot = slot.get()] {
      std::vector<RlsSession*> sessions(slot->sessions.begin(), slot->sessions.end());
      for (RlsSession* session : sessions) {
        session->healthChanged();
      }
    });
  }
}

void RlsServer::shutdown() {
  Impl& impl = *impl_;
  {
    std::lock_guard lock(impl.mutex);
    if (impl.shut_down || !impl.started) {
      impl.shut_down = true;
      return;
    }
    impl.shut_down = true;
  }
  RlsShared& shared = *impl.shared;
  shared.state.serving = false;
  shared.stopping = true;
  if (impl.tls_watcher.joinable()) {
    {
      std::lock_guard lock(impl.tls_mutex);
      impl.tls_stop = true;
    }
    impl.tls_wake.notify_all();
    impl.tls_watcher.join();
  }
  // The socket files go first: while the acceptor is open, no other server takes them for
  // stale.
  for (const auto& socket : impl.owned_sockets) {
    struct stat info {};
    if (::lstat(socket.path.c_str(), &info) == 0 && info.st_dev == socket.device &&
        info.st_ino == socket.inode) {
      ::unlink(socket.path.c_str());
    }
  }
  impl.owned_sockets.clear();
  // GOAWAY everywhere; the calls received are served until the drain timeout.
  impl.onEveryThread(
      [&impl](IoSlot& slot) {
        if (&slot == impl.shared->slots.front().get()) {
          for (auto& acceptor : impl.acceptors) {
            acceptor->close();
          }
        }
        std::vector<RlsSession*> sessions(slot.sessions.begin(), slot.sessions.end());
        for (RlsSession* session : sessions) {
          session->goAway();
        }
      },
      shared.options.drain_timeout);
  {
    std::unique_lock lock(shared.mutex);
    shared.changed.wait_for(lock, shared.options.drain_timeout,
                            [&shared] { return shared.live_sessions == 0; });
  }
  impl.onEveryThread(
      [](IoSlot& slot) {
        std::vector<RlsSession*> sessions(slot.sessions.begin(), slot.sessions.end());
        for (RlsSession* session : sessions) {
          session->close();
        }
      },
      kCloseWait);
  if (impl.own_io) {
    impl.own_guard.reset();
    impl.own_io->stop();
    impl.own_thread.join();
  }
}

void describeGrpcMetrics(Metrics& metrics) {
  metrics.describe(kCallsMetric, Metrics::Type::kCounter,
                   "gRPC ShouldRateLimit calls by the status code their client saw (OK includes "
                   "OVER_LIMIT answers).");
  metrics.describe(kCancelledMetric, Metrics::Type::kCounter,
                   "gRPC ShouldRateLimit calls the client gave up on (cancel, deadline, lost "
                   "connection) before their answer, by stage: queued (not decided, nothing "
                   "charged) or deciding (the store's decision stands; the answer is dropped).");
  metrics.describe(kTlsReloadsMetric, Metrics::Type::kCounter,
                   "Changes of the gRPC listener's TLS files seen, by result: reloaded (new "
                   "connections use them) or rejected (they did not load; the previous ones "
                   "stay in use).");
  metrics.describe(kInFlightMetric, Metrics::Type::kGauge,
                   "gRPC ShouldRateLimit calls received and not answered yet.");
}

}  // namespace sluice::grpc
