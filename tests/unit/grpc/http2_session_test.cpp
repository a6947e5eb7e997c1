// Http2Session (src/grpc/http2_session.cpp) seen by libnghttp2's client session in memory:
// nghttp2 checks every frame we write (flow control, HPACK, stream states, HTTP messaging),
// so a test that pumps bytes both ways until quiet and finds nghttp2 without complaint shows
// our side of the protocol right. The peer's raw bytes are in http2_session_errors_test.cpp
// and http2_session_frames_test.cpp.
#include "grpc/http2_session.hpp"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http2_session_test_support.hpp"

namespace sluice::grpc::h2test {
namespace {

/// What the client saw of one stream.
struct Response {
  std::map<std::string, std::string> headers;
  std::map<std::string, std::string> trailers;
  std::string data;
  std::vector<std::size_t> data_frames;  // each DATA frame's payload length
  std::vector<std::uint8_t> frames;      // the frames' types, in order
  bool closed = false;
  std::uint32_t close_code = 0;
};

/// A request body nghttp2 reads; `held` defers it until release().
struct Body {
  std::string bytes;
  std::size_t pos = 0;
  bool held = false;
};

/// nghttp2's client session against an Http2Session, bytes moved by hand.
class NghttpPeer {
 public:
  explicit NghttpPeer(const std::vector<nghttp2_settings_entry>& settings = {},
                      const Http2Limits& limits = {})
      : session(recorder, limits) {
    nghttp2_session_callbacks* callbacks = nullptr;
    nghttp2_session_callbacks_new(&callbacks);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, onHeader);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, onDataChunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, onFrameRecv);
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks, onFrameSend);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, onStreamClose);
    nghttp2_session_callbacks_set_on_invalid_frame_recv_callback(callbacks, onInvalidFrame);
    nghttp2_session_callbacks_set_error_callback2(callbacks, onError);
    nghttp2_session_client_new(&client, callbacks, this);
    nghttp2_session_callbacks_del(callbacks);
    nghttp2_submit_settings(client, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
  }
  ~NghttpPeer() { nghttp2_session_del(client); }
  NghttpPeer(const NghttpPeer&) = delete;
  NghttpPeer& operator=(const NghttpPeer&) = delete;

  /// Submits a gRPC request to `path`; without a body its HEADERS ends the stream.
  std::int32_t request(std::optional<std::string> body = std::nullopt, bool held = false,
                       std::string_view path = "/pkg.Service/Call") {
    const nghttp2_nv headers[] = {field(":method", "POST"),
                                  field(":scheme", "http"),
                                  field(":path", path),
                                  field(":authority", "localhost"),
                                  field("content-type", "application/grpc"),
                                  field("te", "trailers")};
    nghttp2_data_provider provider{};
    if (body) {
      bodies_.push_back({std::move(*body), 0, held});
      provider.source.ptr = &bodies_.back();
      provider.read_callback = readBody;
    }
    const std::int32_t id = nghttp2_submit_request(client, nullptr, headers, std::size(headers),
                                                   body ? &provider : nullptr, nullptr);
    EXPECT_GT(id, 0);
    if (body) {
      held_[id] = &bodies_.back();
    }
    return id;
  }
  void release(std::int32_t id) {
    held_.at(id)->held = false;
    EXPECT_EQ(nghttp2_session_resume_data(client, id), 0);
  }

  /// The client's bytes to the server: how many.
  std::size_t toServer() {
    std::string bytes;
    const std::uint8_t* data = nullptr;
    ssize_t n = 0;
    while ((n = nghttp2_session_mem_send(client, &data)) > 0) {
      bytes.append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
    }
    if (n < 0) {
      errors.push_back(std::string("mem_send: ") + nghttp2_strerror(static_cast<int>(n)));
    }
    if (!bytes.empty()) {
      EXPECT_TRUE(session.receive(bytes, now)) << session.error();
    }
    return bytes.size();
  }
  /// The server's bytes to the client (also kept in `written`).
  std::string toClient() {
    std::string bytes;
    session.output(bytes);
    written += bytes;
    const ssize_t n = nghttp2_session_mem_recv(
        client, reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    if (n != static_cast<ssize_t>(bytes.size())) {
      errors.push_back(std::string("mem_recv: ") + nghttp2_strerror(static_cast<int>(n)));
    }
    return bytes;
  }
  /// Both ways until neither side has anything to say.
  void pump() {
    for (int round = 0; round < 10'000; ++round) {
      if (toServer() == 0 && toClient().empty()) {
        return;
      }
    }
    ADD_FAILURE() << "the exchange never went quiet";
  }
  /// nghttp2 found nothing wrong and sent neither RST_STREAM nor GOAWAY.
  void expectClean() const {
    for (const std::string& error : errors) {
      ADD_FAILURE() << "nghttp2: " << error;
    }
    EXPECT_FALSE(session.fatal()) << session.error();
  }

  Recorder recorder;
  Http2Session session;
  nghttp2_session* client = nullptr;
  std::map<std::int32_t, Response> responses;
  std::vector<std::string> errors;
  std::string written;
  Clock::time_point now = kStart;

 private:
  static nghttp2_nv field(std::string_view name, std::string_view value) {
    return {reinterpret_cast<std::uint8_t*>(const_cast<char*>(name.data())),
            reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
            value.size(), NGHTTP2_NV_FLAG_NONE};
  }
  static NghttpPeer& self(void* user) { return *static_cast<NghttpPeer*>(user); }
  static ssize_t readBody(nghttp2_session*, std::int32_t, std::uint8_t* buffer, std::size_t length,
                          std::uint32_t* flags, nghttp2_data_source* source, void*) {
    auto& body = *static_cast<Body*>(source->ptr);
    if (body.held) {
      return NGHTTP2_ERR_DEFERRED;
    }
    const std::size_t n = std::min(length, body.bytes.size() - body.pos);
    std::copy_n(body.bytes.data() + body.pos, n, buffer);
    body.pos += n;
    if (body.pos == body.bytes.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
    }
    return static_cast<ssize_t>(n);
  }
  static int onHeader(nghttp2_session*, const nghttp2_frame* frame, const std::uint8_t* name,
                      std::size_t name_length, const std::uint8_t* value, std::size_t value_length,
                      std::uint8_t, void* user) {
    Response& response = self(user).responses[frame->hd.stream_id];
    auto& fields =
        frame->headers.cat == NGHTTP2_HCAT_HEADERS ? response.trailers : response.headers;
    fields[std::string(reinterpret_cast<const char*>(name), name_length)] =
        std::string(reinterpret_cast<const char*>(value), value_length);
    return 0;
  }
  static int onDataChunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data,
                         std::size_t length, void* user) {
    self(user).responses[id].data.append(reinterpret_cast<const char*>(data), length);
    return 0;
  }
  static int onFrameRecv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.stream_id != 0) {
      Response& response = self(user).responses[frame->hd.stream_id];
      response.frames.push_back(frame->hd.type);
      if (frame->hd.type == NGHTTP2_DATA) {
        response.data_frames.push_back(frame->hd.length);
      }
    }
    return 0;
  }
  static int onFrameSend(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    if (frame->hd.type == NGHTTP2_RST_STREAM || frame->hd.type == NGHTTP2_GOAWAY) {
      self(user).errors.push_back("the client sent frame type " + std::to_string(frame->hd.type));
    }
    return 0;
  }
  static int onStreamClose(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
    Response& response = self(user).responses[id];
    response.closed = true;
    response.close_code = code;
    return 0;
  }
  static int onInvalidFrame(nghttp2_session*, const nghttp2_frame* frame, int error, void* user) {
    self(user).errors.push_back("invalid frame type " + std::to_string(frame->hd.type) +
                                " on stream " + std::to_string(frame->hd.stream_id) + ": " +
                                nghttp2_strerror(error));
    return 0;
  }
  static int onError(nghttp2_session*, int, const char* message, std::size_t length, void* user) {
    self(user).errors.emplace_back(message, length);
    return 0;
  }

  std::deque<Body> bodies_;
  std::map<std::int32_t, Body*> held_;
};

