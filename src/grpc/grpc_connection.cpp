#include "grpc/grpc_connection.hpp"

#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <string>

#include "grpc/grpc_stream.hpp"
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

nghttp2_nv constantHeader(std::string_view name, std::string_view value) {
  return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
          value.size(), NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE};
}

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

/// nghttp2's callbacks, in the connection's terms.
struct Callbacks {
  static GrpcConnection& self(void* user) { return *static_cast<GrpcConnection*>(user); }
  static GrpcConnection::Stream* streamOf(void* user, std::int32_t id) {
    return self(user).streamOf(id);
  }

  static int onBeginHeaders(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    auto& c = self(user);
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
      return 0;
    }
    if (c.streams_.size() >= c.limits_.max_concurrent_streams) {
      // Before the client has our SETTINGS, nghttp2 does not count for us.
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                NGHTTP2_REFUSED_STREAM);
      return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    std::unique_ptr<GrpcConnection::Stream> stream;
    if (c.spare_ == nullptr) {
      stream = std::make_unique<GrpcConnection::Stream>();
    } else {
      stream.reset(c.spare_);
      c.spare_ = stream->next_spare;
      --c.spare_count_;
    }
    stream->reset(frame->hd.stream_id);
    stream->index = c.streams_.size();
    stream->request_until = c.now_ + c.limits_.request_timeout;
    nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, stream.get());
    c.last_stream_ = stream.get();
    c.streams_.push_back(std::move(stream));
    return 0;
  }

  static int onFrameRecv(nghttp2_session* /*session*/, const nghttp2_frame* frame, void* user) {
    auto& c = self(user);
    switch (frame->hd.type) {
      case NGHTTP2_HEADERS: {
        auto* stream = streamOf(user, frame->hd.stream_id);
        if (stream == nullptr) {
          return 0;
        }
        const bool end_stream = (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
        if (!stream->headers_done) {
          c.onHeadersDone(*stream, end_stream, c.now_);
        } else if (end_stream) {
          c.onRequestEnd(*stream, c.now_);
        }
        return 0;
      }
      case NGHTTP2_DATA: {
        auto* stream = streamOf(user, frame->hd.stream_id);
        if (stream != nullptr && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) {
          c.onRequestEnd(*stream, c.now_);
        }
        return 0;
      }
      case NGHTTP2_PING:
        if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0) {
          c.onPing();
        }
        return 0;
      case NGHTTP2_GOAWAY:
        c.goaway_seen_ = true;
        return 0;
      default:
        return 0;
    }
  }

  static int onDataChunk(nghttp2_session* /*session*/, std::uint8_t /*flags*/, std::int32_t id,
                         const std::uint8_t* data, std::size_t length, void* user) {
    auto& c = self(user);
    auto* stream = streamOf(user, id);
    if (stream != nullptr) {
      c.onRequestData(*stream, data, length);
    }
    return 0;
  }

  static int onStreamClose(nghttp2_session* /*session*/, std::int32_t id, std::uint32_t /*error*/,
                           void* user) {
    auto& c = self(user);
    auto* stream = streamOf(user, id);
    if (stream == nullptr) {
      return 0;
    }
    if (stream->dispatched) {
      stream->dispatched = false;
      c.handler_.onCallAbandoned(id, StatusCode::kCancelled);
    }
    // nghttp2 frees its stream (and the user data with it) once this returns: closed streams
    // are not kept (nghttp2_option_set_no_closed_streams).
    c.release(stream);
    return 0;
  }

  static int onFrameSend(nghttp2_session* session, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_GOAWAY) {
      self(user).goaway_seen_ = true;
      return 0;
    }
    if ((frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) ||
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) == 0) {
      return 0;
    }
    auto* stream = streamOf(user, frame->hd.stream_id);
    if (stream != nullptr && stream->reset_after_end && !stream->request_done) {
      // The answer is final and sent: the rest of the request is not wanted (RST_STREAM
      // NO_ERROR after the trailers, as gRPC servers do).
      stream->reset_after_end = false;
      nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    }
    return 0;
  }

  static ssize_t readOut(nghttp2_session* session, std::int32_t id, std::uint8_t* buffer,
                         std::size_t length, std::uint32_t* flags, nghttp2_data_source* source,
                         void* user) {
    auto& c = self(user);
    auto* stream = static_cast<GrpcConnection::Stream*>(source->ptr);
    const std::size_t n = std::min(length, stream->out.size() - stream->out_pos);
    std::memcpy(buffer, stream->out.data() + stream->out_pos, n);
    stream->out_pos += n;
    if (stream->out_pos == stream->out.size()) {
      stream->out.clear();
      stream->out_pos = 0;
      if (stream->trailers_due) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (stream->final_status == StatusCode::kOk && stream->status_text.empty() &&
            !stream->degraded) {
          // The usual answer's trailers, the same every time (nghttp2 copies them).
          static const std::array<nghttp2_nv, 1> kOkTrailers{constantHeader("grpc-status", "0")};
          nghttp2_submit_trailer(session, id, kOkTrailers.data(), kOkTrailers.size());
          c.reset_ping_strikes_ = true;
          return static_cast<ssize_t>(n);
        }
        std::array<nghttp2_nv, 3> trailers{};
        std::size_t count = 0;
        const auto code = static_cast<unsigned>(stream->final_status);
        std::size_t digits = 0;
        if (code >= 10) {
          stream->status_digits[digits++] = static_cast<char>('0' + code / 10);
        }
        stream->status_digits[digits++] = static_cast<char>('0' + code % 10);
        trailers[count++] =
            constantHeader("grpc-status", std::string_view(stream->status_digits.data(), digits));
        if (!stream->status_text.empty()) {
          trailers[count++] = constantHeader("grpc-message", stream->status_text);
        }
        if (stream->degraded) {
          trailers[count++] = constantHeader("x-sluice-degraded", "true");
        }
        nghttp2_submit_trailer(session, id, trailers.data(), count);
      } else if (n == 0) {
        stream->data_deferred = true;
        return NGHTTP2_ERR_DEFERRED;
      }
    }
    c.reset_ping_strikes_ = true;
    return static_cast<ssize_t>(n);
  }
};

