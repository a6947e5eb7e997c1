// The HTTP server's limits, timeouts and shutdown, over real sockets against the binary.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr const char* kShapedRules = R"(domain: shaped
descriptors:
  - key: queue
    value: q
    rate_limit:
      unit: second
      requests_per_unit: 2
      algorithm: leaky_bucket
      burst: 10
      shape: true
)";

std::string rawPost(const std::string& target, const std::string& body, bool close = false) {
  return "POST " + target + " HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" +
         (close ? "Connection: close\r\n" : "") + "Content-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

int statusOf(const std::string& raw_response) {
  if (raw_response.size() < 12 || raw_response.rfind("HTTP/1.1 ", 0) != 0) {
    return 0;
  }
  return std::stoi(raw_response.substr(9, 3));
}

TEST(ServerBehaviourTest, TwoMebibyteBodyIs413) {
  SluiceProcess sluice;
  HttpResponse r = sluice.client().post("/shouldAllowRequest", std::string(2 << 20, 'a'));
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(json::parse(r.body)["error"], "body: larger than the limit of 1048576 bytes");
  // The server stays healthy for everyone else.
  EXPECT_EQ(sluice.client().get("/healthz").status, 200);
}

TEST(ServerBehaviourTest, BodyLimitIsConfigurable) {
  SluiceProcess sluice(withArgs({"--threads", "1", "--max-body-bytes", "64"}));
  HttpResponse r = sluice.client().post("/shouldAllowRequest", std::string(65, ' ') + "{}");
  EXPECT_EQ(r.status, 413);
  EXPECT_EQ(sluice.client().post("/shouldAllowRequest", "{}").status, 200);
}

TEST(ServerBehaviourTest, HugeHeaderIs431) {
  SluiceProcess sluice;
  HttpResponse r =
      sluice.client().request("GET", "/healthz", "", {{"X-Padding", std::string(32 << 10, 'x')}});
  EXPECT_EQ(r.status, 431);
  EXPECT_TRUE(json::parse(r.body).contains("error"));
}

TEST(ServerBehaviourTest, MalformedHttpIs400AndClosed) {
  SluiceProcess sluice;
  RawConnection raw("127.0.0.1", sluice.port());
  ASSERT_TRUE(raw.send("GET /healthz HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n"));
  std::string response = raw.readUntilClosed(milliseconds(3000));
  EXPECT_EQ(statusOf(response), 400) << response;
}

TEST(ServerBehaviourTest, ExpectContinueIsAnsweredBeforeTheBody) {
  SluiceProcess sluice;
  RawConnection raw("127.0.0.1", sluice.port());
  std::string body = R"({"domain":"auth","clientId":"x"})";
  ASSERT_TRUE(
      raw.send("POST /shouldAllowRequest HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
               "Content-Length: " +
               std::to_string(body.size()) + "\r\n\r\n"));
  EXPECT_EQ(raw.readResponse(milliseconds(2000)), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(raw.send(body));
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(2000))), 200);
}

TEST(ServerBehaviourTest, Http10ClientGetsItsAnswerAndTheConnectionCloses) {
  SluiceProcess sluice;
  RawConnection raw("127.0.0.1", sluice.port());
  ASSERT_TRUE(raw.send("GET /healthz HTTP/1.0\r\n\r\n"));
  std::string response = raw.readUntilClosed(milliseconds(3000));
  EXPECT_EQ(response.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << response;
}

TEST(ServerBehaviourTest, PipelinedRequestsAreAnsweredInOrder) {
  SluiceProcess sluice;
  RawConnection raw("127.0.0.1", sluice.port());
  ASSERT_TRUE(
      raw.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
               "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n" +
               rawPost("/shouldAllowRequest", "{}") +
               "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(3000))), 200);
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(3000))), 404);
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(3000))), 200);
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(3000))), 200);
  EXPECT_TRUE(raw.waitClosed(milliseconds(3000)));
}

