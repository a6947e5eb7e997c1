#include "store/redis/redis_connection.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>

#include "support/redis_server.hpp"

namespace sluice {
namespace {

namespace net = boost::asio;
using std::chrono::milliseconds;

/// write(2)-family calls made by this process so far (Linux /proc/self/io `syscw`; socket
/// sendmsg/sendto are not counted, hiredis writes with write(2)).
std::optional<long long> writeCalls() {
  std::ifstream io("/proc/self/io");
  std::string name;
  long long value = 0;
  while (io >> name >> value) {
    if (name == "syscw:") {
      return value;
    }
  }
  return std::nullopt;
}

TEST(RedisConnectionTest, CommandsIssuedInOneEventLoopTurnLeaveInOneWrite) {
  if (!writeCalls()) {
    GTEST_SKIP() << "/proc/self/io is not readable here";
  }
  test::RedisServer server;
  auto url = parseRedisUrl(server.url());
  ASSERT_TRUE(url.ok());
  net::io_context io;
  redis::ConnectionOptions options;
  options.redis = *url;
  auto connection = redis::RedisConnection::create(io, options);
  connection->start();
  ASSERT_TRUE(test::runUntil(io, [&] { return connection->ready(); }));

  constexpr int kCommands = 200;
  int answered = 0;
  const long long before = *writeCalls();
  // One handler issues every command, as one event-loop turn does for the requests it read.
  net::post(io, [&] {
    for (int i = 0; i < kCommands; ++i) {
      connection->command({"ECHO", std::to_string(i)}, milliseconds(2000),
                          [&answered, i](Result<redis::Reply> reply) {
                            ASSERT_TRUE(reply.ok()) << reply.error().message;
                            EXPECT_EQ(reply->str, std::to_string(i));
                            ++answered;
                          });
    }
  });
  ASSERT_TRUE(test::runUntil(io, [&] { return answered == kCommands; }));
  const long long writes = *writeCalls() - before;
  // The commands are pipelined: hiredis buffers them and writes when the socket's write
  // readiness handler runs, after the turn that issued them.
  EXPECT_GE(writes, 1);
  EXPECT_LE(writes, 2) << kCommands << " commands took " << writes << " write(2) calls";
  connection->stop();
}

}  // namespace
}  // namespace sluice
