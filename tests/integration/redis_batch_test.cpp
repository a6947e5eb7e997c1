// One script call per event-loop turn, through the real binary and a real redis-server:
// concurrent clients of one I/O thread share EVALSHA calls (Redis counts fewer calls than
// decisions), and a key hammered by all of them still admits exactly its limit.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;

constexpr int kNarrowLimit = 100;

// Per day: no window edge during a test.
const char* const kRules = R"(domain: batch
descriptors:
  - key: bucket
    value: wide
    rate_limit:
      unit: day
      requests_per_unit: 1000000
  - key: bucket
    value: narrow
    rate_limit:
      unit: day
      requests_per_unit: 100
      algorithm: token_bucket
)";

std::string request(const std::string& bucket) {
  return json{{"domain", "batch"},
              {"clientId", "everyone"},
              {"descriptors", json::array({json::array({{{"key", "bucket"}, {"value", bucket}}})})}}
      .dump();
}

struct Tally {
  std::atomic<int> allowed{0};
  std::atomic<int> denied{0};
  std::atomic<int> other{0};
};

/// `clients` keep-alive connections, each sending `per_client` requests back to back.
void hammer(SluiceProcess& sluice, const std::string& body, int clients, int per_client,
            Tally& tally) {
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      HttpClient client = sluice.client(std::chrono::milliseconds(10'000));
      for (int i = 0; i < per_client; ++i) {
        const int status = client.post("/shouldAllowRequest", body).status;
        if (status == 200) {
          ++tally.allowed;
        } else if (status == 429) {
          ++tally.denied;
        } else {
          ++tally.other;
        }
      }
    });
  }
  for (auto& t : threads) {
    t.join();
  }
}

TEST(RedisBatchTest, ConcurrentClientsShareScriptCallsAndAKeyAdmitsExactlyItsLimit) {
  RedisServer redis;
  SluiceOptions options;
  options.rule_files = {{"batch.yaml", kRules}};
  // One I/O thread: every client's decisions meet in its event loop. A generous deadline:
  // exactness, not latency (a loaded machine must not turn answers into 503s).
  options.args = {
      "--threads",          "1",    "--store",           "redis", "--redis", redis.url(),
      "--redis-timeout-ms", "5000", "--redis-max-batch", "32"};
  SluiceProcess sluice(options);
  // Ready: its Redis store connected.
  HttpClient probe = sluice.client();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (probe.get("/readyz").status != 200 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(probe.get("/readyz").status, 200) << sluice.log();

  constexpr int kClients = 16;
  // Every decision of the wide bucket is admitted and goes to Redis (no local denial).
  const long long before = redis.commandCalls("evalsha");
  Tally wide;
  hammer(sluice, request("wide"), kClients, 40, wide);
  const long long calls = redis.commandCalls("evalsha") - before;
  EXPECT_EQ(wide.other.load(), 0);
  EXPECT_EQ(wide.allowed.load(), kClients * 40);
  EXPECT_GT(calls, 0);
  EXPECT_LT(calls, kClients * 40) << "no two decisions ever shared a script call";

  // One key, everyone at once: exactly its limit.
  Tally narrow;
  hammer(sluice, request("narrow"), kClients, 25, narrow);
  EXPECT_EQ(narrow.other.load(), 0);
  EXPECT_EQ(narrow.allowed.load(), kNarrowLimit);
  EXPECT_EQ(narrow.denied.load(), kClients * 25 - kNarrowLimit);
}

}  // namespace
}  // namespace sluice::test