TEST(ServerBehaviourTest, StalledClientDoesNotBlockOthersAndIsDropped) {
  // One I/O thread: the stalled connection shares it with the healthy client. Its request
  // timeout (3 s) is far longer than 20 answers take: a thread held by the stalled
  // connection would answer them only once it had dropped it.
  SluiceProcess sluice(withArgs({"--threads", "1", "--request-timeout-ms", "3000"}));
  const auto start = Clock::now();  // before the connection: its timeout starts later
  RawConnection stalled("127.0.0.1", sluice.port());
  ASSERT_TRUE(stalled.send("POST /shouldAllowRequest HTTP/1.1\r\nHost: t\r\nContent-Le"));
  HttpClient client = sluice.client();
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(client.post("/shouldAllowRequest", "{}").status, 200);
  }
  EXPECT_FALSE(stalled.closed()) << "the others were answered only after the stalled client";
  EXPECT_TRUE(stalled.waitClosed(milliseconds(10'000)));
  EXPECT_GE(Clock::now() - start, milliseconds(3000));  // dropped by its timeout, not before
}

TEST(ServerBehaviourTest, SlowBodyIsDropped) {
  SluiceProcess sluice(withArgs({"--threads", "1", "--request-timeout-ms", "800"}));
  RawConnection slow("127.0.0.1", sluice.port());
  ASSERT_TRUE(
      slow.send("POST /shouldAllowRequest HTTP/1.1\r\nHost: t\r\nContent-Length: 100\r\n\r\n{"));
  EXPECT_TRUE(slow.waitClosed(milliseconds(3000)));
}

TEST(ServerBehaviourTest, SlowRequestBehindAnsweredOnesIsStillDropped) {
  SluiceProcess sluice(withRules({{"shaped.yaml", kShapedRules}},
                                 {"--threads", "1", "--request-timeout-ms", "800"}));
  std::string shaped =
      rawPost("/shouldAllowRequest",
              R"({"domain":"shaped","descriptors":[[{"key":"queue","value":"q"}]]})");
  RawConnection raw("127.0.0.1", sluice.port());
  // The second answer is held 0.5 s and written while the third request is still arriving:
  // writing it must not lift that request's deadline.
  ASSERT_TRUE(raw.send(shaped + shaped + "GET /healthz HTTP/1.1\r\nHo"));
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(2000))), 200);
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(2000))), 200);
  EXPECT_TRUE(raw.waitClosed(milliseconds(3000)));
}

TEST(ServerBehaviourTest, IdleKeepAliveConnectionIsClosed) {
  SluiceProcess sluice(withArgs({"--threads", "1", "--idle-timeout-ms", "300"}));
  RawConnection idle("127.0.0.1", sluice.port());
  ASSERT_TRUE(idle.send("GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"));
  EXPECT_EQ(statusOf(idle.readResponse(milliseconds(2000))), 200);
  auto start = Clock::now();
  EXPECT_TRUE(idle.waitClosed(milliseconds(3000)));
  EXPECT_GE(Clock::now() - start, milliseconds(200));
}

// Deadlines move later with every request without re-arming their timer each time: a timer
// that fires at an old deadline must re-arm itself for the current one, not drop a busy
// connection.
TEST(ServerBehaviourTest, BusyKeepAliveConnectionOutlivesEveryTimeout) {
  SluiceProcess sluice(
      withArgs({"--threads", "1", "--idle-timeout-ms", "300", "--request-timeout-ms", "300"}));
  RawConnection busy("127.0.0.1", sluice.port());
  auto start = Clock::now();
  int answered = 0;
  while (Clock::now() - start < milliseconds(1500)) {
    ASSERT_TRUE(busy.send(rawPost("/shouldAllowRequest", "{}")));
    std::string response = busy.readResponse(milliseconds(2000));
    ASSERT_EQ(statusOf(response), 200) << "after " << answered << " answers: " << response;
    ++answered;
    std::this_thread::sleep_for(milliseconds(120));
  }
  EXPECT_GE(answered, 8);
  // Then idle: closed after the idle timeout.
  EXPECT_TRUE(busy.waitClosed(milliseconds(3000)));
}

