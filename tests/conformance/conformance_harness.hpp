#pragma once

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/memory_store.hpp"
#include "sluice/store/redis_store.hpp"
#include "sluice/store/store.hpp"
#include "store/redis/redis_store_internal.hpp"
#include "support/redis_server.hpp"

/// The same requests against the memory store (C++ limiter) and a real redis-server (Lua),
/// both on one simulated clock (the Redis store's test-only time override).
namespace sluice::conformance {

/// 2023-11-14T22:13:20Z: a multiple of 1, 2, 4, 5 and 10 s.
inline constexpr Micros kT0 = 1'700'000'000LL * kMicrosPerSecond;

/// One redis-server for the whole binary; tests keep apart through per-test key prefixes.
inline test::RedisServer& sharedRedis() {
  static test::RedisServer server;
  return server;
}

/// A unique, hash-tag-free prefix for the running test.
inline std::string testPrefix() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string p = std::string("conf-") + info->test_suite_name() + "-" + info->name();
  for (char& ch : p) {
    if (ch == '/' || ch == '{' || ch == '}') {
      ch = '_';
    }
  }
  return p;
}

/// A request of `client`: each limit's key (a bucket) becomes its store key.
inline StoreRequest clientRequest(std::vector<StoreLimit> limits, std::int64_t cost,
                                  std::string_view client) {
  for (StoreLimit& limit : limits) {
    limit.key = BucketKey::storeKey(client, limit.key);
  }
  return StoreRequest{std::move(limits), cost};
}

inline std::string str(const Outcome& o) {
  return "{allowed=" + std::to_string(o.allowed) + " remaining=" + std::to_string(o.remaining) +
         " reset=" + std::to_string(o.reset_after_us) +
         " retry=" + std::to_string(o.retry_after_us) + " delay=" + std::to_string(o.delay_us) +
         " never=" + std::to_string(o.never) + "}";
}

inline bool sameOutcome(const Outcome& a, const Outcome& b) {
  return a.allowed == b.allowed && a.remaining == b.remaining &&
         a.reset_after_us == b.reset_after_us && a.retry_after_us == b.retry_after_us &&
         a.delay_us == b.delay_us && a.never == b.never;
}

class StorePair {
 public:
  explicit StorePair(std::string prefix, bool local_cache = false) : clock_(kT0) {
    memory_ = makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_);
    auto options = parseRedisUrl(sharedRedis().url());
    EXPECT_TRUE(options.ok());
    RedisOptions o = *options;
    o.key_prefix = std::move(prefix);
    o.local_cache = local_cache;
    o.request_timeout = std::chrono::milliseconds(2000);  // correctness, not latency
    o.script_time = ScriptTime::kStoreClock;              // the script decides on clock_'s timeline
    redis_ = makeRedisStore(io_, o, metrics_, clock_);
    EXPECT_TRUE(test::runUntil(io_, [&] { return redis_->healthy(); }))
        << "the Redis store did not connect";
  }

  ManualClock& clock() { return clock_; }
  Store& memory() { return *memory_; }
  Store& redis() { return *redis_; }
  boost::asio::io_context& io() { return io_; }
  Metrics& metrics() { return metrics_; }

  Result<StoreResponse> run(Store& store, const StoreRequest& request) {
    std::optional<Result<StoreResponse>> result;
    store.evaluate(request, [&](Result<StoreResponse> r) { result.emplace(std::move(r)); });
    if (!test::runUntil(io_, [&] { return result.has_value(); })) {
      return makeError(ErrorKind::kTimeout, "no answer from the store");
    }
    return std::move(*result);
  }

 private:
  ManualClock clock_;
  Metrics metrics_;
  boost::asio::io_context io_;
  StorePtr memory_;
  StorePtr redis_;
};

}  // namespace sluice::conformance