/// Answers each request, once whole, from inside the session's callback.
void answerEach(NghttpPeer& peer, std::string body) {
  peer.recorder.on_request = [&peer, body = std::move(body)](std::int32_t id) {
    answer(peer.session, peer.recorder, id, body);
  };
}

void expectAnswered(const NghttpPeer& peer, std::int32_t id, std::string_view body) {
  SCOPED_TRACE("stream " + std::to_string(id));
  ASSERT_EQ(peer.responses.count(id), 1u);
  const Response& response = peer.responses.at(id);
  EXPECT_EQ(response.headers.at(":status"), "200");
  EXPECT_EQ(response.headers.at("content-type"), "application/grpc");
  EXPECT_EQ(response.data.size(), body.size());
  EXPECT_TRUE(response.data == body) << "the data arrived altered or out of order";
  EXPECT_EQ(response.trailers, (std::map<std::string, std::string>{{"grpc-status", "0"}}));
  EXPECT_TRUE(response.closed);
  EXPECT_EQ(response.close_code, 0u);
  // The trailers come after the data (an RST_STREAM NO_ERROR may follow them).
  std::vector<std::uint8_t> frames = response.frames;
  std::erase(frames, NGHTTP2_RST_STREAM);
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back(), NGHTTP2_HEADERS) << "the trailers are not last";
  EXPECT_EQ(std::count(frames.begin(), frames.end(), NGHTTP2_HEADERS), 2);
}