GrpcConnection::GrpcConnection(GrpcCallHandler& handler, const GrpcServerState& state,
                               GrpcLimits limits, Clock::time_point now)
    : handler_(handler), state_(state), limits_(limits), now_(now) {
  nghttp2_session_callbacks* callbacks = nullptr;
  nghttp2_session_callbacks_new(&callbacks);
  nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, Callbacks::onBeginHeaders);
  nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeaderField);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, Callbacks::onFrameRecv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, Callbacks::onDataChunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, Callbacks::onStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, Callbacks::onFrameSend);
  nghttp2_option* option = nullptr;
  nghttp2_option_new(&option);
  // Flood bounds (nghttp2's own defaults, stated): queued PING/SETTINGS acks, SETTINGS
  // entries, streams reset by the client per second (rapid reset), CONTINUATION frames.
  nghttp2_option_set_max_outbound_ack(option, 1000);
  nghttp2_option_set_max_settings(option, 32);
  nghttp2_option_set_stream_reset_rate_limit(option, 1000, 33);
  nghttp2_option_set_max_continuations(option, 8);
  // The request checks nghttp2's HTTP messaging layer makes are the ones onHeaderField()
  // makes (docs/envoy.md, "The gRPC transport"): what a gRPC server
  // acts on, without checking every character of every header a second time.
  nghttp2_option_set_no_http_messaging(option, 1);
  // A closed stream is forgotten at once (kept, it would only serve RFC 7540 priorities,
  // which SETTINGS_NO_RFC7540_PRIORITIES below turns off).
  nghttp2_option_set_no_closed_streams(option, 1);
  nghttp2_session_server_new3(&session_, callbacks, this, option, pool_.mem());
  nghttp2_option_del(option);
  nghttp2_session_callbacks_del(callbacks);
  const std::array<nghttp2_settings_entry, 4> settings{{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits_.max_concurrent_streams},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits_.max_header_list_bytes},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
      {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
  }};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 4 << 20);
}

GrpcConnection::~GrpcConnection() {
  nghttp2_session_del(session_);
  while (spare_ != nullptr) {
    std::unique_ptr<Stream> owned(spare_);
    spare_ = owned->next_spare;
  }
}

bool GrpcConnection::receive(std::string_view bytes, Clock::time_point now) {
  now_ = now;
  if (fatal_) {
    return false;
  }
  const ssize_t used = nghttp2_session_mem_recv(
      session_, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  if (used < 0) {
    fatal_ = true;
    if (used != NGHTTP2_ERR_BAD_CLIENT_MAGIC && used != NGHTTP2_ERR_FLOODED) {
      nghttp2_session_terminate_session(session_, NGHTTP2_PROTOCOL_ERROR);
    }
    return false;
  }
  return !fatal_;
}

void GrpcConnection::output(std::string& out) {
  for (;;) {
    const std::uint8_t* data = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &data);
    if (n <= 0) {
      if (n < 0) {
        fatal_ = true;
      }
      return;
    }
    out.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  }
}

bool GrpcConnection::done() const {
  if (fatal_) {
    return nghttp2_session_want_write(session_) == 0;
  }
  // Until a GOAWAY goes either way, nghttp2 wants to read (nghttp2_session_want_read()).
  return (going_away_ || goaway_seen_) && nghttp2_session_want_read(session_) == 0 &&
         nghttp2_session_want_write(session_) == 0;
}

