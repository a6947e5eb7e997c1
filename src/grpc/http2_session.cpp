#include "grpc/http2_session.hpp"

#include <algorithm>
#include <cstring>
#include <string>

namespace sluice::grpc {
namespace {

constexpr std::size_t kFrameHeaderBytes = 9;
/// SETTINGS_MAX_FRAME_SIZE as we leave it (not announced: RFC 9113's initial value).
constexpr std::uint32_t kMaxFrameBytes = 16'384;
constexpr std::int64_t kMaxWindow = 0x7fff'ffff;

using namespace h2;  // the wire constants, used throughout

// The bounds a client meets (nghttp2's defaults, which the server kept before it had its own
// HTTP/2): acks queued ahead of output(), entries of one SETTINGS frame, CONTINUATION frames
// of one header block, and streams reset by the client or for its stream errors (a burst,
// then a rate: "rapid reset" and "MadeYouReset").
constexpr std::size_t kMaxQueuedAcks = 1000;
constexpr std::size_t kMaxSettings = 32;
constexpr int kMaxContinuations = 8;
constexpr double kResetBurst = 1000;
constexpr double kResetsPerSecond = 33;

std::uint32_t read32(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

void put32(std::string& out, std::uint32_t value) {
  const char bytes[4] = {static_cast<char>(value >> 24), static_cast<char>(value >> 16),
                         static_cast<char>(value >> 8), static_cast<char>(value)};
  out.append(bytes, 4);
}

}  // namespace

Http2Session::Http2Session(Http2Handler& handler, const Http2Limits& limits)
    : handler_(handler), limits_(limits), reset_tokens_(kResetBurst) {
  streams_.reserve(8);
  const std::pair<std::uint16_t, std::uint32_t> settings[] = {
      {kMaxConcurrentStreams, limits_.max_concurrent_streams},
      {kMaxHeaderListSize, limits_.max_header_list_bytes},
      {kInitialWindowSize, limits_.stream_window},
      {kNoRfc7540Priorities, 1},
  };
  writeFrameHeader(sizeof(settings) / sizeof(settings[0]) * 6, kSettings, 0, 0);
  for (const auto& [id, value] : settings) {
    out_.push_back(static_cast<char>(id >> 8));
    out_.push_back(static_cast<char>(id));
    put32(out_, value);
  }
  if (limits_.connection_window > 65'535) {
    writeWindowUpdate(0, limits_.connection_window - 65'535);
    conn_recv_window_ = limits_.connection_window;
  }
}

bool Http2Session::receive(std::string_view bytes, Clock::time_point now) {
  now_ = now;
  if (fatal_) {
    return false;
  }
  std::string_view data = bytes;
  const bool buffered = !in_.empty();
  if (buffered) {
    in_.append(bytes);
    data = in_;
  }
  std::size_t pos = preface_seen_ < kClientPreface.size() ? readPreface(data) : 0;
  while (!fatal_ && data.size() - pos >= kFrameHeaderBytes) {
    const auto* p = reinterpret_cast<const unsigned char*>(data.data() + pos);
    const FrameHeader frame{
        (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | std::uint32_t{p[2]}, p[3], p[4],
        static_cast<std::int32_t>(read32(data.substr(pos + 5, 4)) & 0x7fff'ffffU)};
    if (frame.length > kMaxFrameBytes) {
      terminate(H2Error::kFrameSizeError, "frame larger than SETTINGS_MAX_FRAME_SIZE");
      break;
    }
    if (data.size() - pos - kFrameHeaderBytes < frame.length) {
      break;
    }
    if (closed_unreported_ != 0) {
      reportClosed();
    }
    onFrame(frame, data.substr(pos + kFrameHeaderBytes, frame.length));
    pos += kFrameHeaderBytes + frame.length;
  }
  if (fatal_) {
    in_.clear();
  } else if (buffered) {
    in_.erase(0, pos);
  } else if (pos < data.size()) {
    in_.assign(data.substr(pos));
  }
  if (closed_unreported_ != 0) {
    reportClosed();
  }
  return !fatal_;
}

std::size_t Http2Session::readPreface(std::string_view data) {
  const std::size_t n = std::min(data.size(), kClientPreface.size() - preface_seen_);
  if (data.substr(0, n) != kClientPreface.substr(preface_seen_, n)) {
    // Not HTTP/2 with prior knowledge: nothing to answer (RFC 9113 section 3.4).
    fatal_ = true;
    error_ = "bad connection preface";
    return data.size();
  }
  preface_seen_ += n;
  return n;
}

void Http2Session::onFrame(const FrameHeader& frame, std::string_view payload) {
  if (block_stream_ != 0 && frame.type != kContinuation) {
    terminate(H2Error::kProtocolError, "header block interrupted before END_HEADERS");
    return;
  }
  if (!settings_seen_ && frame.type != kSettings) {
    terminate(H2Error::kProtocolError, "first frame is not SETTINGS");
    return;
  }
  switch (frame.type) {
    case kData:
      return onData(frame, payload);
    case kHeaders:
      return onHeaders(frame, payload);
    case kPriority:
      if (frame.stream == 0) {
        return terminate(H2Error::kProtocolError, "PRIORITY on stream 0");
      }
      if (payload.size() != 5) {
        // A stream error, but no RST_STREAM may name an idle stream (section 6.4).
        return idle(frame.stream) ? terminate(H2Error::kFrameSizeError, "PRIORITY of a wrong size")
                                  : streamError(frame.stream, H2Error::kFrameSizeError);
      }
      return;  // RFC 7540 priorities are off (SETTINGS_NO_RFC7540_PRIORITIES)
    case kRstStream:
      return onRstStream(frame, payload);
    case kSettings:
      return onSettings(frame, payload);
    case kPushPromise:
      return terminate(H2Error::kProtocolError, "PUSH_PROMISE from a client");
    case kPing:
      return onPing(frame, payload);
    case kGoAway:
      return onGoAway(frame, payload);
    case kWindowUpdate:
      return onWindowUpdate(frame, payload);
    case kContinuation:
      return onContinuation(frame, payload);
    default:
      return;  // unknown frame types are ignored (RFC 9113 section 4.1)
  }
}

Http2Session::Stream* Http2Session::find(std::int32_t id) {
  // Streams are opened in increasing order, so the vector stays sorted; the newest is the
  // usual one.
  if (!streams_.empty() && streams_.back().id == id) {
    return &streams_.back();
  }
  auto it = std::lower_bound(streams_.begin(), streams_.end(), id,
                             [](const Stream& s, std::int32_t key) { return s.id < key; });
  return it != streams_.end() && it->id == id ? &*it : nullptr;
}

bool Http2Session::idle(std::int32_t id) const {
  // A client opens odd streams only; even ones would be ours, and we push none.
  return id > last_client_stream_ || id % 2 == 0;
}

void* Http2Session::streamUser(std::int32_t id) const {
  auto* stream = const_cast<Http2Session*>(this)->find(id);
  return stream == nullptr || stream->closed ? nullptr : stream->user;
}

bool Http2Session::unpad(const FrameHeader& frame, std::string_view& payload) {
  if ((frame.flags & kPadded) == 0) {
    return true;
  }
  if (payload.empty() || static_cast<unsigned char>(payload[0]) >= payload.size()) {
    terminate(H2Error::kProtocolError, "padding longer than the frame");
    return false;
  }
  const std::size_t pad = static_cast<unsigned char>(payload[0]);
  payload = payload.substr(1, payload.size() - 1 - pad);
  return true;
}

void Http2Session::onData(const FrameHeader& frame, std::string_view payload) {
  if (frame.stream == 0) {
    return terminate(H2Error::kProtocolError, "DATA on stream 0");
  }
  const auto length = static_cast<std::uint32_t>(payload.size());
  if (length > conn_recv_window_) {
    return terminate(H2Error::kFlowControlError, "DATA beyond the connection's window");
  }
  conn_recv_window_ -= length;
  if (!unpad(frame, payload)) {
    return;
  }
  Stream* stream = find(frame.stream);
  if (stream == nullptr || stream->closed) {
    if (idle(frame.stream)) {
      return terminate(H2Error::kProtocolError, "DATA on an idle stream");
    }
    // A stream closed or reset here: frames the client sent before it knew (RFC 9113
    // section 5.1, "closed"). Its window is the connection's still.
    return creditWindows(nullptr, length);
  }
  if (stream->remote_closed) {
    creditWindows(nullptr, length);
    return streamError(frame.stream, H2Error::kStreamClosed);
  }
  if (length > stream->recv_window) {
    creditWindows(nullptr, length);
    return streamError(frame.stream, H2Error::kFlowControlError);
  }
  stream->recv_window -= length;
  const bool end_stream = (frame.flags & kEndStream) != 0;
  stream->remote_closed = end_stream;
  creditWindows(end_stream ? nullptr : stream, length);
  handler_.onData(stream->user, payload, end_stream);
}

void Http2Session::creditWindows(Stream* stream, std::uint32_t length) {
  // The server takes every byte as it comes (the handler bounds what it keeps), so what was
  // received is credited again once half a window has come.
  conn_recv_unacked_ += length;
  if (conn_recv_unacked_ >= limits_.connection_window / 2) {
    writeWindowUpdate(0, conn_recv_unacked_);
    conn_recv_window_ += conn_recv_unacked_;
    conn_recv_unacked_ = 0;
  }
  if (stream != nullptr) {
    stream->recv_unacked += length;
    if (stream->recv_unacked >= limits_.stream_window / 2) {
      writeWindowUpdate(stream->id, stream->recv_unacked);
      stream->recv_window += stream->recv_unacked;
      stream->recv_unacked = 0;
    }
  }
}

void Http2Session::onHeaders(const FrameHeader& frame, std::string_view payload) {
  if (frame.stream == 0) {
    return terminate(H2Error::kProtocolError, "HEADERS on stream 0");
  }
  if (!unpad(frame, payload)) {
    return;
  }
  if ((frame.flags & kPriorityFlag) != 0) {
    if (payload.size() < 5) {
      return terminate(H2Error::kFrameSizeError, "HEADERS too short for its priority");
    }
    payload.remove_prefix(5);
  }
  const bool end_stream = (frame.flags & kEndStream) != 0;
  if ((frame.flags & kEndHeaders) != 0) {
    return onHeaderBlock(frame.stream, end_stream, payload);
  }
  block_.assign(payload);
  block_stream_ = frame.stream;
  block_end_stream_ = end_stream;
  continuations_ = 0;
}

void Http2Session::onContinuation(const FrameHeader& frame, std::string_view payload) {
  if (block_stream_ == 0 || frame.stream != block_stream_) {
    return terminate(H2Error::kProtocolError, "CONTINUATION without its HEADERS");
  }
  if (++continuations_ > kMaxContinuations) {
    return terminate(H2Error::kEnhanceYourCalm, "too many CONTINUATION frames");
  }
  block_.append(payload);
  if ((frame.flags & kEndHeaders) != 0) {
    const std::int32_t id = block_stream_;
    block_stream_ = 0;
    onHeaderBlock(id, block_end_stream_, block_);  // nothing it calls touches block_
  }
}

bool Http2Session::skipHeaderBlock(std::string_view block) {
  // The dynamic table must follow every block, served or not.
  if (!decoder_.decode(
          block, [](void*, std::string_view, std::string_view) {}, nullptr)) {
    terminate(H2Error::kCompressionError, decoder_.error());
    return false;
  }
  return true;
}

void Http2Session::onHeaderBlock(std::int32_t id, bool end_stream, std::string_view block) {
  Stream* stream = find(id);
  if (stream == nullptr || stream->closed) {
    if (!idle(id)) {
      // A closed stream's (sent before the client knew), or its trailers: not served.
      skipHeaderBlock(block);
      return;
    }
    if (id % 2 == 0) {
      return terminate(H2Error::kProtocolError, "a client opened an even stream");
    }
    return openStream(id, end_stream, block);
  }
  // A second header block on an open stream: trailers, which end the request.
  if (!skipHeaderBlock(block)) {
    return;
  }
  if (stream->remote_closed) {
    return streamError(id, H2Error::kStreamClosed);
  }
  if (!end_stream) {
    return streamError(id, H2Error::kProtocolError);
  }
  stream->remote_closed = true;
  handler_.onData(stream->user, {}, true);
}

void Http2Session::openStream(std::int32_t id, bool end_stream, std::string_view block) {
  last_client_stream_ = id;
  if (goaway_sent_) {
    skipHeaderBlock(block);  // after our GOAWAY, new streams are not processed
    return;
  }
  if (open_streams_ >= limits_.max_concurrent_streams) {
    if (skipHeaderBlock(block)) {
      writeRstStream(id, H2Error::kRefusedStream);
    }
    return;
  }
  Stream& stream = streams_.emplace_back();
  stream.id = id;
  stream.send_window = peer_stream_window_;
  // Until the client acknowledges our SETTINGS it may send the initial 65,535.
  stream.recv_window = settings_acked_ ? std::int64_t{limits_.stream_window}
                                       : std::max<std::int64_t>(limits_.stream_window, 65'535);
  stream.remote_closed = end_stream;
  ++open_streams_;
  const std::int32_t accepted_before = last_accepted_stream_;
  last_accepted_stream_ = id;
  void* user = handler_.onStreamOpen(id);
  stream.user = user;
  struct Sink {
    Http2Handler* handler;
    void* user;
  } sink{&handler_, user};
  const bool decoded = decoder_.decode(
      block,
      [](void* s, std::string_view name, std::string_view value) {
        auto* target = static_cast<Sink*>(s);
        target->handler->onField(target->user, name, value);
      },
      &sink);
  if (!decoded) {
    // Its request was never whole: the GOAWAY must not say it was processed.
    last_accepted_stream_ = accepted_before;
    return terminate(H2Error::kCompressionError, decoder_.error());
  }
  if (Stream* still = find(id); still != nullptr && !still->closed) {
    handler_.onHeadersEnd(user, end_stream);
  }
}

void Http2Session::onRstStream(const FrameHeader& frame, std::string_view payload) {
  if (payload.size() != 4) {
    return terminate(H2Error::kFrameSizeError, "RST_STREAM of a wrong size");
  }
  if (frame.stream == 0 || idle(frame.stream)) {
    return terminate(H2Error::kProtocolError, "RST_STREAM on an idle stream");
  }
  if (!spendReset()) {
    return;
  }
  Stream* stream = find(frame.stream);
  if (stream != nullptr && !stream->closed) {
    close(*stream, static_cast<H2Error>(read32(payload)));
  }
}

bool Http2Session::spendReset() {
  if (now_ > reset_refill_) {
    const double seconds = std::chrono::duration<double>(now_ - reset_refill_).count();
    reset_refill_ = now_;
    reset_tokens_ = std::min(kResetBurst, reset_tokens_ + seconds * kResetsPerSecond);
  }
  if (reset_tokens_ < 1) {
    terminate(H2Error::kEnhanceYourCalm, "too many stream resets");
    return false;
  }
  reset_tokens_ -= 1;
  return true;
}

void Http2Session::onSettings(const FrameHeader& frame, std::string_view payload) {
  if (frame.stream != 0) {
    return terminate(H2Error::kProtocolError, "SETTINGS on a stream");
  }
  if ((frame.flags & kAck) != 0) {
    if (!payload.empty()) {
      return terminate(H2Error::kFrameSizeError, "SETTINGS ack with a payload");
    }
    settings_acked_ = true;
    return;
  }
  if (payload.size() % 6 != 0) {
    return terminate(H2Error::kFrameSizeError, "SETTINGS of a wrong size");
  }
  if (payload.size() / 6 > kMaxSettings) {
    return terminate(H2Error::kEnhanceYourCalm, "too many SETTINGS entries");
  }
  settings_seen_ = true;
  for (std::size_t at = 0; at < payload.size(); at += 6) {
    const auto id = static_cast<std::uint16_t>((static_cast<unsigned char>(payload[at]) << 8) |
                                               static_cast<unsigned char>(payload[at + 1]));
    if (!applySetting(id, read32(payload.substr(at + 2, 4)))) {
      return;
    }
  }
  writeFrameHeader(0, kSettings, kAck, 0);
  countAck();
  sendAllPending();
}

bool Http2Session::applySetting(std::uint16_t id, std::uint32_t value) {
  switch (id) {
    case kEnablePush:  // we push nothing either way
    case kNoRfc7540Priorities:
      if (value > 1) {
        terminate(H2Error::kProtocolError, "a boolean SETTINGS value other than 0 or 1");
        return false;
      }
      return true;
    case kInitialWindowSize: {  // every open stream's window moves by the change
      if (value > kMaxWindow) {
        terminate(H2Error::kFlowControlError, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1");
        return false;
      }
      const std::int64_t delta = std::int64_t{value} - peer_stream_window_;
      peer_stream_window_ = value;
      for (auto& stream : streams_) {
        stream.send_window += delta;
        if (stream.send_window > kMaxWindow) {
          terminate(H2Error::kFlowControlError, "a stream's window above 2^31-1");
          return false;
        }
      }
      return true;
    }
    case kMaxFrameSize:
      if (value < 16'384 || value > 16'777'215) {
        terminate(H2Error::kProtocolError, "SETTINGS_MAX_FRAME_SIZE out of range");
        return false;
      }
      peer_max_frame_ = value;
      return true;
    default:
      // kHeaderTableSize (our blocks never index), kMaxConcurrentStreams (we open none),
      // kMaxHeaderListSize (our blocks are small), and unknown ones.
      return true;
  }
}

void Http2Session::onPing(const FrameHeader& frame, std::string_view payload) {
  if (payload.size() != 8) {
    return terminate(H2Error::kFrameSizeError, "PING of a wrong size");
  }
  if (frame.stream != 0) {
    return terminate(H2Error::kProtocolError, "PING on a stream");
  }
  if ((frame.flags & kAck) != 0) {
    return;
  }
  writeFrameHeader(8, kPing, kAck, 0);
  out_.append(payload);
  countAck();
  if (!fatal_) {
    handler_.onPing();
  }
}

void Http2Session::countAck() {
  if (++acks_queued_ > kMaxQueuedAcks) {
    // A client that sends acks' worth faster than it reads them: nothing more is served.
    fatal_ = true;
    error_ = "flood of frames to acknowledge";
  }
}

void Http2Session::onGoAway(const FrameHeader& frame, std::string_view payload) {
  if (frame.stream != 0) {
    return terminate(H2Error::kProtocolError, "GOAWAY on a stream");
  }
  if (payload.size() < 8) {
    return terminate(H2Error::kFrameSizeError, "GOAWAY too short");
  }
  goaway_received_ = true;
  handler_.onGoAway();
}

void Http2Session::onWindowUpdate(const FrameHeader& frame, std::string_view payload) {
  if (payload.size() != 4) {
    return terminate(H2Error::kFrameSizeError, "WINDOW_UPDATE of a wrong size");
  }
  const std::uint32_t increment = read32(payload) & 0x7fff'ffffU;
  if (frame.stream == 0) {
    if (increment == 0) {
      return terminate(H2Error::kProtocolError, "WINDOW_UPDATE of 0");
    }
    // A stream waits either for its own window or for this one: only when this one was spent
    // can its update let data out (so that a flood of small updates costs no stream walk).
    const bool was_spent = conn_send_window_ <= 0;
    conn_send_window_ += increment;
    if (conn_send_window_ > kMaxWindow) {
      return terminate(H2Error::kFlowControlError, "connection window above 2^31-1");
    }
    if (was_spent) {
      sendAllPending();
    }
    return;
  }
  if (idle(frame.stream)) {
    return terminate(H2Error::kProtocolError, "WINDOW_UPDATE on an idle stream");
  }
  Stream* stream = find(frame.stream);
  if (stream == nullptr || stream->closed) {
    return;
  }
  if (increment == 0) {
    return streamError(frame.stream, H2Error::kProtocolError);
  }
  stream->send_window += increment;
  if (stream->send_window > kMaxWindow) {
    return streamError(frame.stream, H2Error::kFlowControlError);
  }
  sendPending(*stream);
}

void Http2Session::streamError(std::int32_t id, H2Error code) {
  // A reset the client provokes ("MadeYouReset", CVE-2025-8671) costs what one it sends does.
  if (!spendReset()) {
    return;
  }
  Stream* stream = find(id);
  writeRstStream(id, code);
  if (stream != nullptr && !stream->closed) {
    close(*stream, code);
  }
}

void Http2Session::writeFrameHeader(std::uint32_t length, std::uint8_t type, std::uint8_t flags,
                                    std::int32_t id) {
  const char header[kFrameHeaderBytes] = {
      static_cast<char>(length >> 16), static_cast<char>(length >> 8), static_cast<char>(length),
      static_cast<char>(type),         static_cast<char>(flags),       static_cast<char>(id >> 24),
      static_cast<char>(id >> 16),     static_cast<char>(id >> 8),     static_cast<char>(id)};
  out_.append(header, kFrameHeaderBytes);
}

void Http2Session::writeWindowUpdate(std::int32_t id, std::uint32_t increment) {
  writeFrameHeader(4, kWindowUpdate, 0, id);
  put32(out_, increment);
}

void Http2Session::writeRstStream(std::int32_t id, H2Error code) {
  writeFrameHeader(4, kRstStream, 0, id);
  put32(out_, static_cast<std::uint32_t>(code));
}

void Http2Session::writeHeaderBlock(std::int32_t id, std::string_view block, bool end_stream) {
  std::string first;
  if (!table_size_sent_) {
    // Our blocks never use the peer's dynamic table: its size is set to 0 once, so that no
    // later SETTINGS_HEADER_TABLE_SIZE needs an update (RFC 7541 section 4.2).
    table_size_sent_ = true;
    first.reserve(block.size() + 1);
    first.push_back(hpack::kTableSizeZero);
    first.append(block);
    block = first;
  }
  const std::uint8_t end = end_stream ? kEndStream : 0;
  if (block.size() <= peer_max_frame_) [[likely]] {
    writeFrameHeader(static_cast<std::uint32_t>(block.size()), kHeaders, end | kEndHeaders, id);
    out_.append(block);
    return;
  }
  std::uint8_t type = kHeaders;
  std::uint8_t flags = end;
  while (!block.empty()) {
    const std::string_view part = block.substr(0, peer_max_frame_);
    block.remove_prefix(part.size());
    writeFrameHeader(static_cast<std::uint32_t>(part.size()), type,
                     flags | (block.empty() ? kEndHeaders : 0), id);
    out_.append(part);
    type = kContinuation;
    flags = 0;
  }
}

void Http2Session::submitHeaders(std::int32_t id, std::string_view block, bool end_stream) {
  Stream* stream = writable(id);
  if (stream == nullptr) {
    return;
  }
  writeHeaderBlock(id, block, end_stream);
  if (end_stream) {
    endLocal(*stream);
  }
}

Http2Session::Stream* Http2Session::writable(std::int32_t id) {
  Stream* stream = find(id);
  return stream == nullptr || stream->closed || stream->local_closed || stream->trailers_due
             ? nullptr
             : stream;
}

void Http2Session::submitData(std::int32_t id, std::string_view bytes) {
  Stream* stream = writable(id);
  if (stream == nullptr) {
    return;
  }
  if (stream->pending_pos < stream->pending.size()) {
    stream->pending.append(bytes);
    sendPending(*stream);
    return;
  }
  // Nothing waits before it: what the windows allow goes out now, straight from `bytes`.
  const std::size_t sent = writeData(*stream, bytes);
  stream->pending.assign(bytes.substr(sent));
  stream->pending_pos = 0;
}

void Http2Session::submitTrailers(std::int32_t id, std::string_view block) {
  Stream* stream = writable(id);
  if (stream == nullptr) {
    return;
  }
  if (stream->pending_pos < stream->pending.size()) {
    stream->trailers.assign(block);
    stream->trailers_due = true;
    return;
  }
  writeHeaderBlock(id, block, true);
  endLocal(*stream);
}

std::size_t Http2Session::writeData(Stream& stream, std::string_view bytes) {
  std::size_t sent = 0;
  while (sent < bytes.size()) {
    const std::int64_t room =
        std::min({stream.send_window, conn_send_window_, std::int64_t{peer_max_frame_}});
    if (room <= 0) {
      break;
    }
    const auto n = static_cast<std::uint32_t>(
        std::min<std::int64_t>(room, static_cast<std::int64_t>(bytes.size() - sent)));
    writeFrameHeader(n, kData, 0, stream.id);
    out_.append(bytes.substr(sent, n));
    sent += n;
    stream.send_window -= n;
    conn_send_window_ -= n;
  }
  return sent;
}

void Http2Session::sendPending(Stream& stream) {
  stream.pending_pos +=
      writeData(stream, std::string_view(stream.pending).substr(stream.pending_pos));
  if (stream.pending_pos < stream.pending.size()) {
    return;
  }
  stream.pending.clear();
  stream.pending_pos = 0;
  if (stream.trailers_due) {
    stream.trailers_due = false;
    writeHeaderBlock(stream.id, stream.trailers, true);
    stream.trailers.clear();
    endLocal(stream);
  }
}

void Http2Session::sendAllPending() {
  for (auto& stream : streams_) {
    if (conn_send_window_ <= 0) {
      return;
    }
    // Trailers wait only behind data.
    if (!stream.closed && stream.pending_pos < stream.pending.size()) {
      sendPending(stream);
    }
  }
}

void Http2Session::endLocal(Stream& stream) {
  stream.local_closed = true;
  if (!stream.remote_closed) {
    // The answer is whole: the rest of the request is not wanted (RFC 9113 section 8.1,
    // RST_STREAM NO_ERROR after a complete response, as gRPC servers do).
    writeRstStream(stream.id, H2Error::kNoError);
  }
  close(stream, H2Error::kNoError);
}

void Http2Session::submitRstStream(std::int32_t id, H2Error code) {
  Stream* stream = find(id);
  if (stream == nullptr || stream->closed) {
    return;
  }
  writeRstStream(id, code);
  close(*stream, code);
}

void Http2Session::close(Stream& stream, H2Error code) {
  stream.closed = true;
  stream.close_code = code;
  --open_streams_;
  ++closed_unreported_;
}

void Http2Session::reportClosed() {
  // Collected first (into a vector kept for it): the handler may submit to other streams
  // while it hears of these.
  std::vector<Closed> closed;
  closed.swap(closed_);
  std::erase_if(streams_, [&closed](const Stream& stream) {
    if (stream.closed) {
      closed.push_back({stream.user, stream.id, stream.close_code});
    }
    return stream.closed;
  });
  closed_unreported_ = 0;
  for (const Closed& stream : closed) {
    handler_.onStreamClose(stream.user, stream.id, stream.code);
  }
  closed.clear();
  closed_.swap(closed);
}

void Http2Session::submitGoAway(H2Error code, std::string_view debug) {
  writeFrameHeader(static_cast<std::uint32_t>(8 + debug.size()), kGoAway, 0, 0);
  put32(out_, static_cast<std::uint32_t>(last_accepted_stream_));
  put32(out_, static_cast<std::uint32_t>(code));
  out_.append(debug);
  goaway_sent_ = true;
}

void Http2Session::terminate(H2Error code, std::string_view debug) {
  if (fatal_) {
    return;
  }
  submitGoAway(code, debug);
  fatal_ = true;
  error_.assign(debug);
}

void Http2Session::output(std::string& out) {
  acks_queued_ = 0;
  if (out.empty()) {
    out.swap(out_);
  } else {
    out.append(out_);
  }
  out_.clear();
  if (closed_unreported_ != 0) {
    reportClosed();
    // What the handler submitted while it heard of them.
    out.append(out_);
    out_.clear();
  }
}

}  // namespace sluice::grpc
