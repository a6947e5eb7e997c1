#include "grpc/grpc_connection.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "grpc/grpc_stream.hpp"
#include "grpc/hpack.hpp"
#include "grpc/proto_wire.hpp"

namespace sluice::grpc {
namespace {

using wire::putFrameHeader;

/// Closed streams a connection keeps to serve its next calls without allocating.
constexpr std::size_t kSpareStreams = 16;
/// Request bytes one connection may hold across its streams, in messages of the largest size.
constexpr std::size_t kBufferedMessages = 4;
/// grpc-go's and grpc core's window without calls (PermitWithoutStream false).
constexpr auto kIdlePingInterval = std::chrono::hours(2);
constexpr std::size_t kPrefixBytes = wire::kFrameHeaderBytes;

}  // namespace

const char* statusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kCancelled:
      return "CANCELLED";
    case StatusCode::kUnknown:
      return "UNKNOWN";
    case StatusCode::kInvalidArgument:
      return "INVALID_ARGUMENT";
    case StatusCode::kDeadlineExceeded:
      return "DEADLINE_EXCEEDED";
    case StatusCode::kNotFound:
      return "NOT_FOUND";
    case StatusCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    case StatusCode::kUnimplemented:
      return "UNIMPLEMENTED";
    case StatusCode::kInternal:
      return "INTERNAL";
    case StatusCode::kUnavailable:
      return "UNAVAILABLE";
  }
  return "UNKNOWN";
}

std::string percentEncode(std::string_view message) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(message.size());
  for (char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte > 0x7e || byte == '%') {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xf]);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

namespace {

/// The header blocks of the usual answers, the same every time (HPACK without the dynamic
/// table).
const std::string& okHeadersBlock() {
  static const std::string block = [] {
    std::string out;
    hpack::putIndexed(out, 8);  // :status: 200
    hpack::putLiteral(out, hpack::staticNameIndex("content-type"), "content-type",
                      "application/grpc");
    return out;
  }();
  return block;
}

const std::string& okTrailersBlock() {
  static const std::string block = [] {
    std::string out;
    hpack::putLiteral(out, 0, "grpc-status", "0");
    return out;
  }();
  return block;
}

/// grpc-status, grpc-message (percent-encoded) and x-sluice-degraded, appended to `out`.
void appendStatus(std::string& out, StatusCode code, std::string_view message, bool degraded) {
  hpack::putLiteral(out, 0, "grpc-status", std::to_string(static_cast<int>(code)));
  if (!message.empty()) {
    hpack::putLiteral(out, 0, "grpc-message", percentEncode(message));
  }
  if (degraded) {
    hpack::putLiteral(out, 0, "x-sluice-degraded", "true");
  }
}

}  // namespace

GrpcConnection::GrpcConnection(GrpcCallHandler& handler, const GrpcServerState& state,
                               GrpcLimits limits, Clock::time_point now)
    : handler_(handler),
      state_(state),
      limits_(limits),
      session_(*this, Http2Limits{limits.max_concurrent_streams, limits.max_header_list_bytes}),
      now_(now) {}

GrpcConnection::~GrpcConnection() {
  while (spare_ != nullptr) {
    std::unique_ptr<Stream> owned(spare_);
    spare_ = owned->next_spare;
  }
}

void* GrpcConnection::onStreamOpen(std::int32_t id) {
  std::unique_ptr<Stream> stream;
  if (spare_ == nullptr) {
    stream = std::make_unique<Stream>();
  } else {
    stream.reset(spare_);
    spare_ = stream->next_spare;
    --spare_count_;
  }
  stream->reset(id);
  stream->index = streams_.size();
  stream->request_until = now_ + limits_.request_timeout;
  last_stream_ = stream.get();
  streams_.push_back(std::move(stream));
  return last_stream_;
}

void GrpcConnection::onHeadersEnd(void* stream, bool end_stream) {
  onHeadersDone(*static_cast<Stream*>(stream), end_stream, now_);
}

void GrpcConnection::onData(void* user, std::string_view bytes, bool end_stream) {
  auto& stream = *static_cast<Stream*>(user);
  if (!bytes.empty()) {
    onRequestData(stream, bytes);
  }
  if (end_stream) {
    onRequestEnd(stream, now_);
  }
}

void GrpcConnection::onStreamClose(void* user, std::int32_t id, H2Error /*code*/) {
  auto* stream = static_cast<Stream*>(user);
  if (stream->dispatched) {
    stream->dispatched = false;
    handler_.onCallAbandoned(id, StatusCode::kCancelled);
  }
  release(stream);
}

