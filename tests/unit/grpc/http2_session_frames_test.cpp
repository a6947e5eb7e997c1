// Http2Session (src/grpc/http2_session.cpp) against raw frames a correct client may send but
// nghttp2's client does not (CONTINUATION, padding, priorities, unknown types), the send
// window moved by SETTINGS, GOAWAY and PING, and delivery one byte at a time.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "grpc/http2_session.hpp"
#include "http2_session_test_support.hpp"

namespace sluice::grpc::h2test {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

const Fields kRequestFields = {{":method", "POST"},
                               {":scheme", "http"},
                               {":path", "/pkg.Service/Call"},
                               {":authority", "localhost"},
                               {"content-type", "application/grpc"}};

TEST(Http2SessionFramesTest, AHeaderBlockInContinuationsIsDecodedWhole) {
  RawPeer peer;
  peer.start();
  EXPECT_TRUE(peer.send(splitBlock(1, requestBlock(), 2, true)));
  // Eight CONTINUATION frames are the most one block may take.
  EXPECT_TRUE(peer.send(splitBlock(3, requestBlock(), 8, false))) << peer.session.error();
  for (const std::int32_t id : {1, 3}) {
    ASSERT_EQ(peer.recorder.streams.count(id), 1u);
    EXPECT_EQ(peer.recorder.streams.at(id).fields, kRequestFields);
    EXPECT_TRUE(peer.recorder.streams.at(id).headers_ended);
  }
  EXPECT_TRUE(peer.recorder.streams.at(1).ended);  // END_STREAM was on the HEADERS frame
  EXPECT_FALSE(peer.recorder.streams.at(3).ended);
  EXPECT_EQ(peer.session.openStreams(), 2u);
}

TEST(Http2SessionFramesTest, PaddingIsStrippedAndCountsAgainstTheWindow) {
  Http2Limits limits;
  limits.stream_window = 100;
  RawPeer peer(limits);
  peer.start();
  const std::string block = requestBlock();
  EXPECT_TRUE(peer.send(frame(kHeaders, kPadded | kEndHeaders, 1,
                              std::string(1, '\x0a') + block + std::string(10, '\0'))));
  EXPECT_EQ(peer.recorder.streams.at(1).fields, kRequestFields);
  // 1 + 10 + 50 bytes: all of them count, so the window is credited by 61.
  EXPECT_TRUE(peer.send(
      frame(kData, kPadded, 1, "\x32" + std::string("0123456789") + std::string(50, '\0'))));
  EXPECT_EQ(peer.recorder.streams.at(1).body, "0123456789");
  const std::vector<Frame> updates = framesOfType(peer.read(), kWindowUpdate);
  ASSERT_EQ(updates.size(), 1u);
  EXPECT_EQ(updates[0].stream, 1);
  EXPECT_EQ(readBe32(updates[0].payload), 61u);
  // Padding only (a pad length of the frame's size less one), then a zero pad length.
  EXPECT_TRUE(peer.send(frame(kData, kPadded, 1, std::string(1, '\x03') + "pad")));
  EXPECT_TRUE(peer.send(frame(kData, kPadded | kEndStream, 1, std::string(1, '\0') + "end")));
  EXPECT_EQ(peer.recorder.streams.at(1).body, "0123456789end");
  EXPECT_TRUE(peer.recorder.streams.at(1).ended);
  EXPECT_FALSE(peer.session.fatal());
}

TEST(Http2SessionFramesTest, PrioritiesAndUnknownFramesAreSkipped) {
  RawPeer peer;
  peer.start();
  // HEADERS with PRIORITY (dependency and weight: 5 bytes), padded too.
  const std::string priority = be32(0x8000'0000) + "\x10";
  EXPECT_TRUE(
      peer.send(frame(kHeaders, kPriorityFlag | kEndHeaders, 1, priority + requestBlock())));
  EXPECT_TRUE(peer.send(frame(kHeaders, kPriorityFlag | kPadded | kEndHeaders, 3,
                              "\x04" + priority + requestBlock() + std::string(4, '\0'))));
  EXPECT_EQ(peer.recorder.streams.at(1).fields, kRequestFields);
  EXPECT_EQ(peer.recorder.streams.at(3).fields, kRequestFields);
  // PRIORITY frames, on an open stream and on an idle one, and unknown frame types.
  EXPECT_TRUE(peer.send(frame(kPriority, 0, 1, priority)));
  EXPECT_TRUE(peer.send(frame(kPriority, 0, 11, priority)));
  EXPECT_TRUE(peer.send(frame(0xfa, 0xff, 0, "whatever")));
  EXPECT_TRUE(peer.send(frame(0x0b, 0, 1, "")));
  EXPECT_TRUE(peer.send(dataFrame(1, "body", true)));
  EXPECT_EQ(peer.recorder.streams.at(1).body, "body");
  EXPECT_TRUE(peer.read().empty());
  // Stream 11 is still idle: it may be opened.
  peer.open(11, true);
  EXPECT_EQ(peer.recorder.streams.count(11), 1u);
  EXPECT_FALSE(peer.session.fatal());
}

TEST(Http2SessionFramesTest, TrailersEndTheRequest) {
  RawPeer peer;
  peer.start();
  peer.open(1, false);
  EXPECT_TRUE(peer.send(dataFrame(1, "body", false)));
  EXPECT_TRUE(peer.send(headersFrame(1, trailersBlock(), true)));
  const std::vector<std::string> events = {"open 1",
                                           "field 1 :method=POST",
                                           "field 1 :scheme=http",
                                           "field 1 :path=/pkg.Service/Call",
                                           "field 1 :authority=localhost",
                                           "field 1 content-type=application/grpc",
                                           "headers 1",
                                           "data 1 4",
                                           "data 1 0 end"};
  EXPECT_EQ(peer.recorder.events, events);  // the trailers' fields are not reported
}

TEST(Http2SessionFlowTest, ALoweredInitialWindowHoldsTheDataUntilItIsRaised) {
  RawPeer peer;
  peer.start();
  peer.open(1, true);
  peer.session.submitHeaders(1, responseHeaders(), false);
  peer.session.submitData(1, std::string(1000, 'a'));
  EXPECT_EQ(framesOfType(peer.read(), kData).size(), 1u);
  // The window goes to 100 - 1000: below zero.
  EXPECT_TRUE(peer.send(settingsFrame({{0x4, 100}})));
  std::vector<Frame> frames = peer.read();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].flags, kAck);
  peer.session.submitData(1, "held");
  peer.session.submitTrailers(1, trailersBlock());
  EXPECT_FALSE(peer.session.hasOutput());
  // 800 more leaves it at -100: still nothing.
  EXPECT_TRUE(peer.send(windowUpdate(1, 800)));
  EXPECT_FALSE(peer.session.hasOutput());
  // Raised to 65,535 again: the data, then the trailers that waited behind it.
  EXPECT_TRUE(peer.send(settingsFrame({{0x4, 65'535}})));
  frames = peer.read();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].type, kSettings);  // the ack, queued before the data it lets out
  EXPECT_EQ(frames[0].flags, kAck);
  EXPECT_EQ(frames[1].type, kData);
  EXPECT_EQ(frames[1].payload, "held");
  EXPECT_EQ(frames[2].type, kHeaders);
  EXPECT_EQ(frames[2].flags, kEndHeaders | kEndStream);
  EXPECT_EQ(frames[2].payload, trailersBlock());
  EXPECT_EQ(peer.recorder.streams.at(1).closes, 1);
}

TEST(Http2SessionFlowTest, AZeroConnectionWindowHoldsEveryStream) {
  RawPeer peer;
  peer.start();
  peer.open(1, true);
  peer.open(3, true);
  peer.session.submitData(1, std::string(65'535, 'a'));
  peer.session.submitData(3, "three");
  peer.session.submitTrailers(3, trailersBlock());
  std::vector<Frame> frames = peer.read();
  EXPECT_EQ(framesOfType(frames, kData).size(), 4u);  // 16,384 bytes each at most
  EXPECT_EQ(framesOfType(frames, kHeaders).size(), 0u);
  EXPECT_EQ(peer.recorder.streams.at(3).closes, 0);
  EXPECT_TRUE(peer.send(windowUpdate(0, 3)));
  frames = peer.read();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].payload, "thr");
  EXPECT_TRUE(peer.send(windowUpdate(0, 100)));
  frames = peer.read();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].payload, "ee");
  EXPECT_EQ(frames[1].type, kHeaders);
  EXPECT_EQ(peer.recorder.streams.at(3).closes, 1);
}

/// A connection WINDOW_UPDATE lets out only what waited for the connection's window: a stream
/// waiting for its own stays put however many come (and they do not walk the streams).
TEST(Http2SessionFlowTest, AStreamWaitingForItsOwnWindowIsLeftByConnectionUpdates) {
  RawPeer peer;
  peer.start();
  EXPECT_TRUE(peer.send(settingsFrame({{0x4, 10}})));  // INITIAL_WINDOW_SIZE 10
  peer.read();
  peer.open(1, true);
  peer.session.submitData(1, std::string(100, 'a'));
  peer.session.submitTrailers(1, trailersBlock());
  std::vector<Frame> frames = peer.read();
  ASSERT_EQ(framesOfType(frames, kData).size(), 1u);
  EXPECT_EQ(framesOfType(frames, kData)[0].payload.size(), 10u);
  std::string updates;
  for (int i = 0; i < 1000; ++i) {
    updates += windowUpdate(0, 5);
  }
  EXPECT_TRUE(peer.send(updates));
  EXPECT_TRUE(peer.read().empty());
  EXPECT_TRUE(peer.send(windowUpdate(1, 90)));
  frames = peer.read();
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].payload, std::string(90, 'a'));
  EXPECT_EQ(frames[1].type, kHeaders);
  EXPECT_EQ(peer.recorder.streams.at(1).closes, 1);
}

