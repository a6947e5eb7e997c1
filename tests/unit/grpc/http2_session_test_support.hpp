#pragma once
// What the Http2Session tests share: a handler that records what the session reports, HPACK
// blocks of requests and responses, a builder and a reader of raw frames, and two peers: raw
// bytes (RawPeer) and libnghttp2's client session in memory (NghttpPeer), whose strict checks
// of our frames make it a protocol oracle.
#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grpc/hpack.hpp"
#include "grpc/http2_session.hpp"

namespace sluice::grpc::h2test {

using Clock = Http2Session::Clock;
/// A manual clock's start, far from the epoch like a real steady_clock's.
inline const Clock::time_point kStart = Clock::time_point{} + std::chrono::hours(100);

using namespace h2;  // the wire constants, used throughout
inline constexpr std::string_view kPreface = kClientPreface;

/// One stream as the handler heard of it.
struct StreamRecord {
  std::int32_t id = 0;
  std::vector<std::pair<std::string, std::string>> fields;
  bool headers_ended = false;
  std::string body;
  bool ended = false;  // the request ended (END_STREAM, on HEADERS, DATA or trailers)
  int closes = 0;
  H2Error close_code = H2Error::kNoError;
};

inline std::string codeText(H2Error code) { return std::to_string(static_cast<int>(code)); }

/// A handler that records every event, in order, as a line of text (so that two deliveries
/// of the same bytes can be compared whole), and each stream's fields and body.
class Recorder final : public Http2Handler {
 public:
  void* onStreamOpen(std::int32_t id) override {
    StreamRecord& stream = streams[id];
    EXPECT_EQ(stream.id, 0) << "stream " << id << " opened twice";
    stream.id = id;
    events.push_back("open " + std::to_string(id));
    return &stream;
  }
  void onField(void* user, std::string_view name, std::string_view value) override {
    auto& stream = *static_cast<StreamRecord*>(user);
    stream.fields.emplace_back(name, value);
    events.push_back("field " + std::to_string(stream.id) + " " + std::string(name) + "=" +
                     std::string(value));
  }
  void onHeadersEnd(void* user, bool end_stream) override {
    auto& stream = *static_cast<StreamRecord*>(user);
    stream.headers_ended = true;
    events.push_back("headers " + std::to_string(stream.id) + (end_stream ? " end" : ""));
    ended(stream, end_stream);
  }
  void onData(void* user, std::string_view bytes, bool end_stream) override {
    auto& stream = *static_cast<StreamRecord*>(user);
    EXPECT_FALSE(stream.ended) << "data after the request's end on stream " << stream.id;
    stream.body.append(bytes);
    events.push_back("data " + std::to_string(stream.id) + " " + std::to_string(bytes.size()) +
                     (end_stream ? " end" : ""));
    ended(stream, end_stream);
  }
  void onStreamClose(void* user, std::int32_t id, H2Error code) override {
    EXPECT_FALSE(in_submit) << "stream " << id << "'s close reported inside a submit call";
    auto& stream = *static_cast<StreamRecord*>(user);
    EXPECT_EQ(stream.id, id);
    ++stream.closes;
    stream.close_code = code;
    events.push_back("close " + std::to_string(id) + " " + codeText(code));
  }
  void onPing() override {
    ++pings;
    events.push_back("ping");
  }
  void onGoAway() override {
    ++goaways;
    events.push_back("goaway");
  }

  /// Called once a request is whole, e.g. to answer it from inside the session's callback.
  std::function<void(std::int32_t id)> on_request;
  std::map<std::int32_t, StreamRecord> streams;  // std::map: the records do not move
  std::vector<std::string> events;
  int pings = 0;
  int goaways = 0;
  bool in_submit = false;  // a submit call is under way: no close may be reported

 private:
  void ended(StreamRecord& stream, bool end_stream) {
    if (end_stream) {
      stream.ended = true;
      if (on_request) {
        on_request(stream.id);
      }
    }
  }
};

// ---- HPACK blocks ----

/// A gRPC request's header block: static-table fields and plain literals.
inline std::string requestBlock(std::string_view path = "/pkg.Service/Call") {
  std::string block;
  hpack::putIndexed(block, 3);  // :method POST
  hpack::putIndexed(block, 6);  // :scheme http
  hpack::putLiteral(block, 4, ":path", path);
  hpack::putLiteral(block, 1, ":authority", "localhost");
  hpack::putLiteral(block, hpack::staticNameIndex("content-type"), "content-type",
                    "application/grpc");
  return block;
}

/// A literal field with incremental indexing (RFC 7541 section 6.2.1): it enters the dynamic
/// table as entry 62, so a later block's index 62 decodes only if this block was decoded.
inline std::string indexedLiteral(std::string_view name, std::string_view value) {
  std::string block;
  block.push_back(0x40);
  hpack::putInteger(block, 0x00, 7, name.size());
  block.append(name);
  hpack::putInteger(block, 0x00, 7, value.size());
  block.append(value);
  return block;
}

/// An indexed field of the dynamic table or beyond (index 62 is its newest entry).
inline std::string indexedField(std::uint32_t index) {
  std::string block;
  hpack::putInteger(block, 0x80, 7, index);
  return block;
}

inline std::string responseHeaders(std::string_view extra_name = {},
                                   std::string_view extra_value = {}) {
  std::string block;
  hpack::putIndexed(block, 8);  // :status 200
  hpack::putLiteral(block, hpack::staticNameIndex("content-type"), "content-type",
                    "application/grpc");
  if (!extra_name.empty()) {
    hpack::putLiteral(block, 0, extra_name, extra_value);
  }
  return block;
}

inline std::string trailersBlock(std::string_view status = "0") {
  std::string block;
  hpack::putLiteral(block, 0, "grpc-status", status);
  return block;
}

/// Answers stream `id` as a handler would: :status 200, `body` as DATA, grpc-status 0
/// trailers. A stream close reported meanwhile fails the test (Recorder::in_submit).
inline void answer(Http2Session& session, Recorder& recorder, std::int32_t id,
                   std::string_view body) {
  recorder.in_submit = true;
  session.submitHeaders(id, responseHeaders(), false);
  session.submitData(id, body);
  session.submitTrailers(id, trailersBlock());
  recorder.in_submit = false;
}

/// `size` bytes that differ from one position to the next, so that a byte out of order shows.
inline std::string pattern(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  }
  return bytes;
}