void GrpcConnection::onGoAway() { goaway_seen_ = true; }

bool GrpcConnection::receive(std::string_view bytes, Clock::time_point now) {
  now_ = now;
  if (fatal_) {
    return false;
  }
  if (!session_.receive(bytes, now)) {
    fatal_ = true;
  }
  return !fatal_;
}

void GrpcConnection::output(std::string& out) { session_.output(out); }

bool GrpcConnection::done() const {
  if (fatal_ || session_.fatal()) {
    return !session_.hasOutput();
  }
  // Until a GOAWAY goes either way, the connection reads on.
  return (going_away_ || goaway_seen_) && session_.openStreams() == 0 && !session_.hasOutput();
}

GrpcConnection::Stream* GrpcConnection::lookUpStream(std::int32_t id) const {
  auto* stream = static_cast<Stream*>(session_.streamUser(id));
  if (stream != nullptr) {
    last_stream_ = stream;
  }
  return stream;
}

void GrpcConnection::release(Stream* stream) {
  if (last_stream_ == stream) {
    last_stream_ = nullptr;
  }
  buffered_bytes_ -= std::min(buffered_bytes_, stream->in.size());
  const std::size_t index = stream->index;
  std::unique_ptr<Stream> owned = std::move(streams_[index]);
  if (index + 1 != streams_.size()) {
    streams_[index] = std::move(streams_.back());
    streams_[index]->index = index;
  }
  streams_.pop_back();
  // A few spares serve the usual load; a burst's streams go back to the heap.
  if (spare_count_ < kSpareStreams && owned->in.capacity() <= 4096) {
    owned->next_spare = spare_;
    spare_ = owned.release();
    ++spare_count_;
  }
}

void GrpcConnection::onHeadersDone(Stream& stream, bool end_stream, Clock::time_point now) {
  stream.headers_done = true;
  if (stream.early_status == StatusCode::kOk &&
      (stream.malformed || (stream.pseudo & kRequiredPseudo) != kRequiredPseudo)) {
    // A malformed request (RFC 9113 section 8.1.1): stream error PROTOCOL_ERROR.
    stream.answered = true;
    session_.submitRstStream(stream.id, H2Error::kProtocolError);
    return;
  }
  stream.method = stream.path_method;
  if (stream.method == Method::kReflection && !state_.reflection) {
    stream.method = Method::kUnknown;
  }
  if (stream.not_grpc || stream.bad_method) {
    // Not a gRPC call: an HTTP status of its own (gRPC's HTTP/2 protocol says 415).
    stream.answered = true;
    std::string block;
    hpack::putLiteral(block, hpack::staticNameIndex(":status"), ":status",
                      stream.bad_method ? "405" : "415");
    session_.submitHeaders(stream.id, block, true);
    return;
  }
  if (stream.early_status != StatusCode::kOk) {
    refuse(stream, stream.early_status, stream.early_message);
    return;
  }
  if (stream.method == Method::kUnknown) {
    refuse(stream, StatusCode::kUnimplemented, "unknown method " + stream.path);
    return;
  }
  if (stream.deadline && *stream.deadline <= now) {
    refuse(stream, StatusCode::kDeadlineExceeded, "deadline passed before the request came");
    return;
  }
  if (end_stream) {
    onRequestEnd(stream, now);
  }
}

void GrpcConnection::onRequestData(Stream& stream, std::string_view data) {
  const std::size_t length = data.size();
  if (stream.answered) {
    return;  // refused: what follows is dropped (flow control is still credited)
  }
  if (stream.in.size() + length > limits_.max_message_bytes + kPrefixBytes ||
      buffered_bytes_ + length > kBufferedMessages * (limits_.max_message_bytes + kPrefixBytes)) {
    refuse(stream, StatusCode::kResourceExhausted,
           "request message larger than " + std::to_string(limits_.max_message_bytes) + " bytes");
    return;
  }
  stream.in.append(data);
  buffered_bytes_ += length;
  if (stream.method != Method::kReflection) {
    return;
  }
  // Reflection is a bidirectional stream: each whole request message is answered at once.
  std::size_t used = 0;
  while (stream.in.size() - used >= kPrefixBytes) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(stream.in.data() + used);
    const std::size_t size = (std::size_t{p[1]} << 24) | (std::size_t{p[2]} << 16) |
                             (std::size_t{p[3]} << 8) | std::size_t{p[4]};
    if (p[0] != 0) {
      refuse(stream, StatusCode::kUnimplemented, "compressed messages are not supported");
      return;
    }
    if (stream.in.size() - used - kPrefixBytes < size) {
      break;
    }
    serveReflection(stream, std::string_view(stream.in).substr(used + kPrefixBytes, size));
    used += kPrefixBytes + size;
  }
  stream.in.erase(0, used);
  buffered_bytes_ -= std::min(buffered_bytes_, used);
}