TEST(Http2SessionNghttpTest, AnsweredRequestsReachTheClientWholeAndCloseOnce) {
  NghttpPeer peer;
  answerEach(peer, "the response");
  const std::int32_t first = peer.request(std::string("the request"));
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, first, "the response");
  const StreamRecord& stream = peer.recorder.streams.at(first);
  EXPECT_EQ(stream.body, "the request");
  EXPECT_TRUE(stream.ended);
  EXPECT_EQ(stream.closes, 1);
  EXPECT_EQ(stream.close_code, H2Error::kNoError);
  // The request's fields as nghttp2 encoded them (with its dynamic table and Huffman codes).
  const std::vector<std::pair<std::string, std::string>> fields = {
      {":method", "POST"},
      {":scheme", "http"},
      {":path", "/pkg.Service/Call"},
      {":authority", "localhost"},
      {"content-type", "application/grpc"},
      {"te", "trailers"}};
  EXPECT_EQ(stream.fields, fields);
  // More calls on the same connection, one after another and then three at once.
  for (int call = 0; call < 3; ++call) {
    const std::int32_t id = peer.request(std::string("again"));
    peer.pump();
    expectAnswered(peer, id, "the response");
  }
  const std::int32_t a = peer.request(std::string("x"));
  const std::int32_t b = peer.request();
  const std::int32_t c = peer.request(std::string(70'000, 'c'));
  peer.pump();
  peer.expectClean();
  for (const std::int32_t id : {a, b, c}) {
    expectAnswered(peer, id, "the response");
    EXPECT_EQ(peer.recorder.streams.at(id).closes, 1);
  }
  EXPECT_EQ(peer.recorder.streams.at(c).body.size(), 70'000u);
  EXPECT_EQ(peer.session.openStreams(), 0u);
}

TEST(Http2SessionNghttpTest, OurFirstHeaderBlockSetsTheClientsTableToZero) {
  NghttpPeer peer;
  answerEach(peer, "ok");
  const std::int32_t id = peer.request();
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, id, "ok");
  const std::vector<Frame> headers = framesOfType(parseFrames(peer.written), kHeaders);
  ASSERT_EQ(headers.size(), 2u);
  ASSERT_FALSE(headers[0].payload.empty());
  EXPECT_EQ(headers[0].payload[0], hpack::kTableSizeZero);
  EXPECT_EQ(headers[0].payload.substr(1), responseHeaders());
  // Once only: the trailers and later blocks are as submitted.
  EXPECT_EQ(headers[1].payload, trailersBlock());
  const std::int32_t next = peer.request();
  peer.pump();
  expectAnswered(peer, next, "ok");
  EXPECT_EQ(framesOfType(parseFrames(peer.written), kHeaders)[2].payload, responseHeaders());
}

TEST(Http2SessionNghttpTest, TheCloseIsReportedByOutputNotByTheSubmitCall) {
  NghttpPeer peer;
  const std::int32_t id = peer.request();
  peer.toServer();
  ASSERT_TRUE(peer.recorder.streams.at(id).ended);
  answer(peer.session, peer.recorder, id, "late");
  EXPECT_EQ(peer.recorder.streams.at(id).closes, 0);
  EXPECT_EQ(peer.session.openStreams(), 0u);
  EXPECT_EQ(peer.session.streamUser(id), nullptr);
  peer.toClient();
  EXPECT_EQ(peer.recorder.streams.at(id).closes, 1);
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, id, "late");
  EXPECT_EQ(peer.recorder.streams.at(id).closes, 1);
}

