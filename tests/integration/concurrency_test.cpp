// Every part of sluice that runs on a thread of its own, at once, in one process: decisions on
// both I/O threads (connections spread by SO_REUSEPORT), the admin listener resetting
// counters (fanned out to every I/O thread's store) and serving its views, the decision
// port's /metrics, /readyz and /rules, rules reloaded by the watcher and by SIGHUP, the
// events writer publishing the denials, and with Redis the Redis store's connections and the
// eventual engine's sync thread; then SIGTERM while all of that is still running.
//
// In an ordinary build it checks that nothing is refused or lost while everything moves.
// Its real purpose is `scripts/sanitize.sh --thread` (docs/quality.md): the other tests
// exercise each of these parts mostly alone, and ThreadSanitizer only reports a race it sees
// happen.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

constexpr int kUsers = 10;
constexpr int kDecisionThreads = 4;
constexpr int kDecisionsPerThread = 150;
constexpr int kRequestsPerConnection = 25;

/// A per-user limit small enough that users are denied (events, /limits/top), and an
/// eventual limit that is never reached (the eventual engine's sync, with Redis). Daily
/// windows: no window edge during the test (awayFromWindowBoundary). `variant` adds a rule
/// the requests do not use: a reload that changes the set but leaves the users' counts.
std::string rules(int variant) {
  std::string yaml =
      "domain: conc\n"
      "descriptors:\n"
      "  - key: user\n"
      "    rate_limit:\n"
      "      unit: day\n"
      "      requests_per_unit: 20\n"
      "  - key: shared\n"
      "    value: ev\n"
      "    rate_limit:\n"
      "      unit: day\n"
      "      requests_per_unit: 1000000\n"
      "      consistency: eventual\n";
  if (variant % 2 == 1) {
    yaml +=
        "  - key: unused\n"
        "    rate_limit:\n"
        "      unit: second\n"
        "      requests_per_unit: 1\n";
  }
  return yaml;
}

std::string user(int i) { return "u" + std::to_string(i % kUsers); }

std::string decision(int i) {
  return R"({"domain":"conc","clientId":")" + user(i) +
         R"(","descriptors":[{"entries":[{"key":"user","value":")" + user(i) +
         R"("}]},{"entries":[{"key":"shared","value":"ev"}]}]})";
}

/// Resets touch u0 to u4 only: u5 to u9 (60 requests each, 20 allowed) are surely denied.
std::string reset(int i) {
  const std::string who = user(i % (kUsers / 2));
  return R"({"domain":"conc","clientId":")" + who +
         R"(","descriptors":[{"entries":[{"key":"user","value":")" + who + R"("}]}]})";
}

enum class Backend { kMemory, kRedis };

class ConcurrencyTest : public ::testing::TestWithParam<Backend> {};