TEST(Http2SessionFlowTest, AnEarlyAnswerResetsTheRestOfTheRequest) {
  RawPeer peer;
  peer.start();
  peer.open(1, false);
  answer(peer.session, peer.recorder, 1, "early");
  std::vector<Frame> frames = peer.read();
  ASSERT_EQ(frames.size(), 4u);
  EXPECT_EQ(frames[2].type, kHeaders);
  EXPECT_EQ(frames[2].flags & kEndStream, kEndStream);
  EXPECT_EQ(frames[3].type, kRstStream);
  EXPECT_EQ(readBe32(frames[3].payload), static_cast<std::uint32_t>(H2Error::kNoError));
  EXPECT_EQ(peer.recorder.streams.at(1).closes, 1);
  // The body the client sent before it knew: dropped, and its window credited all the same.
  const std::string chunk(16'384, 'x');
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(peer.send(dataFrame(1, chunk, i == 299))) << peer.session.error();
  }
  EXPECT_EQ(peer.recorder.streams.at(1).body, "");
  EXPECT_EQ(framesOfType(peer.read(), kWindowUpdate).size(), 2u);  // the connection's
  EXPECT_TRUE(peer.send(headersFrame(1, trailersBlock(), true)));  // decoded, not served
  peer.open(3, true);
  EXPECT_EQ(peer.recorder.streams.at(3).fields, kRequestFields);
  EXPECT_FALSE(peer.session.fatal());
}

