#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grpc/http2_session.hpp"

/// One gRPC server connection over HTTP/2 (http2_session.hpp: bytes in, bytes out), with
/// no socket and no clock of its own, so that a fuzzer and a unit test drive it as the
/// server's I/O threads do (docs/envoy.md, "The gRPC transport").
namespace sluice::grpc {

/// gRPC status codes (grpc/doc/statuscodes.md).
enum class StatusCode : int {
  kOk = 0,
  kCancelled = 1,
  kUnknown = 2,
  kInvalidArgument = 3,
  kDeadlineExceeded = 4,
  kNotFound = 5,
  kResourceExhausted = 8,
  kUnimplemented = 12,
  kInternal = 13,
  kUnavailable = 14,
};

const char* statusCodeName(StatusCode code);

/// The bounds of one connection: every one of them is enforced, with a gRPC status or a
/// GOAWAY, never by growing without limit.
struct GrpcLimits {
  /// SETTINGS_MAX_CONCURRENT_STREAMS; a stream over it is refused (RST_STREAM
  /// REFUSED_STREAM), which gRPC clients retry.
  std::uint32_t max_concurrent_streams = 1000;
  /// SETTINGS_MAX_HEADER_LIST_SIZE; a call whose metadata is larger is answered
  /// RESOURCE_EXHAUSTED.
  std::uint32_t max_header_list_bytes = 16 << 10;
  /// Largest request message (RESOURCE_EXHAUSTED beyond).
  std::size_t max_message_bytes = 1 << 20;
  /// A call's request must arrive whole within this (or its grpc-timeout if shorter); a
  /// stream that never ends is answered DEADLINE_EXCEEDED after it.
  std::chrono::milliseconds request_timeout{30'000};
  /// Client PINGs closer together than this (with calls open; two hours without) are
  /// strikes; more than max_ping_strikes strikes: GOAWAY ENHANCE_YOUR_CALM "too_many_pings".
  /// Sending a response resets the count (grpc-go's and grpc core's policy and defaults).
  std::chrono::milliseconds min_ping_interval{std::chrono::minutes(5)};
  int max_ping_strikes = 2;
};

/// Served by the connection itself: the health service's state and whether reflection is on.
struct GrpcServerState {
  /// grpc.health.v1 status of "" and "ratelimit".
  std::atomic<bool> serving{false};
  bool reflection = false;
};

/// Which rate-limit method a call is (its request and response messages): Envoy's
/// ShouldRateLimit, or one of Kuadrant's kuadrant.service.ratelimit.v1.RateLimitService.
enum class RlsCall {
  kShouldRateLimit,
  kKuadrantCheck,
  kKuadrantReport,
  kKuadrantReserve,
  kKuadrantCommit,
};

/// What the connection hands to the service above it: the unary rate-limit calls (RlsCall),
/// whole.
class GrpcCallHandler {
 public:
  virtual ~GrpcCallHandler() = default;
  /// A call's request message (protobuf bytes, unframed) arrived whole and within its
  /// deadline (`deadline`: its grpc-timeout, if any). Answer with GrpcConnection::reply() or
  /// fail(), now or later, unless onCallAbandoned() comes first. `message` is valid during
  /// the call only.
  virtual void onCall(std::int32_t stream, std::string_view message,
                      std::optional<std::chrono::steady_clock::time_point> deadline) = 0;
  /// A call given to onCall() and not answered is over: DEADLINE_EXCEEDED (its deadline
  /// passed; the client got that status) or CANCELLED (RST_STREAM, connection lost).
  virtual void onCallAbandoned(std::int32_t stream, StatusCode code) = 0;
  /// A ShouldRateLimit call answered by the transport before reaching onCall() (past its
  /// deadline, too large, badly framed).
  virtual void onCallRefused(StatusCode code) = 0;
};

class GrpcConnection : private Http2Handler {
 public:
  using Clock = std::chrono::steady_clock;

  GrpcConnection(GrpcCallHandler& handler, const GrpcServerState& state, GrpcLimits limits,
                 Clock::time_point now);
  ~GrpcConnection() override;
  GrpcConnection(const GrpcConnection&) = delete;
  GrpcConnection& operator=(const GrpcConnection&) = delete;

  /// Bytes read from the client. False: the connection is beyond saving (a protocol error,
  /// a flood); what output() holds then (a GOAWAY) should still be written before closing.
  bool receive(std::string_view bytes, Clock::time_point now);

  /// Appends what is to be sent (frames) to `out`.
  void output(std::string& out);

