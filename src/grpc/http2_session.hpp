#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grpc/hpack.hpp"

/// The server side of one HTTP/2 connection (RFC 9113), as the gRPC server needs it: bytes in,
/// events out, frames written as they are submitted. No socket and no clock of its own.
///
/// Its scope is a server of unary and streaming calls that pushes nothing: the connection
/// preface, SETTINGS, PING, GOAWAY, WINDOW_UPDATE and both directions' flow control,
/// RST_STREAM, HEADERS and CONTINUATION with HPACK (hpack.hpp), padding, stream states, and
/// the bounds a hostile client meets (docs/envoy.md, "The gRPC transport").
namespace sluice::grpc {

/// HTTP/2 error codes (RFC 9113 section 7).
enum class H2Error : std::uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCancel = 0x8,
  kCompressionError = 0x9,
  kEnhanceYourCalm = 0xb,
};

/// HTTP/2's wire constants (RFC 9113 sections 3.4, 6).
namespace h2 {
/// What a client sends first, before its SETTINGS.
inline constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
enum FrameType : std::uint8_t {
  kData = 0x0,
  kHeaders = 0x1,
  kPriority = 0x2,
  kRstStream = 0x3,
  kSettings = 0x4,
  kPushPromise = 0x5,
  kPing = 0x6,
  kGoAway = 0x7,
  kWindowUpdate = 0x8,
  kContinuation = 0x9,
};
enum Flag : std::uint8_t {
  kEndStream = 0x1,
  kAck = 0x1,
  kEndHeaders = 0x4,
  kPadded = 0x8,
  kPriorityFlag = 0x20,
};
/// SETTINGS parameters (section 6.5.2; 0x9 is RFC 9218's).
enum Setting : std::uint16_t {
  kHeaderTableSize = 0x1,
  kEnablePush = 0x2,
  kMaxConcurrentStreams = 0x3,
  kInitialWindowSize = 0x4,
  kMaxFrameSize = 0x5,
  kMaxHeaderListSize = 0x6,
  kNoRfc7540Priorities = 0x9,
};
}  // namespace h2

/// What a session reports of the client's frames. `stream` is the pointer onStreamOpen()
/// returned for the stream.
class Http2Handler {
 public:
  virtual ~Http2Handler() = default;
  /// A client's HEADERS opens stream `id`: the handler's pointer for it (not null).
  virtual void* onStreamOpen(std::int32_t id) = 0;
  /// One field of the request's header block (trailers' fields are not reported).
  virtual void onField(void* stream, std::string_view name, std::string_view value) = 0;
  /// The request's header block is whole; `end_stream`: the request ends with it.
  virtual void onHeadersEnd(void* stream, bool end_stream) = 0;
  /// Request bytes (DATA); `end_stream` on the last (empty when trailers end the request).
  virtual void onData(void* stream, std::string_view bytes, bool end_stream) = 0;
  /// The stream is closed (both sides ended, or reset either way) and forgotten. Reported
  /// between frames and from output(), never from inside a submit call.
  virtual void onStreamClose(void* stream, std::int32_t id, H2Error code) = 0;
  /// A PING (not an ack) came; the session has queued its ack.
  virtual void onPing() = 0;
  /// The client sent GOAWAY.
  virtual void onGoAway() = 0;
};

struct Http2Limits {
  /// SETTINGS_MAX_CONCURRENT_STREAMS: a stream over it is refused (RST_STREAM REFUSED_STREAM).
  std::uint32_t max_concurrent_streams = 1000;
  /// SETTINGS_MAX_HEADER_LIST_SIZE, announced; the handler enforces it.
  std::uint32_t max_header_list_bytes = 16 << 10;
  /// SETTINGS_INITIAL_WINDOW_SIZE: what a client may send on a stream ahead of our credit.
  std::uint32_t stream_window = 1 << 20;
  /// The connection's window, raised from 65,535 by a WINDOW_UPDATE after our SETTINGS.
  std::uint32_t connection_window = 4 << 20;
};

class Http2Session {
 public:
  using Clock = std::chrono::steady_clock;

  /// Queues our SETTINGS and the connection's WINDOW_UPDATE.
  Http2Session(Http2Handler& handler, const Http2Limits& limits);
  Http2Session(const Http2Session&) = delete;
  Http2Session& operator=(const Http2Session&) = delete;

  /// Bytes from the client. False: the connection is over, by a connection error (its
  /// GOAWAY is queued) or beyond one (a bad preface, a flood of acks: nothing is added).
  bool receive(std::string_view bytes, Clock::time_point now);
  /// Moves the frames queued so far to the end of `out`, then reports the streams that what
  /// was submitted closed.
  void output(std::string& out);
  bool hasOutput() const { return !out_.empty(); }

  /// A response's header block (HPACK without the dynamic table: hpack::put*), as HEADERS
  /// and CONTINUATION frames; `end_stream` ends our side.
  void submitHeaders(std::int32_t id, std::string_view block, bool end_stream);
  /// Response bytes, as DATA frames as far as the flow-control windows allow; the rest goes
  /// out as the client's WINDOW_UPDATEs come.
  void submitData(std::int32_t id, std::string_view bytes);
  /// Trailers: a header block ending our side, after the data still waiting for window.
  void submitTrailers(std::int32_t id, std::string_view block);
  /// RST_STREAM: the stream is closed at once.
  void submitRstStream(std::int32_t id, H2Error code);
  /// GOAWAY naming the last stream accepted; streams the client opens after it are ignored.
  void submitGoAway(H2Error code, std::string_view debug = {});
  /// A connection error: GOAWAY, then nothing more is read.
  void terminate(H2Error code, std::string_view debug = {});

