// The drain-aware read over a real loopback TCP connection: whatever arrives after a read that
// emptied the socket (bytes, a FIN) still completes the next read, which waits for epoll's next
// edge instead of trying first; a FIN taken with the last bytes ends the next read.
#include "sluice/common/drain_aware_read.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <optional>
#include <string>

namespace sluice {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;
using namespace std::chrono_literals;

struct ReadResult {
  boost::system::error_code ec;
  std::string data;
};

class DrainAwareReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tcp::acceptor acceptor(io_, tcp::endpoint(net::ip::make_address("127.0.0.1"), 0));
    client_.connect(acceptor.local_endpoint());
    const int on = 1;
    ::setsockopt(client_.native_handle(), IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    tcp::socket accepted(io_);
    acceptor.accept(accepted);
    const auto protocol = accepted.local_endpoint().protocol();
    server_.emplace(io_, net::generic::stream_protocol(protocol.family(), protocol.protocol()),
                    accepted.release());
    server_->non_blocking(true);
    ASSERT_TRUE(enableDrainAwareReads(*server_));
  }

  /// Starts a drain-aware read that fills `result` when it completes.
  void startRead(std::optional<ReadResult>& result) {
    asyncReadSomeDrainAware(*server_, true, net::buffer(buffer_),
                            [this, &result](boost::system::error_code ec, std::size_t n) {
                              result = ReadResult{ec, std::string(buffer_.data(), n)};
                            });
  }

  /// Runs the loop until `result` is filled, or 5 s.
  void runUntil(const std::optional<ReadResult>& result) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!result && std::chrono::steady_clock::now() < deadline) {
      io_.restart();
      io_.run_one_for(100ms);
    }
  }

  /// One drain-aware read, run to its completion (or 5 s).
  std::optional<ReadResult> readOnce() {
    std::optional<ReadResult> result;
    startRead(result);
    runUntil(result);
    return result;
  }

  void send(const std::string& data) { net::write(client_, net::buffer(data)); }

  /// Runs the reactor for 50 ms with no read started: epoll reports what has arrived.
  // Waits (with a deadline) until the server's socket shows `events` (POLLIN for bytes,
  // POLLRDHUP for the FIN), then lets the reactor take one look (epoll_wait) while no read
  // waits: an expired timer makes run() go once through the reactor and return.
  void letEpollReport(short events) {
    pollfd fd{server_->native_handle(), events, 0};
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (((fd.revents & events) != events) && std::chrono::steady_clock::now() < deadline) {
      fd.revents = 0;
      ASSERT_GE(::poll(&fd, 1, 100), 0);
    }
    ASSERT_EQ(fd.revents & events, events);
    net::steady_timer timer(io_, 0ms);
    timer.async_wait([](boost::system::error_code) {});
    io_.restart();
    io_.run();
  }

  net::io_context io_{1};
  tcp::socket client_{io_};
  std::optional<net::generic::stream_protocol::socket> server_;
  std::array<char, 4096> buffer_{};
};

TEST_F(DrainAwareReadTest, BytesArrivingAfterAnEmptyingReadCompleteTheNextOne) {
  for (int i = 0; i < 200; ++i) {
    const std::string piece(static_cast<std::size_t>(1 + i % 50), static_cast<char>('a' + i % 26));
    send(piece);
    const auto got = readOnce();
    ASSERT_TRUE(got.has_value()) << i;
    ASSERT_FALSE(got->ec) << got->ec.message();
    EXPECT_EQ(got->data, piece) << i;
  }
}

// The next read is started before the bytes arrive: it waits on epoll, and the edge wakes it.
TEST_F(DrainAwareReadTest, AReadWaitingForBytesIsWokenByThem) {
  send("first");
  ASSERT_EQ(readOnce()->data, "first");
  std::optional<ReadResult> result;
  startRead(result);
  io_.restart();
  io_.poll();
  EXPECT_FALSE(result.has_value());
  send("second");
  runUntil(result);
  ASSERT_TRUE(result.has_value());
  EXPECT_EQ(result->data, "second");
}