TEST(ServerBehaviourTest, ShapedLeakyBucketHoldsAnswersWithoutBlockingTheThread) {
  // One per second: the three answers leave the queue about 0, 1 and 2 s after the first
  // request arrived.
  const std::string rules = R"(domain: shaped
descriptors:
  - key: queue
    value: q
    rate_limit:
      unit: second
      requests_per_unit: 1
      algorithm: leaky_bucket
      burst: 10
      shape: true
)";
  SluiceProcess sluice(withRules({{"shaped.yaml", rules}}, {"--threads", "1"}));
  std::string body = R"({"domain":"shaped","descriptors":[[{"key":"queue","value":"q"}]]})";
  std::vector<std::unique_ptr<RawConnection>> connections;
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) {
    connections.push_back(std::make_unique<RawConnection>("127.0.0.1", sluice.port()));
    ASSERT_TRUE(connections.back()->send(rawPost("/shouldAllowRequest", body)));
  }
  // The one I/O thread still answers others while the answers are held: /healthz comes
  // back before the last held answer (a thread that slept through the delays would write
  // every held answer first).
  EXPECT_EQ(sluice.client().get("/healthz").status, 200);
  int held_answers_out = 0;
  for (auto& c : connections) {
    held_answers_out += c->hasData() ? 1 : 0;
  }
  EXPECT_LT(held_answers_out, 3) << "every held answer left before /healthz was answered";
  std::vector<std::int64_t> delays;
  for (auto& c : connections) {
    std::string response = c->readResponse(milliseconds(10'000));
    ASSERT_EQ(statusOf(response), 200) << response;
    const auto arrived = std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    json limit =
        json::parse(response.substr(response.find("\r\n\r\n") + 4))["descriptors"][0]["limits"][0];
    EXPECT_EQ(limit["shaped"], true);
    delays.push_back(limit["delay_ms"].get<std::int64_t>());
    // Held for its delay: the requests reached the server after `start` (lower bounds only,
    // a slow machine only delays an answer more).
    EXPECT_GE(arrived.count(), delays.back()) << response;
  }
  // Each answer leaves a queue position later than the one before (in the order the server
  // read the requests, which need not be the connections').
  std::sort(delays.begin(), delays.end());
  EXPECT_EQ(delays[0], 0);
  EXPECT_GT(delays[1], 0);
  EXPECT_GT(delays[2], delays[1]);
}

TEST(ServerBehaviourTest, SigtermFinishesInFlightRequestsThenExitsZero) {
  SluiceProcess sluice(withRules({{"shaped.yaml", kShapedRules}}, {"--threads", "2"}));
  std::string body = R"({"domain":"shaped","descriptors":[[{"key":"queue","value":"q"}]]})";
  std::vector<std::unique_ptr<RawConnection>> in_flight;
  for (int i = 0; i < 4; ++i) {
    in_flight.push_back(std::make_unique<RawConnection>("127.0.0.1", sluice.port()));
    ASSERT_TRUE(in_flight.back()->send(rawPost("/shouldAllowRequest", body)));
  }
  RawConnection idle("127.0.0.1", sluice.port());
  std::this_thread::sleep_for(milliseconds(200));  // the requests are read and held
  sluice.signal(SIGTERM);
  // An idle keep-alive connection is closed at once ...
  EXPECT_TRUE(idle.waitClosed(milliseconds(1000)));
  // ... new connections are refused ...
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_THROW(HttpClient("127.0.0.1", sluice.port(), milliseconds(500)).get("/healthz"),
               std::runtime_error);
  // ... and every held answer is still delivered; those sent while draining say
  // Connection: close (the first one left before SIGTERM: its delay was 0).
  int closing = 0;
  for (auto& c : in_flight) {
    std::string response = c->readResponse(milliseconds(5000));
    EXPECT_EQ(statusOf(response), 200) << response;
    closing += response.find("Connection: close") != std::string::npos ? 1 : 0;
  }
  EXPECT_GE(closing, 3);
  auto code = sluice.wait(milliseconds(5000));
  ASSERT_TRUE(code.has_value()) << sluice.log();
  EXPECT_EQ(*code, 0) << sluice.log();
  EXPECT_NE(sluice.log().find("received SIGTERM"), std::string::npos);
}

TEST(ServerBehaviourTest, SigintIsGracefulToo) {
  SluiceProcess sluice;
  sluice.signal(SIGINT);
  auto code = sluice.wait(milliseconds(5000));
  ASSERT_TRUE(code.has_value());
  EXPECT_EQ(*code, 0);
}

TEST(ServerBehaviourTest, PortInUseFailsWithAClearMessage) {
  SluiceProcess first;
  auto [code, output] = runSluice(
      {"--listen", "127.0.0.1:" + std::to_string(first.port()), "--rules", first.rulesDir()});
  EXPECT_EQ(code, 1) << output;
  EXPECT_NE(output.find("cannot listen on 127.0.0.1:" + std::to_string(first.port())),
            std::string::npos)
      << output;
  EXPECT_EQ(first.client().get("/healthz").status, 200);
}

}  // namespace
}  // namespace sluice::test