  /// The handler's pointer of an open stream, null when there is none.
  void* streamUser(std::int32_t id) const;
  /// Streams open (not closed nor reset).
  std::size_t openStreams() const { return open_streams_; }
  bool goAwaySent() const { return goaway_sent_; }
  bool goAwayReceived() const { return goaway_received_; }
  /// A connection error or flood ended the connection: write output(), then close.
  bool fatal() const { return fatal_; }
  /// What ended the connection, for the log ("" while it lives).
  const std::string& error() const { return error_; }

 private:
  struct Stream {
    std::int32_t id = 0;
    void* user = nullptr;
    std::int64_t send_window = 0;  // may go below 0 when the client lowers its window
    std::int64_t recv_window = 0;  // what the client may still send
    std::uint32_t recv_unacked = 0;
    bool remote_closed = false;
    bool local_closed = false;
    bool closed = false;  // closed; its onStreamClose() not reported yet
    bool trailers_due = false;
    H2Error close_code = H2Error::kNoError;
    std::string pending;  // DATA payload waiting for window, from pending_pos
    std::size_t pending_pos = 0;
    std::string trailers;  // a header block to send once `pending` is out
  };
  struct Closed {
    void* user;
    std::int32_t id;
    H2Error code;
  };
  struct FrameHeader {
    std::uint32_t length;
    std::uint8_t type;
    std::uint8_t flags;
    std::int32_t stream;
  };

  Stream* find(std::int32_t id);
  /// The stream `id` if our side may still send on it, else null.
  Stream* writable(std::int32_t id);
  bool idle(std::int32_t id) const;
  std::size_t readPreface(std::string_view data);
  void onFrame(const FrameHeader& frame, std::string_view payload);
  void onData(const FrameHeader& frame, std::string_view payload);
  void onHeaders(const FrameHeader& frame, std::string_view payload);
  void onContinuation(const FrameHeader& frame, std::string_view payload);
  void onHeaderBlock(std::int32_t id, bool end_stream, std::string_view block);
  void openStream(std::int32_t id, bool end_stream, std::string_view block);
  bool skipHeaderBlock(std::string_view block);
  void onRstStream(const FrameHeader& frame, std::string_view payload);
  void onSettings(const FrameHeader& frame, std::string_view payload);
  bool applySetting(std::uint16_t id, std::uint32_t value);
  void onPing(const FrameHeader& frame, std::string_view payload);
  void onGoAway(const FrameHeader& frame, std::string_view payload);
  void onWindowUpdate(const FrameHeader& frame, std::string_view payload);
  bool unpad(const FrameHeader& frame, std::string_view& payload);
  void creditWindows(Stream* stream, std::uint32_t length);
  void streamError(std::int32_t id, H2Error code);
  /// One stream reset (the client's RST_STREAM, or ours for its stream error) out of the
  /// bucket; false: the bucket is empty, and the connection is terminated.
  bool spendReset();
  void countAck();

  void writeFrameHeader(std::uint32_t length, std::uint8_t type, std::uint8_t flags,
                        std::int32_t id);
  void writeHeaderBlock(std::int32_t id, std::string_view block, bool end_stream);
  void writeWindowUpdate(std::int32_t id, std::uint32_t increment);
  void writeRstStream(std::int32_t id, H2Error code);
  /// DATA frames of `bytes` as far as the windows allow: how many bytes went.
  std::size_t writeData(Stream& stream, std::string_view bytes);
  void sendPending(Stream& stream);
  void sendAllPending();
  void endLocal(Stream& stream);
  void close(Stream& stream, H2Error code);
  void reportClosed();

  Http2Handler& handler_;
  Http2Limits limits_;
  HpackDecoder decoder_;
  std::vector<Stream> streams_;  // open and closed-unreported streams, by id
  std::size_t open_streams_ = 0;
  std::size_t closed_unreported_ = 0;
  std::vector<Closed> closed_;     // reportClosed()'s, kept for its capacity
  std::string in_;                 // the start of a frame not whole yet
  std::string out_;                // frames to write
  std::string block_;              // a header block continued by CONTINUATION frames
  std::int32_t block_stream_ = 0;  // the stream whose block_ waits for CONTINUATION; 0: none
  bool block_end_stream_ = false;
  int continuations_ = 0;
  std::size_t preface_seen_ = 0;  // bytes of the client's connection preface read
  bool settings_seen_ = false;    // the client's first SETTINGS came
  bool settings_acked_ = false;   // the client acknowledged ours
  bool table_size_sent_ = false;  // our first header block set the peer's table to 0
  std::int32_t last_client_stream_ = 0;
  std::int32_t last_accepted_stream_ = 0;
  std::int64_t conn_send_window_ = 65'535;
  std::int64_t conn_recv_window_ = 65'535;
  std::uint32_t conn_recv_unacked_ = 0;
  std::uint32_t peer_stream_window_ = 65'535;
  std::uint32_t peer_max_frame_ = 16'384;
  std::size_t acks_queued_ = 0;  // PING and SETTINGS acks since the last output()
  double reset_tokens_;          // streams the client may still reset (or make us reset) now
  Clock::time_point reset_refill_{};
  Clock::time_point now_{};
  bool goaway_sent_ = false;
  bool goaway_received_ = false;
  bool fatal_ = false;
  std::string error_;
};

}  // namespace sluice::grpc