TEST(Http2SessionNghttpTest, TheClientSeesOurSettingsAndTheConnectionWindow) {
  Http2Limits limits;
  limits.max_concurrent_streams = 7;
  limits.max_header_list_bytes = 9000;
  limits.stream_window = 300'000;
  limits.connection_window = 5 << 20;
  NghttpPeer peer({}, limits);
  peer.pump();
  peer.expectClean();
  const auto remote = [&peer](nghttp2_settings_id id) {
    return nghttp2_session_get_remote_settings(peer.client, id);
  };
  EXPECT_EQ(remote(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS), 7u);
  EXPECT_EQ(remote(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE), 9000u);
  EXPECT_EQ(remote(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE), 300'000u);
  EXPECT_EQ(remote(NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES), 1u);
  EXPECT_EQ(remote(NGHTTP2_SETTINGS_MAX_FRAME_SIZE), 16'384u);  // not announced
  EXPECT_EQ(remote(NGHTTP2_SETTINGS_HEADER_TABLE_SIZE), 4096u);
  EXPECT_EQ(nghttp2_session_get_remote_window_size(peer.client), 5 << 20);
  // On the wire: SETTINGS, then the connection's WINDOW_UPDATE, then the ack of the client's.
  const std::vector<Frame> frames = parseFrames(peer.written);
  ASSERT_GE(frames.size(), 3u);
  EXPECT_EQ(frames[0].type, kSettings);
  EXPECT_EQ(frames[1].type, kWindowUpdate);
  EXPECT_EQ(frames[1].stream, 0);
  EXPECT_EQ(readBe32(frames[1].payload), (5u << 20) - 65'535);
  EXPECT_EQ(frames[2].type, kSettings);
  EXPECT_EQ(frames[2].flags, kAck);
  // The default: 4 MiB.
  NghttpPeer usual;
  usual.pump();
  EXPECT_EQ(nghttp2_session_get_remote_window_size(usual.client), 4 << 20);
  EXPECT_EQ(nghttp2_session_get_remote_settings(usual.client, NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE),
            1u << 20);
}

TEST(Http2SessionNghttpTest, AResponseLargerThanTheStreamWindowWaitsForWindowUpdates) {
  NghttpPeer peer({{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 100}});
  const std::string body = pattern(5000);
  const std::int32_t id = peer.request();
  peer.toServer();
  answer(peer.session, peer.recorder, id, body);
  // 100 bytes go out now; the rest and the trailers wait for the client's WINDOW_UPDATEs.
  const std::vector<Frame> first = parseFrames(peer.toClient());
  const std::vector<Frame> data = framesOfType(first, kData);
  ASSERT_EQ(data.size(), 1u);
  EXPECT_EQ(data[0].payload, body.substr(0, 100));
  EXPECT_EQ(framesOfType(first, kHeaders).size(), 1u);  // the response's, not the trailers
  EXPECT_EQ(peer.recorder.streams.at(id).closes, 0);
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, id, body);
  const Response& response = peer.responses.at(id);
  EXPECT_GE(response.data_frames.size(), 50u);
  EXPECT_LE(*std::max_element(response.data_frames.begin(), response.data_frames.end()), 100u);
  EXPECT_EQ(peer.recorder.streams.at(id).closes, 1);
}

TEST(Http2SessionNghttpTest, ResponsesLargerThanTheConnectionWindowWaitForItsUpdates) {
  // The client's streams may take 1 MiB, its connection the initial 65,535 bytes.
  NghttpPeer peer({{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}});
  const std::string one = pattern(300'000);
  const std::string two = std::string(200'000, 'z');
  const std::int32_t a = peer.request();
  const std::int32_t b = peer.request();
  peer.toServer();
  answer(peer.session, peer.recorder, a, one);
  answer(peer.session, peer.recorder, b, two);
  std::size_t sent = 0;
  for (const Frame& f : framesOfType(parseFrames(peer.toClient()), kData)) {
    sent += f.payload.size();
  }
  EXPECT_EQ(sent, 65'535u);
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, a, one);
  expectAnswered(peer, b, two);
}

TEST(Http2SessionNghttpTest, ALargerMaxFrameSizeLetsLargerDataFramesOut) {
  NghttpPeer peer(
      {{NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 65'536}, {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20}});
  ASSERT_EQ(nghttp2_session_set_local_window_size(peer.client, NGHTTP2_FLAG_NONE, 0, 1 << 20), 0);
  peer.pump();
  const std::string body = pattern(100'000);
  answerEach(peer, body);
  const std::int32_t id = peer.request();
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, id, body);
  EXPECT_EQ(peer.responses.at(id).data_frames, (std::vector<std::size_t>{65'536, 34'464}));
}

TEST(Http2SessionNghttpTest, AHeaderBlockLargerThanAFrameGoesOutWithContinuations) {
  NghttpPeer peer;
  const std::int32_t id = peer.request();
  peer.toServer();
  const std::string big(40'000, 'b');
  peer.recorder.in_submit = true;
  peer.session.submitHeaders(id, responseHeaders("x-big", big), false);
  peer.session.submitData(id, "body");
  peer.session.submitTrailers(id, trailersBlock());
  peer.recorder.in_submit = false;
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, id, "body");
  EXPECT_EQ(peer.responses.at(id).headers.at("x-big"), big);
  const std::vector<Frame> frames = parseFrames(peer.written);
  const auto start =
      std::find_if(frames.begin(), frames.end(), [](const Frame& f) { return f.type == kHeaders; });
  ASSERT_GE(std::distance(start, frames.end()), 3);
  const std::vector<Frame> block(start, start + 3);
  EXPECT_EQ(block[0].flags, 0);  // neither END_HEADERS nor END_STREAM
  EXPECT_EQ(block[0].payload.size(), 16'384u);
  EXPECT_EQ(block[1].type, kContinuation);
  EXPECT_EQ(block[1].flags, 0);
  EXPECT_EQ(block[1].payload.size(), 16'384u);
  EXPECT_EQ(block[2].type, kContinuation);
  EXPECT_EQ(block[2].flags, kEndHeaders);
  EXPECT_EQ(block[0].stream, id);
  EXPECT_EQ(block[2].stream, id);
}

TEST(Http2SessionNghttpTest, ARequestBodyLargerThanTheWindowsArrivesWhole) {
  NghttpPeer peer;
  answerEach(peer, "done");
  const std::string body = pattern(3 << 20);
  const std::int32_t id = peer.request(body);
  peer.pump();
  peer.expectClean();
  EXPECT_TRUE(peer.recorder.streams.at(id).ended);
  EXPECT_EQ(peer.recorder.streams.at(id).body.size(), body.size());
  EXPECT_TRUE(peer.recorder.streams.at(id).body == body);
  expectAnswered(peer, id, "done");
  std::size_t stream_credit = 0;
  std::size_t connection_credit = 0;
  for (const Frame& f : framesOfType(parseFrames(peer.written), kWindowUpdate)) {
    (f.stream == id ? stream_credit : connection_credit) += readBe32(f.payload);
  }
  // Half a window at a time: the stream's 1 MiB, the connection's 4 MiB (past the first).
  EXPECT_GE(stream_credit, 2u << 20);
  EXPECT_GE(connection_credit, (4u << 20) - 65'535 + (2u << 20));
}

TEST(Http2SessionNghttpTest, ABodyArrivingAfterOurAnswerIsIgnored) {
  NghttpPeer peer;
  const std::int32_t id = peer.request(std::string(1000, 'q'), /*held=*/true);
  peer.toServer();
  ASSERT_TRUE(peer.recorder.streams.at(id).headers_ended);
  answer(peer.session, peer.recorder, id, "early");
  // The client sends its body before it hears our answer.
  peer.release(id);
  EXPECT_GT(peer.toServer(), 1000u);
  EXPECT_EQ(peer.recorder.streams.at(id).body, "");
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, id, "early");
  EXPECT_EQ(peer.recorder.streams.at(id).closes, 1);
  // Our END_STREAM, then RST_STREAM NO_ERROR: the rest of the request is not wanted.
  const std::vector<Frame> frames = parseFrames(peer.written);
  const auto trailers = std::find_if(frames.rbegin(), frames.rend(),
                                     [](const Frame& f) { return f.type == kHeaders; });
  ASSERT_NE(trailers, frames.rend());
  EXPECT_EQ(trailers->flags & kEndStream, kEndStream);
  ASSERT_NE(trailers, frames.rbegin());
  const Frame& reset = *std::prev(trailers);
  EXPECT_EQ(reset.type, kRstStream);
  EXPECT_EQ(reset.stream, id);
  EXPECT_EQ(readBe32(reset.payload), 0u);
  // The connection serves on.
  answerEach(peer, "next");
  const std::int32_t next = peer.request(std::string("more"));
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, next, "next");
}

TEST(Http2SessionNghttpTest, TheClientsGoAwayIsReported) {
  NghttpPeer peer;
  peer.pump();
  ASSERT_EQ(nghttp2_submit_goaway(peer.client, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, nullptr, 0),
            0);
  peer.toServer();
  EXPECT_TRUE(peer.session.goAwayReceived());
  EXPECT_EQ(peer.recorder.goaways, 1);
  EXPECT_FALSE(peer.session.fatal());
}

TEST(Http2SessionNghttpTest, OurGoAwayNamesTheLastStreamAndTheClientRetriesTheRest) {
  NghttpPeer peer;
  const std::int32_t a = peer.request();
  peer.toServer();
  peer.session.submitGoAway(H2Error::kNoError);
  EXPECT_TRUE(peer.session.goAwaySent());
  const std::int32_t b = peer.request();  // before the client hears of our GOAWAY
  peer.pump();
  EXPECT_EQ(peer.recorder.streams.count(b), 0u);
  answer(peer.session, peer.recorder, a, "last");
  peer.pump();
  peer.expectClean();
  expectAnswered(peer, a, "last");
  // nghttp2 closes the stream past the last one with REFUSED_STREAM (safe to retry).
  EXPECT_TRUE(peer.responses[b].closed);
  EXPECT_EQ(peer.responses[b].close_code, static_cast<std::uint32_t>(NGHTTP2_REFUSED_STREAM));
  const std::vector<Frame> goaway = framesOfType(parseFrames(peer.written), kGoAway);
  ASSERT_EQ(goaway.size(), 1u);
  EXPECT_EQ(readBe32(goaway[0].payload), static_cast<std::uint32_t>(a));
}

}  // namespace
}  // namespace sluice::grpc::h2test