void GrpcConnection::onRequestEnd(Stream& stream, Clock::time_point now) {
  if (stream.request_done) {
    return;
  }
  stream.request_done = true;
  stream.request_until.reset();
  if (stream.answered) {
    return;
  }
  if (stream.method == Method::kReflection) {
    finishStream(stream, StatusCode::kOk, {});
    return;
  }
  if (stream.deadline && *stream.deadline <= now) {
    refuse(stream, StatusCode::kDeadlineExceeded, "deadline passed before the request came");
    return;
  }
  // A unary call: exactly one message.
  const std::string_view in = stream.in;
  if (in.size() < kPrefixBytes) {
    refuse(stream, StatusCode::kInternal, in.empty() ? "no request message" : "truncated message");
    return;
  }
  const auto* p = reinterpret_cast<const std::uint8_t*>(in.data());
  const std::size_t size = (std::size_t{p[1]} << 24) | (std::size_t{p[2]} << 16) |
                           (std::size_t{p[3]} << 8) | std::size_t{p[4]};
  if (p[0] != 0) {
    refuse(stream, p[0] == 1 ? StatusCode::kUnimplemented : StatusCode::kInternal,
           p[0] == 1 ? "compressed messages are not supported (grpc-accept-encoding: identity)"
                     : "bad message flags");
    return;
  }
  if (in.size() - kPrefixBytes != size) {
    refuse(stream, StatusCode::kInternal,
           in.size() - kPrefixBytes < size ? "truncated message"
                                           : "more than one request message in a unary call");
    return;
  }
  const std::string_view message = in.substr(kPrefixBytes);
  switch (stream.method) {
    case Method::kRls:
      stream.dispatched = true;
      handler_.onCall(stream.id, message, stream.deadline);
      return;
    case Method::kHealthCheck:
    case Method::kHealthWatch:
      serveHealthCheck(stream, message);
      return;
    default:
      return;
  }
}

void GrpcConnection::submitHeadersOnce(Stream& stream) {
  if (stream.headers_sent) {
    return;
  }
  stream.headers_sent = true;
  session_.submitHeaders(stream.id, okHeadersBlock(), false);
}

void GrpcConnection::sendMessage(Stream& stream, std::string_view message) {
  framing_.clear();
  wire::putFrameHeader(framing_, message.size());
  framing_.append(message);
  submitHeadersOnce(stream);
  session_.submitData(stream.id, framing_);
  reset_ping_strikes_ = true;
}

[[gnu::cold]] void GrpcConnection::finishStream(Stream& stream, StatusCode code,
                                                std::string_view message) {
  if (stream.answered) {
    return;
  }
  stream.answered = true;
  reset_ping_strikes_ = true;
  std::string block;
  if (!stream.headers_sent) {
    // Trailers-Only: one HEADERS frame with END_STREAM.
    stream.headers_sent = true;
    block = okHeadersBlock();
    appendStatus(block, code, message, false);
    session_.submitHeaders(stream.id, block, true);
    return;
  }
  appendStatus(block, code, message, false);
  session_.submitTrailers(stream.id, block);
}

[[gnu::cold]] void GrpcConnection::refuse(Stream& stream, StatusCode code,
                                          std::string_view message) {
  if (stream.answered) {
    return;
  }
  if (stream.method == Method::kRls) {
    handler_.onCallRefused(code);
  }
  finishStream(stream, code, message);
}

void GrpcConnection::reply(std::int32_t id, std::string_view message, bool degraded) {
  std::string framed;
  framed.reserve(kPrefixBytes + message.size());
  putFrameHeader(framed, message.size());
  framed.append(message);
  replyFramed(id, framed, degraded);
}

void GrpcConnection::replyFramed(std::int32_t id, std::string_view framed, bool degraded) {
  Stream* stream = streamOf(id);
  if (stream == nullptr || !stream->dispatched || stream->answered) {
    return;
  }
  stream->dispatched = false;
  stream->degraded = degraded;
  answerOk(*stream, framed);
}

