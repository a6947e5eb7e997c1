#include "store/redis/redis_connection.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/redis/redis_errors.hpp"
#include "store/redis/resp_args.hpp"
#include "support/redis_server.hpp"

namespace sluice {
namespace {

namespace net = boost::asio;
using std::chrono::milliseconds;
using namespace std::string_view_literals;

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

/// A started connection to `server` that loads `scripts`.
std::shared_ptr<redis::RedisConnection> connect(net::io_context& io, test::RedisServer& server,
                                                std::vector<std::string> scripts = {}) {
  auto url = parseRedisUrl(server.url());
  EXPECT_TRUE(url.ok());
  redis::ConnectionOptions options;
  options.redis = url.ok() ? *url : RedisOptions{};
  options.scripts = std::move(scripts);
  auto connection = redis::RedisConnection::create(io, options);
  connection->start();
  return connection;
}

TEST(RedisConnectionTest, CommandsIssuedInOneEventLoopTurnLeaveInOneWrite) {
  if (!writeCalls()) {
    GTEST_SKIP() << "/proc/self/io is not readable here";
  }
  test::RedisServer server;
  net::io_context io;
  auto connection = connect(io, server);
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

TEST(RespArgsTest, EncodesEachArgumentAsABulkStringAndReadsThemBack) {
  redis::RespArgs args;
  args.add("key");
  args.add("");
  args.add("a\r\n$3\0b"sv);  // the protocol's own bytes, and a NUL
  args.addInt(-42);
  args.addInt(1'700'000'000'000'000);
  args.addJoined("user:7", ":e", "123");
  EXPECT_EQ(args.size(), 6U);
  EXPECT_EQ(args.wire(),
            "$3\r\nkey\r\n$0\r\n\r\n$7\r\na\r\n$3\0b\r\n$3\r\n-42\r\n"
            "$16\r\n1700000000000000\r\n$11\r\nuser:7:e123\r\n"sv);
  std::vector<std::string> read;
  args.forEach([&](std::string_view arg) { read.emplace_back(arg); });
  EXPECT_EQ(read, (std::vector<std::string>{"key", "", std::string("a\r\n$3\0b"sv), "-42",
                                            "1700000000000000", "user:7:e123"}));

  redis::RespArgs more;
  more.addInt(7);
  args.append(more);
  EXPECT_EQ(args.size(), 7U);
  args.clear();
  EXPECT_TRUE(args.empty());
  EXPECT_EQ(args.wire(), "");
}

TEST(RedisConnectionTest, AScriptCallInRespArgsRunsAsTheSameCallInStringsAndSurvivesAFlush) {
  test::RedisServer server;
  net::io_context io;
  // Echoes what it was given: the keys, a separator, the arguments.
  auto connection = connect(io, server,
                            {"local out = {} "
                             "for _, k in ipairs(KEYS) do out[#out + 1] = k end "
                             "out[#out + 1] = '|' "
                             "for _, a in ipairs(ARGV) do out[#out + 1] = a end "
                             "return out"});
  ASSERT_TRUE(test::runUntil(io, [&] { return connection->ready(); }));

  const std::vector<std::string> expected = {"k1", std::string("k\0\r\n2", 5), "|", "", "12", "-3"};
  auto strings = [](const redis::Reply& reply) {
    std::vector<std::string> out;
    for (const redis::Reply& e : reply.elements) {
      out.push_back(e.str);
    }
    return out;
  };
  auto call = [&](bool resp) {
    std::optional<Result<redis::Reply>> answer;
    auto done = [&answer](Result<redis::Reply> reply) { answer = std::move(reply); };
    if (resp) {
      redis::RespArgs keys;
      keys.add("k1");
      keys.add(std::string_view("k\0\r\n2", 5));
      redis::RespArgs args;
      args.add("");
      args.addInt(12);
      args.addInt(-3);
      connection->evalScript(0, std::move(keys), std::move(args), milliseconds(2000), done);
    } else {
      connection->evalScript(0, {"k1", std::string("k\0\r\n2", 5)}, {"", "12", "-3"},
                             milliseconds(2000), done);
    }
    if (!test::runUntil(io, [&] { return answer.has_value(); })) {
      return Result<redis::Reply>(
          redis::redisError(redis::FailureSource::kDisconnected, 0, "no answer"));
    }
    return std::move(*answer);
  };
  for (const bool resp : {false, true}) {
    auto reply = call(resp);
    ASSERT_TRUE(reply.ok()) << reply.error().message;
    EXPECT_EQ(strings(*reply), expected) << (resp ? "RespArgs" : "strings");
  }

  // Redis forgets the script: the call is reloaded and sent again from what was kept.
  bool flushed = false;
  connection->command({"SCRIPT", "FLUSH"}, milliseconds(2000),
                      [&flushed](Result<redis::Reply> reply) { flushed = reply.ok(); });
  ASSERT_TRUE(test::runUntil(io, [&] { return flushed; }));
  auto reply = call(true);
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(strings(*reply), expected);
  connection->stop();
}

}  // namespace
}  // namespace sluice
