// The sessions parse a request that is already in their read buffer and send its answer
// without going through the scheduler (src/http/session.cpp, docs/benchmarks.md "Fewer
// instructions per decision"); what is not there yet is read asynchronously. These drive the
// binary over real sockets with the request bytes arriving in every grouping.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using std::chrono::milliseconds;

int statusOf(const std::string& raw_response) {
  if (raw_response.size() < 12 || raw_response.rfind("HTTP/1.1 ", 0) != 0) {
    return 0;
  }
  return std::stoi(raw_response.substr(9, 3));
}

std::string decisionRequest(const std::string& client) {
  std::string body = R"({"domain":"auth","clientId":")" + client +
                     R"(","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})";
  return "POST /shouldAllowRequest HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
         "Content-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Hundreds of requests in one write: each is answered, in order, and the stack does not grow
// with their number (only the first of a burst is parsed inline; the next ones are read
// through Beast's asynchronous read).
TEST(InlineIoTest, AThousandPipelinedRequestsInOneWriteAreAnsweredInOrder) {
  SluiceProcess sluice(withArgs({"--threads", "1"}));
  RawConnection raw("127.0.0.1", sluice.port());
  std::string burst;
  constexpr int kRequests = 1000;
  for (int i = 0; i < kRequests; ++i) {
    burst += i % 2 == 0 ? "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"
                        : "GET /nope HTTP/1.1\r\nHost: t\r\n\r\n";
  }
  burst += "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  ASSERT_TRUE(raw.send(burst));
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(statusOf(raw.readResponse(milliseconds(5000))), i % 2 == 0 ? 200 : 404) << i;
  }
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200);
  EXPECT_TRUE(raw.waitClosed(milliseconds(5000)));
}

// A request whose header or body arrives in pieces is read on (asynchronously) from where
// the buffered part left off; decisions in between stay answered in order.
TEST(InlineIoTest, RequestsArrivingInPiecesAreReadOnWhereTheBufferLeftOff) {
  SluiceProcess sluice(withArgs({"--threads", "1"}));
  RawConnection raw("127.0.0.1", sluice.port());
  // Every request has its own client (the seed rule admits 5 per minute per client); all
  // have the same length, so the cuts fall at the same places.
  int client = 0;
  auto next = [&client] { return decisionRequest("client-" + std::to_string(100 + client++)); };
  const std::string shape = next();
  const std::size_t header_end = shape.find("\r\n\r\n") + 4;
  for (std::size_t cut :
       {std::size_t{5}, header_end - 3, header_end, header_end + 7, shape.size() - 1}) {
    const std::string request = next();
    ASSERT_TRUE(raw.send(request.substr(0, cut)));
    // Not a wait for any state: only so that the first piece is likely read on its own (the
    // test passes either way).
    std::this_thread::sleep_for(milliseconds(20));
    ASSERT_TRUE(raw.send(request.substr(cut)));
    std::string answer = raw.readResponse(milliseconds(5000));
    EXPECT_EQ(statusOf(answer), 200) << "cut at " << cut << ": " << answer;
  }
  // A whole request and the start of the next in one write, then the rest.
  const std::string first = next();
  const std::string second = next();
  ASSERT_TRUE(raw.send(first + second.substr(0, 40)));
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200);
  ASSERT_TRUE(raw.send(second.substr(40)));
  EXPECT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200);
}

// A read that leaves the socket empty makes the next wait for a request skip its first try
// (src/http/drain_aware_socket.hpp): every byte that arrives afterwards must still wake the
// session. Requests cut in three, each piece its own segment after a pause, then pipelined
// pairs whose second request is cut, each piece arriving while the session waits; last, more
// requests in one segment than one read takes, with nothing sent after them.
TEST(InlineIoTest, PiecesArrivingWhileTheSessionWaitsAreAllRead) {
  SluiceProcess sluice(withArgs({"--threads", "1"}));
  RawConnection raw("127.0.0.1", sluice.port());
  raw.noDelay();
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
  for (int i = 0; i < 30; ++i) {
    const std::size_t a = 1 + static_cast<std::size_t>(i) % 9;
    const std::size_t b = request.size() - 1 - static_cast<std::size_t>(i) % 5;
    for (const std::string& piece :
         {request.substr(0, a), request.substr(a, b - a), request.substr(b)}) {
      ASSERT_TRUE(raw.send(piece));
      // Not a wait for any state: so that each piece is likely read on its own.
      std::this_thread::sleep_for(milliseconds(2));
    }
    ASSERT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200) << i;
  }
  for (int i = 0; i < 30; ++i) {
    const std::size_t cut = 1 + static_cast<std::size_t>(i) % (request.size() - 1);
    ASSERT_TRUE(raw.send(request + request.substr(0, cut)));
    ASSERT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200) << i;
    std::this_thread::sleep_for(milliseconds(2));
    ASSERT_TRUE(raw.send(request.substr(cut)));
    ASSERT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200) << i;
  }
  std::string burst;
  while (burst.size() < 3 * 4096) {
    burst += request;
  }
  ASSERT_TRUE(raw.sendCorked(burst));
  for (std::size_t i = 0; i < burst.size() / request.size(); ++i) {
    ASSERT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200) << i;
  }
}

// A client that sends its last request and its FIN together is answered and closed at once,
// not at the idle timeout: a read that leaves only the FIN behind is not taken for one that
// emptied the socket. Both in one segment, and the FIN in a segment of its own.
TEST(InlineIoTest, ARequestFollowedByTheClientsFinIsAnsweredThenClosed) {
  SluiceProcess sluice(withArgs({"--threads", "1", "--idle-timeout-ms", "60000"}));
  const std::string request = "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
  for (int i = 0; i < 20; ++i) {
    RawConnection raw("127.0.0.1", sluice.port());
    if (i % 2 == 0) {
      ASSERT_TRUE(raw.sendLast(request));
    } else {
      raw.noDelay();
      ASSERT_TRUE(raw.send(request));
      raw.shutdownWrite();
    }
    ASSERT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200) << i;
    EXPECT_TRUE(raw.waitClosed(milliseconds(5000))) << i;
  }
  // The same after answers on a kept-alive connection.
  RawConnection raw("127.0.0.1", sluice.port());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(raw.send(request));
    ASSERT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200) << i;
  }
  ASSERT_TRUE(raw.sendLast(request));
  ASSERT_EQ(statusOf(raw.readResponse(milliseconds(5000))), 200);
  EXPECT_TRUE(raw.waitClosed(milliseconds(5000)));
}

}  // namespace
}  // namespace sluice::test