  /// Answers the call `stream` with a response message (protobuf bytes) and status OK;
  /// `degraded` adds the trailer x-sluice-degraded: true. A stream that is gone is ignored.
  void reply(std::int32_t stream, std::string_view message, bool degraded);
  /// The same with a serialised message already behind its 5-byte gRPC prefix in `framed`
  /// (copied once, into the frames to send).
  void replyFramed(std::int32_t stream, std::string_view framed, bool degraded);
  /// Answers the call `stream` with an error status (Trailers-Only).
  void fail(std::int32_t stream, StatusCode code, std::string_view message);

  /// Whether the call `stream` is still waiting for its answer.
  bool waiting(std::int32_t stream) const;
  /// The method of the call `stream` (given to onCall()); kShouldRateLimit when gone.
  RlsCall callOf(std::int32_t stream) const;

  /// When onTimer() must run next (a call's deadline), if ever.
  std::optional<Clock::time_point> nextTimer() const;
  /// Answers DEADLINE_EXCEEDED to the calls whose deadline has passed.
  void onTimer(Clock::time_point now);

  /// Graceful end: GOAWAY (NO_ERROR), the calls already received are served, none is
  /// accepted after; done() once they are answered.
  void goAway();
  /// GOAWAY with an error (ENHANCE_YOUR_CALM...): nothing more is served.
  void terminate(std::uint32_t http2_error);
  /// The health status changed: every Watch stream gets it.
  void healthChanged();

  /// Nothing more to read or write: close the socket (after writing output()).
  bool done() const;
  /// Why receive() ended the connection (a protocol error, a flood), "" otherwise.
  const std::string& error() const { return session_.error(); }
  /// Calls received and not answered, Watch and reflection streams included.
  std::size_t openStreams() const { return streams_.size(); }

 private:
  struct Stream;

  // The HTTP/2 session's events (Http2Handler).
  void* onStreamOpen(std::int32_t id) override;
  /// One field of a request's header block (grpc_request_headers.cpp).
  void onField(void* stream, std::string_view name, std::string_view value) override;
  void onHeadersEnd(void* stream, bool end_stream) override;
  void onData(void* stream, std::string_view bytes, bool end_stream) override;
  void onStreamClose(void* stream, std::int32_t id, H2Error code) override;
  void onPing() override;
  void onGoAway() override;

  /// The stream `id`, if open: the last one found (inline, grpc_stream.hpp), else the
  /// session's.
  Stream* streamOf(std::int32_t id) const;
  Stream* lookUpStream(std::int32_t id) const;
  void release(Stream* stream);
  void onHeadersDone(Stream& stream, bool end_stream, Clock::time_point now);
  void onRequestEnd(Stream& stream, Clock::time_point now);
  void serveHealthCheck(Stream& stream, std::string_view message);
  void serveReflection(Stream& stream, std::string_view message);
  void sendMessage(Stream& stream, std::string_view message);
  void submitHeadersOnce(Stream& stream);
  /// Answers `stream` with `framed` (messages behind their gRPC prefixes) and status OK (the
  /// trailers follow the data: x-sluice-degraded if `degraded` is set).
  void answerOk(Stream& stream, std::string_view framed);
  void finishStream(Stream& stream, StatusCode code, std::string_view message);
  void refuse(Stream& stream, StatusCode code, std::string_view message);
  void onRequestData(Stream& stream, std::string_view data);

  GrpcCallHandler& handler_;
  const GrpcServerState& state_;
  GrpcLimits limits_;
  Http2Session session_;
  /// The stream the last lookup found (the session's events come stream by stream, and its
  /// own lookup is a search): cleared when it is released.
  mutable Stream* last_stream_ = nullptr;
  std::vector<std::unique_ptr<Stream>> streams_;  // open streams, unordered
  /// Recycled streams, to serve a call without allocating: a list through Stream::next_spare
  /// (owned), so that taking one touches the stream only, not a vector's buffer as well.
  Stream* spare_ = nullptr;
  std::size_t spare_count_ = 0;
  std::size_t buffered_bytes_ = 0;  // request bytes held by all streams
  std::string framing_;  // sendMessage()'s message behind its prefix, kept for its capacity
  std::optional<Clock::time_point> last_ping_;
  int ping_strikes_ = 0;
  bool reset_ping_strikes_ = false;  // a response went out since the last client PING
  bool going_away_ = false;
  bool goaway_seen_ = false;  // a GOAWAY was sent or received
  bool fatal_ = false;
  Clock::time_point now_;
};

/// Parses a grpc-timeout value ("100m", "20S": at most 8 digits and a unit of H M S m u n);
/// nullopt when malformed. Longer than ten years counts as ten years.
std::optional<std::chrono::nanoseconds> parseGrpcTimeout(std::string_view value);

/// grpc-message's percent-encoding (grpc/doc/PROTOCOL-HTTP2.md).
std::string percentEncode(std::string_view message);

}  // namespace sluice::grpc