TEST(Http2SessionStreamTest, TheClientsResetClosesTheStream) {
  RawPeer peer;
  peer.start();
  peer.open(1, false);
  EXPECT_NE(peer.session.streamUser(1), nullptr);
  EXPECT_TRUE(peer.send(rstStream(1, H2Error::kCancel)));
  EXPECT_EQ(peer.recorder.events.back(), "close 1 8");
  EXPECT_EQ(peer.recorder.streams.at(1).closes, 1);
  EXPECT_EQ(peer.session.streamUser(1), nullptr);
  EXPECT_EQ(peer.session.openStreams(), 0u);
  // What the handler still submits for it goes nowhere.
  answer(peer.session, peer.recorder, 1, "nobody listens");
  peer.session.submitRstStream(1, H2Error::kCancel);
  EXPECT_FALSE(peer.session.hasOutput());
  EXPECT_TRUE(peer.send(windowUpdate(1, 100)));  // a closed stream's: ignored
  EXPECT_TRUE(peer.send(dataFrame(1, "late", true)));
  EXPECT_EQ(peer.recorder.streams.at(1).closes, 1);
}

TEST(Http2SessionStreamTest, OurResetClosesTheStreamAtTheNextOutput) {
  RawPeer peer;
  peer.start();
  peer.open(1, false);
  peer.recorder.in_submit = true;
  peer.session.submitRstStream(1, H2Error::kCancel);
  peer.recorder.in_submit = false;
  EXPECT_EQ(peer.recorder.streams.at(1).closes, 0);
  const std::vector<Frame> frames = peer.read();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].type, kRstStream);
  EXPECT_EQ(readBe32(frames[0].payload), static_cast<std::uint32_t>(H2Error::kCancel));
  EXPECT_EQ(peer.recorder.events.back(), "close 1 8");
}