// ---- raw frames ----

inline std::string be32(std::uint32_t value) {
  return {static_cast<char>(value >> 24), static_cast<char>(value >> 16),
          static_cast<char>(value >> 8), static_cast<char>(value)};
}

inline std::uint32_t readBe32(std::string_view bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

/// A frame's header (its length as given, even when the payload does not match) and payload.
inline std::string frameWithLength(std::uint32_t length, std::uint8_t type, std::uint8_t flags,
                                   std::int32_t stream, std::string_view payload) {
  std::string bytes{static_cast<char>(length >> 16), static_cast<char>(length >> 8),
                    static_cast<char>(length), static_cast<char>(type), static_cast<char>(flags)};
  bytes += be32(static_cast<std::uint32_t>(stream));
  bytes.append(payload);
  return bytes;
}

inline std::string frame(std::uint8_t type, std::uint8_t flags, std::int32_t stream,
                         std::string_view payload = {}) {
  return frameWithLength(static_cast<std::uint32_t>(payload.size()), type, flags, stream, payload);
}

inline std::string settingsFrame(std::vector<std::pair<std::uint16_t, std::uint32_t>> entries) {
  std::string payload;
  for (const auto& [id, value] : entries) {
    payload.push_back(static_cast<char>(id >> 8));
    payload.push_back(static_cast<char>(id));
    payload += be32(value);
  }
  return frame(kSettings, 0, 0, payload);
}

/// A request's HEADERS with END_HEADERS (and END_STREAM when `end_stream`).
inline std::string headersFrame(std::int32_t stream, std::string_view block, bool end_stream) {
  return frame(kHeaders, kEndHeaders | (end_stream ? kEndStream : 0), stream, block);
}

inline std::string dataFrame(std::int32_t stream, std::string_view bytes, bool end_stream) {
  return frame(kData, end_stream ? kEndStream : 0, stream, bytes);
}

inline std::string windowUpdate(std::int32_t stream, std::uint32_t increment) {
  return frame(kWindowUpdate, 0, stream, be32(increment));
}

inline std::string rstStream(std::int32_t stream, H2Error code) {
  return frame(kRstStream, 0, stream, be32(static_cast<std::uint32_t>(code)));
}

inline std::string pingFrame(std::string_view opaque = "12345678") {
  return frame(kPing, 0, 0, opaque);
}

/// `block` as HEADERS and `continuations` CONTINUATION frames (one byte each, the last one
/// the rest), END_HEADERS on the last.
inline std::string splitBlock(std::int32_t stream, std::string_view block, int continuations,
                              bool end_stream) {
  std::string bytes = frame(kHeaders, end_stream ? kEndStream : 0, stream, block.substr(0, 2));
  block.remove_prefix(2);
  for (int i = 1; i <= continuations; ++i) {
    const std::string_view part = i == continuations ? block : block.substr(0, 1);
    bytes += frame(kContinuation, i == continuations ? kEndHeaders : 0, stream, part);
    block.remove_prefix(part.size());
  }
  return bytes;
}

struct Frame {
  std::uint8_t type = 0;
  std::uint8_t flags = 0;
  std::int32_t stream = 0;
  std::string payload;
};

/// The frames of `bytes`, which must hold whole frames only.
inline std::vector<Frame> parseFrames(std::string_view bytes) {
  std::vector<Frame> frames;
  while (bytes.size() >= 9) {
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::size_t length = (std::size_t{p[0]} << 16) | (std::size_t{p[1]} << 8) | p[2];
    if (bytes.size() < 9 + length) {
      break;
    }
    frames.push_back({p[3], p[4],
                      static_cast<std::int32_t>(readBe32(bytes.substr(5)) & 0x7fff'ffff),
                      std::string(bytes.substr(9, length))});
    bytes.remove_prefix(9 + length);
  }
  EXPECT_TRUE(bytes.empty()) << bytes.size() << " bytes of a frame cut short";
  return frames;
}

inline std::vector<Frame> framesOfType(const std::vector<Frame>& frames, std::uint8_t type) {
  std::vector<Frame> found;
  for (const Frame& f : frames) {
    if (f.type == type) {
      found.push_back(f);
    }
  }
  return found;
}

/// The peer that writes raw bytes: what a correct client cannot send.
class RawPeer {
 public:
  explicit RawPeer(const Http2Limits& limits = {}) : session(recorder, limits) {}

  /// The preface and an empty SETTINGS; our SETTINGS, WINDOW_UPDATE and ack are dropped.
  void start() {
    EXPECT_TRUE(send(std::string(kPreface) + settingsFrame({})));
    read();
  }
  bool send(std::string_view bytes) { return session.receive(bytes, now); }
  std::vector<Frame> read() {
    std::string out;
    session.output(out);
    return parseFrames(out);
  }
  /// Opens stream `id` with a request's HEADERS.
  void open(std::int32_t id, bool end_stream) {
    EXPECT_TRUE(send(headersFrame(id, requestBlock(), end_stream))) << session.error();
  }

  Recorder recorder;
  Http2Session session;
  Clock::time_point now = kStart;
};

}  // namespace sluice::grpc::h2test