// More than one read takes, all sent before the first read: the rest is read without a new
// edge (the reads do not take the socket for empty).
TEST_F(DrainAwareReadTest, BytesBeyondOneBufferAreReadWithoutANewEdge) {
  const std::string burst(3 * 4096 + 100, 'x');
  send(burst);
  std::string got;
  while (got.size() < burst.size()) {
    const auto read = readOnce();
    ASSERT_TRUE(read.has_value()) << got.size();
    ASSERT_FALSE(read->ec) << read->ec.message();
    got += read->data;
  }
  EXPECT_EQ(got, burst);
}

// Bytes and the FIN in one segment, arriving while a read waits: the read takes the bytes, and
// the FIN left behind is an end of stream for the next read (not a socket taken for empty,
// waiting for an edge that will not come: the segment's edge woke the first read).
TEST_F(DrainAwareReadTest, AFinBehindTheLastBytesEndsTheNextRead) {
  std::optional<ReadResult> first;
  startRead(first);
  io_.restart();
  io_.poll();
  ASSERT_FALSE(first.has_value());
  const int on = 1;
  ::setsockopt(client_.native_handle(), IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
  send("last words");
  client_.shutdown(tcp::socket::shutdown_send);
  runUntil(first);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->data, "last words");
  const auto second = readOnce();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->ec, net::error::eof);
}

// Bytes and the FIN reported by epoll before any read waits: the reactor tries the next read
// at once, which takes both; epoll said a FIN had come, so the read after it tries at once too
// and finds the end of stream (no edge would come to wake it).
TEST_F(DrainAwareReadTest, AFinReportedBeforeTheReadStartsEndsTheNextRead) {
  send("first");
  ASSERT_EQ(readOnce()->data, "first");
  const int on = 1;
  ::setsockopt(client_.native_handle(), IPPROTO_TCP, TCP_CORK, &on, sizeof(on));
  send("last words");
  client_.shutdown(tcp::socket::shutdown_send);
  letEpollReport(POLLIN | POLLRDHUP);  // the segment, while no read waits
  const auto first = readOnce();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->data, "last words");
  const auto second = readOnce();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->ec, net::error::eof);
}

// The bytes reported, then the FIN arriving before the read: the read takes both, and the
// FIN's own edge wakes the read after it, which finds the end of stream.
TEST_F(DrainAwareReadTest, AFinArrivingAfterTheBytesWereReportedEndsTheNextRead) {
  send("first");
  ASSERT_EQ(readOnce()->data, "first");
  send("last words");
  letEpollReport(POLLIN);  // the bytes, while no read waits
  client_.shutdown(tcp::socket::shutdown_send);
  const auto first = readOnce();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->data, "last words");
  const auto second = readOnce();
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->ec, net::error::eof);
}

TEST(DrainAwareReadUnixTest, AUnixSocketIsReadByAsiosOwnRead) {
  net::io_context io{1};
  net::local::stream_protocol::socket a(io);
  net::local::stream_protocol::socket b(io);
  net::local::connect_pair(a, b);
  net::generic::stream_protocol::socket server(io, net::generic::stream_protocol(AF_UNIX, 0),
                                               b.release());
  const bool drain_aware = enableDrainAwareReads(server);
  EXPECT_FALSE(drain_aware);
  net::write(a, net::buffer(std::string("hello")));
  std::array<char, 64> buffer{};
  std::string got;
  asyncReadSomeDrainAware(server, drain_aware, net::buffer(buffer),
                          [&](boost::system::error_code ec, std::size_t n) {
                            EXPECT_FALSE(ec);
                            got.assign(buffer.data(), n);
                          });
  io.run_for(5s);
  EXPECT_EQ(got, "hello");
}

}  // namespace
}  // namespace sluice