TEST(Http2SessionGoAwayTest, StreamsAfterOurGoAwayAreIgnoredButDecoded) {
  RawPeer peer;
  peer.start();
  peer.open(1, false);
  peer.open(3, true);
  peer.session.submitGoAway(H2Error::kNoError, "bye");
  std::vector<Frame> frames = peer.read();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].type, kGoAway);
  EXPECT_EQ(readBe32(frames[0].payload), 3u);
  EXPECT_EQ(readBe32(frames[0].payload.substr(4)), 0u);
  EXPECT_EQ(frames[0].payload.substr(8), "bye");
  // Stream 5 adds a table entry that stream 7 uses: both ignored, both decoded.
  EXPECT_TRUE(peer.send(headersFrame(5, requestBlock() + indexedLiteral("x-key", "v"), true)));
  EXPECT_TRUE(peer.send(headersFrame(7, requestBlock() + indexedField(62), false)))
      << peer.session.error();
  EXPECT_TRUE(peer.send(dataFrame(7, "ignored", true)));
  EXPECT_EQ(peer.recorder.streams.count(5), 0u);
  EXPECT_EQ(peer.recorder.streams.count(7), 0u);
  // The streams before it are served to their end.
  EXPECT_TRUE(peer.send(dataFrame(1, "one", true)));
  EXPECT_EQ(peer.recorder.streams.at(1).body, "one");
  answer(peer.session, peer.recorder, 1, "done");
  answer(peer.session, peer.recorder, 3, "done");
  frames = peer.read();
  EXPECT_EQ(framesOfType(frames, kHeaders).size(), 4u);
  EXPECT_EQ(peer.session.openStreams(), 0u);
  // Even an ignored stream's block is decoded: a bad one is still a COMPRESSION_ERROR.
  EXPECT_FALSE(peer.send(headersFrame(9, indexedField(70), true)));
  frames = peer.read();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(readBe32(frames[0].payload), 3u);
  EXPECT_EQ(readBe32(frames[0].payload.substr(4)),
            static_cast<std::uint32_t>(H2Error::kCompressionError));
}

TEST(Http2SessionGoAwayTest, TheClientsGoAwayIsReported) {
  RawPeer peer;
  peer.start();
  peer.open(1, true);
  EXPECT_TRUE(peer.send(frame(kGoAway, 0, 0, be32(0) + be32(0) + "debug")));
  EXPECT_TRUE(peer.session.goAwayReceived());
  EXPECT_EQ(peer.recorder.goaways, 1);
  answer(peer.session, peer.recorder, 1, "still answered");
  EXPECT_EQ(framesOfType(peer.read(), kData).size(), 1u);
}