GrpcConnection::Stream* GrpcConnection::lookUpStream(std::int32_t id) const {
  auto* stream = static_cast<Stream*>(nghttp2_session_get_stream_user_data(session_, id));
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
  if (spare_count_ < kSpareStreams && owned->in.capacity() <= 4096 &&
      owned->out.capacity() <= 4096) {
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
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream.id, NGHTTP2_PROTOCOL_ERROR);
    return;
  }
  stream.method = stream.path_method;
  if (stream.method == Method::kReflection && !state_.reflection) {
    stream.method = Method::kUnknown;
  }
  if (stream.not_grpc || stream.bad_method) {
    // Not a gRPC call: an HTTP status of its own (gRPC's HTTP/2 protocol says 415).
    stream.answered = true;
    static constexpr std::string_view kNotGrpc = "415";
    static constexpr std::string_view kNotPost = "405";
    std::array<nghttp2_nv, 1> headers{
        constantHeader(":status", stream.bad_method ? kNotPost : kNotGrpc)};
    nghttp2_submit_response(session_, stream.id, headers.data(), headers.size(), nullptr);
    stream.reset_after_end = !end_stream;
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

void GrpcConnection::onRequestData(Stream& stream, const std::uint8_t* data, std::size_t length) {
  if (stream.answered) {
    return;  // refused: what follows is dropped (flow control is still credited)
  }
  if (stream.in.size() + length > limits_.max_message_bytes + kPrefixBytes ||
      buffered_bytes_ + length > kBufferedMessages * (limits_.max_message_bytes + kPrefixBytes)) {
    refuse(stream, StatusCode::kResourceExhausted,
           "request message larger than " + std::to_string(limits_.max_message_bytes) + " bytes");
    return;
  }
  stream.in.append(reinterpret_cast<const char*>(data), length);
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
  const std::array<nghttp2_nv, 2> headers{constantHeader(":status", "200"),
                                          constantHeader("content-type", "application/grpc")};
  nghttp2_data_provider provider{};
  provider.source.ptr = &stream;
  provider.read_callback = Callbacks::readOut;
  nghttp2_submit_response(session_, stream.id, headers.data(), headers.size(), &provider);
}

void GrpcConnection::sendMessage(Stream& stream, std::string_view message) {
  wire::putFrameHeader(stream.out, message.size());
  stream.out.append(message);
  submitHeadersOnce(stream);
  if (stream.data_deferred) {
    stream.data_deferred = false;
    nghttp2_session_resume_data(session_, stream.id);
  }
}

[[gnu::cold]] void GrpcConnection::finishStream(Stream& stream, StatusCode code,
                                                std::string_view message) {
  if (stream.answered) {
    return;
  }
  stream.answered = true;
  if (!stream.headers_sent) {
    // Trailers-Only: one HEADERS frame with END_STREAM.
    stream.final_status = code;
    const auto digits = std::to_string(static_cast<int>(code));
    std::memcpy(stream.status_digits.data(), digits.data(), digits.size());
    if (message.empty()) {
      stream.status_text.clear();
    } else {
      stream.status_text = percentEncode(message);
    }
    std::array<nghttp2_nv, 4> headers{};
    std::size_t count = 0;
    headers[count++] = constantHeader(":status", "200");
    headers[count++] = constantHeader("content-type", "application/grpc");
    headers[count++] =
        constantHeader("grpc-status", std::string_view(stream.status_digits.data(), digits.size()));
    if (!stream.status_text.empty()) {
      headers[count++] = constantHeader("grpc-message", stream.status_text);
    }
    nghttp2_submit_response(session_, stream.id, headers.data(), count, nullptr);
    reset_ping_strikes_ = true;
  } else {
    stream.final_status = code;
    if (message.empty()) {
      stream.status_text.clear();
    } else {
      stream.status_text = percentEncode(message);
    }
    stream.trailers_due = true;
    if (stream.data_deferred) {
      stream.data_deferred = false;
      nghttp2_session_resume_data(session_, stream.id);
    }
  }
  stream.reset_after_end = !stream.request_done;
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
  replyFramed(id, std::move(framed), degraded);
}

void GrpcConnection::replyFramed(std::int32_t id, std::string&& framed, bool degraded) {
  Stream* stream = streamOf(id);
  if (stream == nullptr || !stream->dispatched || stream->answered) {
    return;
  }
  stream->dispatched = false;
  if (stream->out.empty()) {
    stream->out.swap(framed);
  } else {
    stream->out.append(framed);
  }
  stream->degraded = degraded;
  answerOk(*stream);
}

void GrpcConnection::answerOk(Stream& stream) {
  stream.answered = true;
  stream.out_pos = 0;
  stream.final_status = StatusCode::kOk;
  stream.trailers_due = true;
  stream.reset_after_end = !stream.request_done;
  if (!stream.headers_sent) {
    submitHeadersOnce(stream);
  } else if (stream.data_deferred) {
    stream.data_deferred = false;
    nghttp2_session_resume_data(session_, stream.id);
  }
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
    terminate(NGHTTP2_ENHANCE_YOUR_CALM);
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
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
}

void GrpcConnection::terminate(std::uint32_t http2_error) {
  if (fatal_) {
    return;
  }
  fatal_ = true;
  static constexpr std::string_view kTooManyPings = "too_many_pings";
  const bool calm = http2_error == NGHTTP2_ENHANCE_YOUR_CALM;
  nghttp2_submit_goaway(
      session_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(session_), http2_error,
      calm ? reinterpret_cast<const std::uint8_t*>(kTooManyPings.data()) : nullptr,
      calm ? kTooManyPings.size() : 0);
}

}  // namespace sluice::grpc
