#pragma once

// The server side of one gRPC connection (RlsSession) and what the sessions share with the
// server (RlsShared, IoSlot); private to the grpc module (rls_server.cpp starts them).

#include <array>
#include <atomic>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "grpc/grpc_connection.hpp"
#include "grpc/kuadrant_mapping.hpp"
#include "grpc/rls_mapping.hpp"
#include "sluice/common/drain_aware_read.hpp"
#include "sluice/grpc/rls_server.hpp"

namespace sluice::grpc {

namespace net = boost::asio;
/// A connection's socket, bound to its I/O thread's io_context (sluice/common/
/// drain_aware_read.hpp: no type-erased executor on each read).
using GenericSocket = IoContextStreamSocket;
using Clock = std::chrono::steady_clock;
using TlsStream = net::ssl::stream<GenericSocket>;

inline constexpr std::string_view kCallsMetric = "grpc_calls_total";
inline constexpr std::string_view kInFlightMetric = "grpc_calls_in_flight";
inline constexpr std::string_view kCancelledMetric = "grpc_calls_cancelled_total";
inline constexpr std::string_view kTlsReloadsMetric = "grpc_tls_reloads_total";
/// What a session reads from its socket at once.
inline constexpr std::size_t kReadChunk = 16 << 10;

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
  RlsSession(GenericSocket socket, std::shared_ptr<RlsShared> shared, IoSlot& slot);

  void start();

  void onHandshake(boost::system::error_code ec);

  void begin();

  GenericSocket& socket() { return tls_ ? tls_->next_layer() : socket_; }

  /// The server is stopping: GOAWAY, serve what was received, then close.
  void goAway();

  void healthChanged();

  /// Ends the connection now; calls still waiting are abandoned (counted CANCELLED).
  void close();

  // GrpcCallHandler ------------------------------------------------------------------

  void onCall(std::int32_t stream, std::string_view message,
              std::optional<Clock::time_point> deadline) override;

  void onCallAbandoned(std::int32_t stream, StatusCode code) override;

  /// A call given up on has been settled (decided, or dropped from the worker's queue).
  void settleGone(std::int32_t stream, Counter* stage);

  void onCallRefused(StatusCode code) override { shared_->count(code); }

 private:
  void answerError(std::int32_t stream, StatusCode code, std::string_view message);

  void answer(std::int32_t stream, std::string_view framed, bool degraded);

  /// The response message behind its gRPC prefix, in `framed` (its capacity reused): Envoy's
  /// RateLimitResponse, or Kuadrant's ReserveResponse or CommitResponse for a reservation
  /// step. A step whose answer is a gRPC error returns it instead (kuadrant_mapping.hpp).
  static std::optional<CallError> encode(const Decision& decision, bool headers,
                                         rls::RateLimitResponse& response, std::string& framed);

  /// The call's request message as a decision request (kInvalidArgument for a bad one,
  /// kInternal when the bytes are no such message).
  Result<DecisionRequest> parseCall(RlsCall call, std::string_view message);

  void decideHere(std::int32_t stream, DecisionRequest&& request);

  /// A RateLimitRequest (Envoy's, or Kuadrant's CheckRateLimit) decided on this thread, read
  /// straight into the decision service's own storage (DecisionService::decideInPlace()).
  void decideHere(std::int32_t stream, std::string_view message);

  /// `message` into `into`: readUsualRequestInto(), else protobuf's parser and
  /// fillDecisionRequest() (kInternal: not a RateLimitRequest).
  Status fillRequest(std::string_view message, DecisionRequest& into);

  /// A RateLimitRequest read into a decision request: decided (here or posted), or answered
  /// INVALID_ARGUMENT.
  void decideParsed(std::int32_t stream, Result<DecisionRequest>& parsed,
                    std::optional<Clock::time_point> deadline);

  /// The decision of a call decided on this thread (taken by reference: a Result moved by
  /// value would move the request and the descriptors' statuses once more).
  /// `recycle`: the decision goes to the thread's spares (recycleDecision()) once answered;
  /// false when it stays in the decision service's storage (decideInPlace()).
  void onDecided(std::int32_t stream, Result<Decision>& decision, bool recycle);

  /// To a worker of another thread (round-robin); the answer comes back to this thread.
  void post(std::int32_t stream, DecisionRequest&& request,
            std::optional<Clock::time_point> deadline);

  /// On the worker's thread: the answer is encoded there and handed back to the session's.
  static void onPostedDecided(const std::shared_ptr<PostedCall>& posted, Result<Decision> decision);

  /// A posted call that was not decided because its deadline passed in the worker's queue.
  void answerQueuedLate(std::int32_t stream);

  // I/O ----------------------------------------------------------------------------------

  void doRead();

  void onRead(boost::system::error_code ec, std::size_t n);

  /// Takes what the connection has to send and writes it: a non-blocking send first (the
  /// usual case: all of it goes at once), the rest asynchronously.
  void flush();

  void onWrite(boost::system::error_code ec);

  bool closeIfDone();

  /// One timer for the calls' deadlines and the connection's age; re-armed only when it
  /// must fire earlier than it is set to.
  void armTimer();

  void onTimer(boost::system::error_code ec);

  std::shared_ptr<RlsShared> shared_;
  IoSlot& slot_;
  GenericSocket socket_;  // plaintext; with TLS, moved into tls_
  std::shared_ptr<net::ssl::context> tls_context_;
  std::optional<TlsStream> tls_;
  bool drain_aware_ = false;  // plaintext reads that wait without a failed read first
  std::optional<Clock::time_point> handshake_until_;
  net::steady_timer timer_;
  GrpcConnection connection_;
  std::string pending_;
  std::string writing_buffer_;
  rls::RateLimitRequest request_;
  rls::RateLimitResponse response_;
  std::string framed_;
  /// Calls handed to onCall() and not answered, with their deadline.
  /// (A vector: it holds one or two calls, and a map would allocate a node per call.)
  std::vector<std::pair<std::int32_t, std::optional<Clock::time_point>>> dispatched_;

  using DispatchedIt = decltype(dispatched_)::iterator;
  DispatchedIt findDispatched(std::int32_t stream);
  void forgetDispatched(DispatchedIt it);
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
  /// Last: the members a call touches stay together ahead of it; not zeroed (a read fills
  /// what is used).
  std::array<char, kReadChunk> input_;
};

}  // namespace sluice::grpc