TEST(Http2SessionPingTest, APingIsAckedWithItsBytes) {
  RawPeer peer;
  peer.start();
  EXPECT_TRUE(peer.send(pingFrame("\x01\x02\x03\x04\x05\x06\x07\x08")));
  EXPECT_EQ(peer.recorder.pings, 1);
  std::vector<Frame> frames = peer.read();
  ASSERT_EQ(frames.size(), 1u);
  EXPECT_EQ(frames[0].type, kPing);
  EXPECT_EQ(frames[0].flags, kAck);
  EXPECT_EQ(frames[0].stream, 0);
  EXPECT_EQ(frames[0].payload, "\x01\x02\x03\x04\x05\x06\x07\x08");
  // An ack from the client is not answered.
  EXPECT_TRUE(peer.send(frame(kPing, kAck, 0, "abcdefgh")));
  EXPECT_EQ(peer.recorder.pings, 1);
  EXPECT_FALSE(peer.session.hasOutput());
}

/// Two calls, a ping and the frames around them, as one client's bytes.
std::string conversation() {
  std::string bytes(kPreface);
  bytes += settingsFrame({{0x4, 1 << 20}, {0x5, 20'000}});
  bytes += headersFrame(1, requestBlock() + indexedLiteral("x-key", "one"), false);
  bytes += frame(kData, kPadded, 1, "\x03" + std::string("hello") + std::string(3, '\0'));
  bytes += dataFrame(1, std::string(16'000, 'w'), false);
  bytes += pingFrame();
  bytes += dataFrame(1, "", true);
  bytes += splitBlock(3, requestBlock() + indexedField(62), 3, false);
  bytes += headersFrame(3, trailersBlock(), true);
  bytes += windowUpdate(0, 1000);
  bytes += frame(kSettings, kAck, 0, "");
  return bytes;
}

TEST(Http2SessionDeliveryTest, OneByteAtATimeGivesTheSameEventsAndBytes) {
  const auto run = [](std::size_t step) {
    RawPeer peer;
    peer.recorder.on_request = [&peer](std::int32_t id) {
      answer(peer.session, peer.recorder, id, std::string(30'000, static_cast<char>('0' + id)));
    };
    const std::string bytes = conversation();
    for (std::size_t at = 0; at < bytes.size(); at += step) {
      EXPECT_TRUE(peer.send(std::string_view(bytes).substr(at, step))) << peer.session.error();
    }
    std::string out;
    peer.session.output(out);
    return std::make_pair(peer.recorder.events, out);
  };
  const auto whole = run(1 << 20);
  const auto bytewise = run(1);
  EXPECT_EQ(bytewise.first, whole.first);
  EXPECT_TRUE(bytewise.second == whole.second) << "the server wrote other bytes";
  // What the whole delivery gave, to be sure it is the conversation.
  const std::vector<std::string>& events = whole.first;
  EXPECT_EQ(std::count(events.begin(), events.end(), "field 3 x-key=one"), 1);
  EXPECT_EQ(std::count(events.begin(), events.end(), "ping"), 1);
  EXPECT_EQ(std::count(events.begin(), events.end(), "close 1 0"), 1);
  EXPECT_EQ(std::count(events.begin(), events.end(), "close 3 0"), 1);
  EXPECT_EQ(std::count(events.begin(), events.end(), "data 1 5"), 1);
  EXPECT_EQ(events.back(), "close 3 0");
  std::size_t data = 0;
  for (const Frame& f : framesOfType(parseFrames(whole.second), kData)) {
    EXPECT_LE(f.payload.size(), 20'000u);
    data += f.payload.size();
  }
  EXPECT_EQ(data, 60'000u);
}

}  // namespace
}  // namespace sluice::grpc::h2test