void GrpcConnection::answerOk(Stream& stream, std::string_view framed) {
  stream.answered = true;
  reset_ping_strikes_ = true;
  submitHeadersOnce(stream);
  session_.submitData(stream.id, framed);
  if (!stream.degraded) [[likely]] {
    session_.submitTrailers(stream.id, okTrailersBlock());
    return;
  }
  std::string block;
  appendStatus(block, StatusCode::kOk, {}, true);
  session_.submitTrailers(stream.id, block);
}

void GrpcConnection::fail(std::int32_t id, StatusCode code, std::string_view message) {
  Stream* stream = streamOf(id);
  if (stream == nullptr || !stream->dispatched || stream->answered) {
    return;
  }
  stream->dispatched = false;
  finishStream(*stream, code, message);
}

RlsCall GrpcConnection::callOf(std::int32_t id) const {
  const Stream* stream = streamOf(id);
  return stream == nullptr ? RlsCall::kShouldRateLimit : stream->call;
}

bool GrpcConnection::waiting(std::int32_t id) const {
  const Stream* stream = streamOf(id);
  return stream != nullptr && stream->dispatched && !stream->answered;
}

std::optional<GrpcConnection::Clock::time_point> GrpcConnection::nextTimer() const {
  std::optional<Clock::time_point> next;
  for (const auto& stream : streams_) {
    if (stream->answered) {
      continue;
    }
    for (const auto& when : {stream->deadline, stream->request_until}) {
      if (when && (!next || *when < *next)) {
        next = when;
      }
    }
  }
  return next;
}

void GrpcConnection::onTimer(Clock::time_point now) {
  now_ = now;
  // finishStream() may close streams (reordering streams_): collect the ids first.
  std::vector<std::pair<std::int32_t, bool>> expired;  // id, request still arriving
  for (const auto& stream : streams_) {
    if (stream->answered) {
      continue;
    }
    if (stream->deadline && *stream->deadline <= now) {
      expired.emplace_back(stream->id, false);
    } else if (stream->request_until && *stream->request_until <= now) {
      expired.emplace_back(stream->id, true);
    }
  }
  for (auto [id, arriving] : expired) {
    Stream* stream = streamOf(id);
    if (stream == nullptr || stream->answered) {
      continue;
    }
    const std::string message = arriving
                                    ? "request not received whole within " +
                                          std::to_string(limits_.request_timeout.count()) + " ms"
                                    : "deadline exceeded";
    if (stream->dispatched) {
      stream->dispatched = false;
      handler_.onCallAbandoned(id, StatusCode::kDeadlineExceeded);
      finishStream(*stream, StatusCode::kDeadlineExceeded, message);
    } else {
      refuse(*stream, StatusCode::kDeadlineExceeded, message);
    }
  }
}

void GrpcConnection::onPing() {
  if (reset_ping_strikes_) {
    reset_ping_strikes_ = false;
    ping_strikes_ = 0;
    last_ping_ = now_;
    return;
  }
  const auto interval =
      streams_.empty() ? std::chrono::duration_cast<Clock::duration>(kIdlePingInterval)
                       : std::chrono::duration_cast<Clock::duration>(limits_.min_ping_interval);
  if (last_ping_ && now_ - *last_ping_ < interval && ++ping_strikes_ > limits_.max_ping_strikes) {
    terminate(static_cast<std::uint32_t>(H2Error::kEnhanceYourCalm));
  }
  last_ping_ = now_;
}

void GrpcConnection::goAway() {
  if (going_away_ || fatal_) {
    return;
  }
  going_away_ = true;
  // Watch streams would keep the connection open for ever.
  std::vector<std::int32_t> watches;
  for (const auto& stream : streams_) {
    if (stream->method == Method::kHealthWatch && !stream->answered) {
      watches.push_back(stream->id);
    }
  }
  for (std::int32_t id : watches) {
    if (Stream* stream = streamOf(id)) {
      finishStream(*stream, StatusCode::kUnavailable, "the server is going away");
    }
  }
  session_.submitGoAway(H2Error::kNoError);
}

void GrpcConnection::terminate(std::uint32_t http2_error) {
  if (fatal_) {
    return;
  }
  fatal_ = true;
  const auto code = static_cast<H2Error>(http2_error);
  session_.terminate(code, code == H2Error::kEnhanceYourCalm ? "too_many_pings" : "");
}

}  // namespace sluice::grpc
