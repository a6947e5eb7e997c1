#include "http/plain_request.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "fuzz/plain_request_oracle.hpp"

namespace sluice::http {
namespace {

using testing::differs;
using testing::readPlain;
using testing::ReadRequest;
using testing::readWithBeast;

constexpr PlainLimits kLimits{1024, 256};

const std::string kDecision =
    "POST /shouldAllowRequest HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    "Content-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"domain\":\"x\"}";

/// Reads `wire` both ways and expects the plain reader to take it, as Beast does.
ReadRequest readsLikeBeast(const std::string& wire, PlainLimits limits = kLimits) {
  auto plain = readPlain(wire, limits);
  EXPECT_TRUE(plain.has_value()) << wire;
  if (!plain) {
    return {};
  }
  EXPECT_EQ(differs(*plain, readWithBeast(wire, limits)), "") << wire;
  return *plain;
}

TEST(PlainRequestTest, ReadsADecisionRequestAsBeastDoes) {
  ReadRequest r = readsLikeBeast(kDecision);
  EXPECT_EQ(r.consumed, kDecision.size());
  EXPECT_EQ(r.request.method, "POST");
  EXPECT_EQ(r.request.target, "/shouldAllowRequest");
  ASSERT_EQ(r.request.headers.size(), 3u);
  EXPECT_EQ(r.request.headers[1].name, "Content-Type");
  EXPECT_EQ(r.request.headers[1].value, "application/json");
  EXPECT_EQ(r.request.body, "{\"domain\":\"x\"}");
  EXPECT_EQ(r.version, 11u);
  EXPECT_TRUE(r.keep_alive);
}

TEST(PlainRequestTest, HeaderFieldsViewTheBytesRead) {
  Request request;
  unsigned version = 0;
  bool keep_alive = false;
  ASSERT_EQ(parsePlainRequest(kDecision, kLimits, request, version, keep_alive), kDecision.size());
  ASSERT_EQ(request.headers.size(), 3u);
  EXPECT_EQ(request.headers[1].name.data(), kDecision.data() + kDecision.find("Content-Type"));
  EXPECT_EQ(request.headers[1].value.data(), kDecision.data() + kDecision.find("application"));
  EXPECT_EQ(request.header("content-length"), "14");
}

TEST(PlainRequestTest, StopsAtTheEndOfTheFirstOfPipelinedRequests) {
  const std::string second = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
  ReadRequest r = readsLikeBeast(kDecision + second);
  EXPECT_EQ(r.consumed, kDecision.size());
  ReadRequest next = readsLikeBeast(second);
  EXPECT_EQ(next.consumed, second.size());
  EXPECT_EQ(next.request.body, "");
}

TEST(PlainRequestTest, TrimsValuesAndKeepsNamesAsSent) {
  ReadRequest r = readsLikeBeast(
      "GET /check?a=1 HTTP/1.1\r\nx-forwarded-for: \t 10.0.0.1, 10.0.0.2 \t\r\nEmpty:\r\n\r\n");
  ASSERT_EQ(r.request.headers.size(), 2u);
  EXPECT_EQ(r.request.headers[0].name, "x-forwarded-for");
  EXPECT_EQ(r.request.headers[0].value, "10.0.0.1, 10.0.0.2");
  EXPECT_EQ(r.request.headers[1].value, "");
}

TEST(PlainRequestTest, KeepAliveFollowsTheVersionAndTheFirstConnectionField) {
  EXPECT_TRUE(readsLikeBeast("GET / HTTP/1.1\r\n\r\n").keep_alive);
  EXPECT_FALSE(readsLikeBeast("GET / HTTP/1.0\r\n\r\n").keep_alive);
  EXPECT_TRUE(readsLikeBeast("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").keep_alive);
  EXPECT_FALSE(readsLikeBeast("GET / HTTP/1.1\r\nConnection: close \r\n\r\n").keep_alive);
  EXPECT_FALSE(
      readsLikeBeast("GET / HTTP/1.1\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n")
          .keep_alive);
  EXPECT_EQ(readsLikeBeast("GET / HTTP/1.0\r\n\r\n").version, 10u);
}

TEST(PlainRequestTest, LeavesEverythingElseToBeast) {
  const std::vector<std::string> declined = {
      // incomplete
      "", "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nabc", "GET / HTTP/1.1\r\nHost: x\r\n",
      "GET / HTTP/1.1\r\nHost: x\r\n\r",
      // framing Beast interprets
      "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na",
      "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\na",
      "POST / HTTP/1.1\r\nContent-Length: 1 1\r\n\r\na",
      "GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
      "GET / HTTP/1.1\r\nConnection: close, keep-alive\r\n\r\n",
      "GET / HTTP/1.1\r\nProxy-Connection: close\r\n\r\n",
      // not the plain form
      "\r\nGET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\nHost: x\n\n", "GET / HTTP/2.0\r\n\r\n",
      "GET / http/1.1\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "GET /\t HTTP/1.1\r\n\r\n",
      "GET /\x80 HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n",
      "GET / HTTP/1.1\r\nA: \x80\r\n\r\n", "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",
      "GET / HTTP/1.1\r\nA : b\r\n\r\n", "GET / HTTP/1.1\r\n: b\r\n\r\n",
      "GET / HTTP/1.1\r\nA: b\nB: c\r\n\r\n", "G@T / HTTP/1.1\r\n\r\n",
      // at the limits
      "GET /" + std::string(kLimits.header_bytes, 'a') + " HTTP/1.1\r\n\r\n",
      "POST / HTTP/1.1\r\nContent-Length: 256\r\n\r\n" + std::string(256, 'a'),
      "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"};
  for (const std::string& wire : declined) {
    unsigned version = 0;
    bool keep_alive = false;
    Request request;
    EXPECT_EQ(parsePlainRequest(wire, kLimits, request, version, keep_alive), 0u) << wire;
  }
}

TEST(PlainRequestTest, ReusesTheRequestsStorageAndDropsItsSpareFields) {
  Request request;
  unsigned version = 0;
  bool keep_alive = false;
  ASSERT_GT(parsePlainRequest(kDecision, kLimits, request, version, keep_alive), 0u);
  ASSERT_GT(
      parsePlainRequest("GET / HTTP/1.1\r\nA: b\r\n\r\n", kLimits, request, version, keep_alive),
      0u);
  ASSERT_EQ(request.headers.size(), 1u);
  EXPECT_EQ(request.headers[0].name, "A");
  EXPECT_EQ(request.body, "");
}

// Targets and values are checked eight bytes at a time, then byte by byte: every byte class at
// every position of a long target and a long value (each lane of a word, and the tail) reads
// as Beast reads it, or goes to Beast.
TEST(PlainRequestTest, EveryByteAtEveryPositionOfATargetOrValueReadsAsBeastDoes) {
  const std::string bytes = std::string("\t \x01\x1f\x7f\x80\xff\r\n:a~!\"", 14);
  int accepted = 0;
  for (std::size_t at = 0; at < 21; ++at) {
    for (char c : bytes) {
      std::string target = "/" + std::string(20, 'a');
      target[at] = c;
      std::string value(20, 'v');
      value[at] = c;
      for (const std::string& wire :
           {"GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\r\nX-Long: " + value + "\r\nHost: x\r\n\r\n"}) {
        auto plain = readPlain(wire, kLimits);
        if (plain) {
          ++accepted;
          EXPECT_EQ(differs(*plain, readWithBeast(wire, kLimits)), "") << wire;
        }
      }
    }
  }
  EXPECT_GT(accepted, 100);
}

// The fuzzer's property, on a fixed set of mutations of plain requests: whatever the plain
// reader takes, Beast reads the same way.
TEST(PlainRequestTest, MutationsReadTheSameAsBeast) {
  const std::vector<std::string> seeds = {
      kDecision, "GET /check?x=1 HTTP/1.0\r\nConnection: keep-alive\r\nX: a  b\r\n\r\n",
      "POST /json HTTP/1.1\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabcGET / HTTP/1.1"};
  const std::string alphabet = std::string("\r\n \t:,-/0123456789aAzZ\x7f\x80\x00", 24) + "HTTP";
  std::mt19937 random(20261124);
  int accepted = 0;
  for (int round = 0; round < 20000; ++round) {
    std::string wire = seeds[random() % seeds.size()];
    const int edits = 1 + static_cast<int>(random() % 3);
    for (int e = 0; e < edits && !wire.empty(); ++e) {
      const std::size_t at = random() % wire.size();
      const char c = alphabet[random() % alphabet.size()];
      switch (random() % 3) {
        case 0:
          wire[at] = c;
          break;
        case 1:
          wire.insert(wire.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          wire.erase(at, 1);
          break;
      }
    }
    const PlainLimits limits = round % 2 == 0 ? kLimits : PlainLimits{64, 4};
    auto plain = readPlain(wire, limits);
    if (plain) {
      ++accepted;
      ASSERT_EQ(differs(*plain, readWithBeast(wire, limits)), "") << wire;
    }
  }
  EXPECT_GT(accepted, 1000);  // the property is exercised, not vacuous
}

}  // namespace
}  // namespace sluice::http
