// Http2Session (src/grpc/http2_session.cpp) against raw bytes a correct client never sends:
// connection errors (GOAWAY with their code, naming the last stream accepted), stream errors
// (RST_STREAM, the connection lives), and the bounds a hostile client meets.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grpc/http2_session.hpp"
#include "http2_session_test_support.hpp"

namespace sluice::grpc::h2test {
namespace {

/// `bytes` end the connection: receive() false, fatal(), and a GOAWAY last with `code` and
/// `last` as its last stream; nothing more is read.
void expectConnectionError(RawPeer& peer, std::string_view bytes, H2Error code, std::int32_t last) {
  EXPECT_FALSE(peer.send(bytes));
  EXPECT_TRUE(peer.session.fatal());
  EXPECT_FALSE(peer.session.error().empty());
  EXPECT_TRUE(peer.session.goAwaySent());
  const std::vector<Frame> frames = peer.read();
  ASSERT_FALSE(frames.empty());
  const Frame& goaway = frames.back();
  ASSERT_EQ(goaway.type, kGoAway);
  EXPECT_EQ(goaway.stream, 0);
  ASSERT_GE(goaway.payload.size(), 8u);
  EXPECT_EQ(readBe32(goaway.payload), static_cast<std::uint32_t>(last));
  EXPECT_EQ(readBe32(goaway.payload.substr(4)), static_cast<std::uint32_t>(code))
      << peer.session.error();
  EXPECT_EQ(framesOfType(frames, kGoAway).size(), 1u);
  EXPECT_FALSE(peer.send(pingFrame()));
  EXPECT_FALSE(peer.session.hasOutput());
}

struct ErrorCase {
  const char* what;
  std::string bytes;
  H2Error code;
  std::int32_t last = 1;
};

std::string settingsEntries(std::size_t count) {
  std::vector<std::pair<std::uint16_t, std::uint32_t>> entries(count, {0x3, 100});
  return settingsFrame(entries);
}

/// Declarative table: every connection error, after stream 1 opened (and not answered).
std::vector<ErrorCase> connectionErrors() {
  const std::string no_end = frame(kHeaders, 0, 3, requestBlock());
  return {
      {"a frame over 16384 bytes", frameWithLength(16'385, kData, 0, 1, ""),
       H2Error::kFrameSizeError},
      {"DATA on stream 0", dataFrame(0, "x", false), H2Error::kProtocolError},
      {"HEADERS on stream 0", headersFrame(0, requestBlock(), true), H2Error::kProtocolError},
      {"HEADERS on an even stream", headersFrame(2, requestBlock(), true), H2Error::kProtocolError},
      {"DATA on an idle stream", dataFrame(3, "x", false), H2Error::kProtocolError},
      {"RST_STREAM on an idle stream", rstStream(5, H2Error::kCancel), H2Error::kProtocolError},
      {"RST_STREAM on stream 0", rstStream(0, H2Error::kCancel), H2Error::kProtocolError},
      {"RST_STREAM of 3 bytes", frame(kRstStream, 0, 1, "abc"), H2Error::kFrameSizeError},
      {"WINDOW_UPDATE on an idle stream", windowUpdate(3, 10), H2Error::kProtocolError},
      {"WINDOW_UPDATE of 3 bytes", frame(kWindowUpdate, 0, 0, "abc"), H2Error::kFrameSizeError},
      {"WINDOW_UPDATE of 0 on the connection", windowUpdate(0, 0), H2Error::kProtocolError},
      {"the connection's window over 2^31-1", windowUpdate(0, 0x7fff'ffff),
       H2Error::kFlowControlError},
      {"PUSH_PROMISE", frame(kPushPromise, kEndHeaders, 1, be32(2) + requestBlock()),
       H2Error::kProtocolError},
      {"SETTINGS of 5 bytes", frame(kSettings, 0, 0, "abcde"), H2Error::kFrameSizeError},
      {"a SETTINGS ack with a payload", frame(kSettings, kAck, 0, std::string(6, '\0')),
       H2Error::kFrameSizeError},
      {"SETTINGS on a stream", frame(kSettings, 0, 1, ""), H2Error::kProtocolError},
      {"ENABLE_PUSH 2", settingsFrame({{0x2, 2}}), H2Error::kProtocolError},
      {"MAX_FRAME_SIZE 16383", settingsFrame({{0x5, 16'383}}), H2Error::kProtocolError},
      {"MAX_FRAME_SIZE 2^24", settingsFrame({{0x5, 1 << 24}}), H2Error::kProtocolError},
      {"INITIAL_WINDOW_SIZE 2^31", settingsFrame({{0x4, 0x8000'0000}}), H2Error::kFlowControlError},
      {"INITIAL_WINDOW_SIZE taking an open stream's window over 2^31-1",
       windowUpdate(1, 0x7fff'ffff - 65'535) + settingsFrame({{0x4, 65'536}}),
       H2Error::kFlowControlError},
      {"more than 32 SETTINGS entries", settingsEntries(33), H2Error::kEnhanceYourCalm},
      {"PING of 7 bytes", frame(kPing, 0, 0, "1234567"), H2Error::kFrameSizeError},
      {"PING on a stream", frame(kPing, 0, 1, "12345678"), H2Error::kProtocolError},
      {"GOAWAY of 7 bytes", frame(kGoAway, 0, 0, "1234567"), H2Error::kFrameSizeError},
      {"PRIORITY on stream 0", frame(kPriority, 0, 0, "12345"), H2Error::kProtocolError},
      // Stream 3's request was never whole: the GOAWAY names stream 1.
      {"an HPACK index beyond the tables", headersFrame(3, indexedField(70), true),
       H2Error::kCompressionError, 1},
      {"DATA padding as long as the frame", frame(kData, kPadded, 1, "\x03xy"),
       H2Error::kProtocolError},
      {"PADDED DATA without a pad length", frame(kData, kPadded, 1, ""), H2Error::kProtocolError},
      {"HEADERS padding longer than the frame",
       frame(kHeaders, kPadded | kEndHeaders, 3, "\x40" + requestBlock()), H2Error::kProtocolError},
      {"CONTINUATION without its HEADERS", frame(kContinuation, kEndHeaders, 1, requestBlock()),
       H2Error::kProtocolError},
      {"a PING inside a header block", no_end + pingFrame(), H2Error::kProtocolError},
      {"CONTINUATION of another stream",
       no_end + frame(kContinuation, kEndHeaders, 5, requestBlock()), H2Error::kProtocolError},
      {"nine CONTINUATION frames", splitBlock(3, requestBlock(), 9, true),
       H2Error::kEnhanceYourCalm},
  };
}

TEST(Http2SessionConnectionErrorTest, EachConnectionErrorSendsGoAwayWithItsCode) {
  for (const ErrorCase& error : connectionErrors()) {
    SCOPED_TRACE(error.what);
    RawPeer peer;
    peer.start();
    peer.open(1, true);
    expectConnectionError(peer, error.bytes, error.code, error.last);
  }
}

TEST(Http2SessionConnectionErrorTest, BeforeAnyStreamTheGoAwayNamesStreamZero) {
  RawPeer peer;
  peer.start();
  expectConnectionError(peer, dataFrame(0, "x", true), H2Error::kProtocolError, 0);
}

TEST(Http2SessionConnectionErrorTest, AFrameTooLargeIsRefusedFromItsHeaderAlone) {
  RawPeer peer;
  peer.start();
  expectConnectionError(peer, frameWithLength(1 << 20, kHeaders, 0, 1, ""),
                        H2Error::kFrameSizeError, 0);
}

TEST(Http2SessionConnectionErrorTest, ABadPrefaceEndsTheConnectionWithoutAWord) {
  RawPeer peer;
  peer.read();  // our SETTINGS, queued by the constructor
  EXPECT_TRUE(peer.send(kPreface.substr(0, 10)));
  EXPECT_FALSE(peer.send("GET / HTTP/1.1\r\n\r\n"));
  EXPECT_TRUE(peer.session.fatal());
  EXPECT_FALSE(peer.session.goAwaySent());
  EXPECT_FALSE(peer.session.hasOutput());
  EXPECT_EQ(peer.session.error(), "bad connection preface");
  EXPECT_FALSE(peer.send(settingsFrame({})));
  EXPECT_TRUE(peer.recorder.events.empty());
}

TEST(Http2SessionConnectionErrorTest, TheFirstFrameMustBeSettings) {
  RawPeer peer;
  expectConnectionError(peer, std::string(kPreface) + pingFrame(), H2Error::kProtocolError, 0);
  EXPECT_EQ(peer.recorder.pings, 0);
  RawPeer headers_first;
  expectConnectionError(headers_first,
                        std::string(kPreface) + headersFrame(1, requestBlock(), true),
                        H2Error::kProtocolError, 0);
  EXPECT_TRUE(headers_first.recorder.streams.empty());
}

struct StreamErrorCase {
  const char* what;
  bool request_ended;  // stream 1's HEADERS carried END_STREAM
  std::string bytes;
  H2Error code;
};

/// Declarative table: every stream error, on stream 1.
std::vector<StreamErrorCase> streamErrors() {
  return {
      {"WINDOW_UPDATE of 0 on a stream", false, windowUpdate(1, 0), H2Error::kProtocolError},
      {"a stream's window over 2^31-1", false, windowUpdate(1, 0x7fff'ffff - 65'535 + 1),
       H2Error::kFlowControlError},
      {"DATA after END_STREAM", true, dataFrame(1, "late", false), H2Error::kStreamClosed},
      {"trailers after END_STREAM", true, headersFrame(1, trailersBlock(), true),
       H2Error::kStreamClosed},
      {"trailers without END_STREAM", false, headersFrame(1, trailersBlock(), false),
       H2Error::kProtocolError},
      {"PRIORITY of 4 bytes", false, frame(kPriority, 0, 1, "1234"), H2Error::kFrameSizeError},
  };
}

TEST(Http2SessionStreamErrorTest, EachStreamErrorResetsTheStreamAndTheConnectionLives) {
  for (const StreamErrorCase& error : streamErrors()) {
    SCOPED_TRACE(error.what);
    RawPeer peer;
    peer.start();
    peer.open(1, error.request_ended);
    EXPECT_TRUE(peer.send(error.bytes)) << peer.session.error();
    const std::vector<Frame> resets = framesOfType(peer.read(), kRstStream);
    ASSERT_EQ(resets.size(), 1u);
    EXPECT_EQ(resets[0].stream, 1);
    EXPECT_EQ(readBe32(resets[0].payload), static_cast<std::uint32_t>(error.code));
    EXPECT_EQ(peer.recorder.streams.at(1).closes, 1);
    EXPECT_EQ(peer.recorder.streams.at(1).close_code, error.code);
    EXPECT_EQ(peer.session.openStreams(), 0u);
    // The connection serves on, and HPACK still follows (trailers' blocks are decoded).
    peer.open(3, true);
    EXPECT_EQ(peer.recorder.streams.at(3).fields.size(), 5u);
    EXPECT_FALSE(peer.session.fatal());
  }
}

TEST(Http2SessionStreamErrorTest, DataBeyondTheStreamWindowIsAFlowControlError) {
  Http2Limits limits;
  limits.stream_window = 1000;
  RawPeer peer(limits);
  peer.start();
  // Until the client acknowledges our SETTINGS, a stream's window is at least 65,535.
  EXPECT_TRUE(peer.send(frame(kSettings, 0x1, 0, {})));
  peer.open(1, false);
  // 600 bytes credit the window again (over half of it); 1000 more fit exactly.
  EXPECT_TRUE(peer.send(dataFrame(1, std::string(600, 'a'), false)));
  std::vector<Frame> updates = framesOfType(peer.read(), kWindowUpdate);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].stream, 1);
  EXPECT_EQ(readBe32(updates[0].payload), 600u);
  EXPECT_TRUE(peer.send(dataFrame(1, std::string(1000, 'b'), false)));
  // Credited too, and then a frame one byte over the window.
  EXPECT_TRUE(peer.send(dataFrame(1, std::string(1001, 'c'), false)));
  const std::vector<Frame> frames = peer.read();
  const std::vector<Frame> resets = framesOfType(frames, kRstStream);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(readBe32(resets[0].payload), static_cast<std::uint32_t>(H2Error::kFlowControlError));
  EXPECT_EQ(peer.recorder.streams.at(1).body.size(), 1600u);
  EXPECT_EQ(peer.recorder.streams.at(1).close_code, H2Error::kFlowControlError);
  EXPECT_FALSE(peer.session.fatal());
}

TEST(Http2SessionBoundsTest, StreamsOverTheLimitAreRefusedAndHpackStaysInStep) {
  Http2Limits limits;
  limits.max_concurrent_streams = 2;
  RawPeer peer(limits);
  peer.start();
  peer.open(1, false);
  peer.open(3, false);
  // Stream 5 is refused, but its block's new table entry must still be learnt.
  EXPECT_TRUE(peer.send(headersFrame(5, requestBlock() + indexedLiteral("x-key", "v5"), false)));
  const std::vector<Frame> resets = framesOfType(peer.read(), kRstStream);
  ASSERT_EQ(resets.size(), 1u);
  EXPECT_EQ(resets[0].stream, 5);
  EXPECT_EQ(readBe32(resets[0].payload), static_cast<std::uint32_t>(H2Error::kRefusedStream));
  EXPECT_EQ(peer.recorder.streams.count(5), 0u);
  EXPECT_EQ(peer.session.openStreams(), 2u);
  // Its DATA, sent before the client knew, is dropped.
  EXPECT_TRUE(peer.send(dataFrame(5, "body", true)));
  // Once a stream closes, a new one is served and decodes the entry stream 5 added.
  EXPECT_TRUE(peer.send(rstStream(1, H2Error::kCancel)));
  EXPECT_TRUE(peer.send(headersFrame(7, requestBlock() + indexedField(62), true)))
      << peer.session.error();
  ASSERT_EQ(peer.recorder.streams.count(7), 1u);
  EXPECT_EQ(peer.recorder.streams.at(7).fields.back(),
            (std::pair<std::string, std::string>{"x-key", "v5"}));
  EXPECT_EQ(peer.session.openStreams(), 2u);
}

TEST(Http2SessionBoundsTest, ARapidResetFloodEndsTheConnection) {
  RawPeer peer;
  peer.start();
  peer.open(1, false);
  std::string burst;
  for (int i = 0; i < 1000; ++i) {
    burst += rstStream(1, H2Error::kCancel);
  }
  EXPECT_TRUE(peer.send(burst));  // the burst allowed
  EXPECT_EQ(peer.recorder.streams.at(1).closes, 1);
  EXPECT_EQ(peer.recorder.streams.at(1).close_code, H2Error::kCancel);
  peer.read();
  // A second later, 33 more.
  peer.now += std::chrono::seconds(1);
  std::string refill;
  for (int i = 0; i < 33; ++i) {
    refill += rstStream(1, H2Error::kCancel);
  }
  EXPECT_TRUE(peer.send(refill));
  EXPECT_FALSE(peer.session.hasOutput());
  expectConnectionError(peer, rstStream(1, H2Error::kCancel), H2Error::kEnhanceYourCalm, 1);
}

/// "MadeYouReset" (CVE-2025-8671): a client that makes us reset its streams, each one a
/// request the handler already started on, is held to the rapid-reset bound too.
TEST(Http2SessionBoundsTest, StreamErrorsTheClientProvokesCountAsResets) {
  RawPeer peer;
  peer.start();
  std::string burst;
  for (std::int32_t id = 1; id < 2 * 1000; id += 2) {
    burst += headersFrame(id, requestBlock(), true) + windowUpdate(id, 0);
  }
  EXPECT_TRUE(peer.send(burst)) << peer.session.error();
  EXPECT_EQ(framesOfType(peer.read(), kRstStream).size(), 1000u);
  EXPECT_EQ(peer.recorder.streams.at(1999).close_code, H2Error::kProtocolError);
  peer.open(2001, true);
  expectConnectionError(peer, windowUpdate(2001, 0), H2Error::kEnhanceYourCalm, 2001);
}

TEST(Http2SessionBoundsTest, ResetsWithinTheRateAreServedForever) {
  RawPeer peer;
  peer.start();
  for (std::int32_t id = 1; id < 2 * 3000; id += 2) {
    peer.now += std::chrono::milliseconds(31);  // a little under 33 a second
    peer.open(id, false);
    ASSERT_TRUE(peer.send(rstStream(id, H2Error::kCancel))) << id;
    peer.read();
  }
  EXPECT_EQ(peer.recorder.streams.size(), 3000u);
  EXPECT_EQ(peer.session.openStreams(), 0u);
}

TEST(Http2SessionBoundsTest, APingFloodEndsTheConnectionWithoutGoAway) {
  RawPeer peer;
  peer.start();
  std::string pings;
  for (int i = 0; i < 1000; ++i) {
    pings += pingFrame();
  }
  EXPECT_TRUE(peer.send(pings));
  EXPECT_EQ(framesOfType(peer.read(), kPing).size(), 1000u);
  // output() read the acks: another thousand may come, but not one more before it.
  EXPECT_TRUE(peer.send(pings));
  EXPECT_FALSE(peer.send(pingFrame()));
  EXPECT_TRUE(peer.session.fatal());
  EXPECT_FALSE(peer.session.goAwaySent());
  EXPECT_EQ(framesOfType(peer.read(), kGoAway).size(), 0u);
  EXPECT_EQ(peer.recorder.pings, 2000);
}

TEST(Http2SessionBoundsTest, ASettingsFloodEndsTheConnectionToo) {
  RawPeer peer;
  peer.start();
  std::string settings;
  for (int i = 0; i < 1001; ++i) {
    settings += settingsEntries(32);  // 32 entries are allowed
  }
  EXPECT_FALSE(peer.send(settings));
  EXPECT_TRUE(peer.session.fatal());
  EXPECT_FALSE(peer.session.goAwaySent());
}

}  // namespace
}  // namespace sluice::grpc::h2test