TEST_P(ConcurrencyTest, DecisionsResetsReloadsViewsAndEventsAtOnceThenShutdown) {
  awayFromWindowBoundary(std::chrono::hours(24), std::chrono::seconds(60));
  RedisServer redis;  // the events stream's, and the store's with kRedis
  std::vector<std::string> args = {"--threads",      "2",        "--events", "redis-stream",
                                   "--events-redis", redis.url()};
  if (GetParam() == Backend::kRedis) {
    args.insert(args.end(), {"--store", "redis", "--redis", redis.url(), "--failure-mode", "closed",
                             "--redis-timeout-ms", "2000"});
  }
  SluiceOptions options = withRules({{"conc.yaml", rules(0)}}, args);
  options.admin = true;
  SluiceProcess sluice(options);
  const std::uint16_t admin_port = sluice.adminPort();

  std::atomic<bool> load_done{false};
  std::atomic<int> allowed{0};
  std::atomic<int> denied{0};
  std::atomic<int> unexpected{0};
  std::atomic<int> resets{0};
  std::atomic<int> reloads{0};

  std::vector<std::thread> threads;
  for (int t = 0; t < kDecisionThreads; ++t) {
    threads.emplace_back([&, t] {
      std::optional<HttpClient> client;
      for (int i = 0; i < kDecisionsPerThread; ++i) {
        if (i % kRequestsPerConnection == 0) {
          client.emplace(sluice.client(std::chrono::seconds(20)));  // lands on either thread
        }
        try {
          const int status = client->post("/shouldAllowRequest", decision(t * 7 + i)).status;
          (status == 200 ? allowed : status == 429 ? denied : unexpected)++;
        } catch (const std::exception&) {
          unexpected++;
        }
      }
    });
  }
  // The admin listener: resets fanned out to the I/O threads' stores, and its views.
  threads.emplace_back([&] {
    HttpClient admin("127.0.0.1", admin_port, std::chrono::seconds(20));
    for (int i = 0; !load_done.load(); ++i) {
      try {
        if (admin.request("DELETE", "/limits", reset(i)).status == 200) {
          resets++;
        } else {
          unexpected++;
        }
        for (const char* view : {"/limits/top", "/metrics", "/rules"}) {
          if (admin.get(view).status != 200) {
            unexpected++;
          }
        }
      } catch (const std::exception&) {
        unexpected++;
      }
    }
  });
  // The decision port's own views, which read every I/O thread's store health.
  threads.emplace_back([&] {
    HttpClient views = sluice.client(std::chrono::seconds(20));
    while (!load_done.load()) {
      try {
        const int ready = views.get("/readyz").status;
        if ((ready != 200 && ready != 503) || views.get("/metrics").status != 200 ||
            views.get("/rules").status != 200) {
          unexpected++;
        }
      } catch (const std::exception&) {
        unexpected++;
      }
    }
  });
  // Reloads: the file changes (the watcher's poll), and SIGHUP reloads on demand.
  threads.emplace_back([&] {
    for (int i = 0; !load_done.load(); ++i) {
      sluice.writeRuleFile("conc.yaml", rules(i + 1));
      sluice.signal(SIGHUP);
      reloads++;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // pacing, not a wait
    }
  });

  for (int t = 0; t < kDecisionThreads; ++t) {
    threads[static_cast<std::size_t>(t)].join();
  }
  load_done = true;
  for (std::size_t t = kDecisionThreads; t < threads.size(); ++t) {
    threads[t].join();
  }

  EXPECT_EQ(unexpected.load(), 0) << sluice.log();
  EXPECT_EQ(allowed.load() + denied.load(), kDecisionThreads * kDecisionsPerThread);
  EXPECT_GT(denied.load(), 0);  // so the events writer had work
  EXPECT_GT(resets.load(), 0);
  EXPECT_GT(reloads.load(), 0);
  // Every denial reaches the stream, is dropped (counted), or is still queued: wait for
  // the writer to catch up, while the process keeps its threads.
  const std::string published = "sluice_events_published_total " + std::to_string(denied.load());
  EXPECT_TRUE(waitFor(
      [&] {
        return sluice.client().get("/metrics").body.find(published + "\n") != std::string::npos;
      },
      std::chrono::seconds(20)))
      << sluice.client().get("/metrics").body;

  // Shutdown while requests still arrive: every thread stops and joins, exit code 0.
  std::atomic<bool> stop_load{false};
  std::thread late([&] {
    while (!stop_load.load()) {
      try {
        HttpClient client = sluice.client(std::chrono::seconds(2));
        client.post("/shouldAllowRequest", decision(0));
      } catch (const std::exception&) {
        // refused or cut once the server stops: expected here
      }
    }
  });
  sluice.signal(SIGTERM);
  const auto code = sluice.wait(std::chrono::seconds(20));
  stop_load = true;
  late.join();
  ASSERT_TRUE(code.has_value()) << "sluice did not stop\n" << sluice.log();
  EXPECT_EQ(*code, 0) << sluice.log();
}

INSTANTIATE_TEST_SUITE_P(Stores, ConcurrencyTest,
                         ::testing::Values(Backend::kMemory, Backend::kRedis),
                         [](const ::testing::TestParamInfo<Backend>& info) {
                           return info.param == Backend::kMemory ? "memory" : "redis";
                         });

}  // namespace
}  // namespace sluice::test
