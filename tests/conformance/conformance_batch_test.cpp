// One script call per event-loop turn: the requests a Redis store collects before its
// io_context runs go to Redis as one EVALSHA (RedisOptions::max_batch), decided one after
// another by the script. The decisions must be exactly those of one call per request and of
// the memory store (C++ limiter), request by request, every field: interleaved keys, the
// same key several times in one batch, multi-limit all-or-nothing, quota groups, shadow
// limits, per-limit costs, count_rejected, sketch limits.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"
#include "sluice/limiter/sketch.hpp"
#include "sluice/store/limit_override.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/redis_sketch.hpp"

namespace sluice::conformance {
namespace {

constexpr const char* kSeed = "00112233445566778899aabbccddeeff";
constexpr std::size_t kMaxBatch = 16;

LimitParams sketchParams(std::int64_t limit, std::uint32_t width, std::uint32_t depth,
                         const std::string& rule) {
  LimitParams p;
  p.algorithm = Algorithm::kSketch;
  p.limit = limit;
  p.window_us = kMicrosPerSecond;
  p.sketch.width = width;
  p.sketch.depth = depth;
  p.sketch.counter_bits = sketchCounterBits(limit);
  auto identity = std::make_shared<SketchIdentity>();
  identity->key = "d:" + rule + ":i0:w" + std::to_string(width) + "d" + std::to_string(depth);
  identity->domain = "d";
  identity->rule = rule;
  p.sketch.identity = identity;
  return p;
}

/// A pool of buckets (one set of parameters per bucket name), shared by the requests so that
/// the same key recurs across requests, within a batch, and sometimes twice in one request.
std::vector<StoreLimit> bucketPool(std::mt19937_64& rng, bool with_sketch) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  static constexpr Micros kWindows[] = {50 * kMicrosPerMilli, 250 * kMicrosPerMilli,
                                        kMicrosPerSecond, 3 * kMicrosPerSecond + 7};
  std::vector<StoreLimit> pool;
  for (int b = 0; b < 8; ++b) {
    StoreLimit l;
    l.key = "bucket" + std::to_string(b);
    LimitParams& p = l.params;
    p.algorithm = static_cast<Algorithm>(b % 5);
    p.limit = pick(1, 12);
    p.window_us = kWindows[pick(0, 3)];
    p.count_rejected = pick(0, 4) == 0;
    if (p.algorithm == Algorithm::kTokenBucket || p.algorithm == Algorithm::kLeakyBucket) {
      p.burst = pick(0, 1) == 0 ? 0 : pick(1, 15);
    }
    if (p.algorithm == Algorithm::kSlidingWindowLog && pick(0, 2) == 0) {
      p.min_interval_us = pick(1, p.window_us / 8 + 1);
    }
    if (p.algorithm == Algorithm::kTokenBucket && pick(0, 2) == 0) {
      p.warmup_us = pick(1, 4 * p.window_us);
    }
    pool.push_back(l);
  }
  if (with_sketch) {
    for (int s = 0; s < 2; ++s) {
      StoreLimit l;
      l.key = "sketch" + std::to_string(s);
      l.params =
          sketchParams(s == 0 ? 4 : 9, s == 0 ? 8 : 16, s == 0 ? 4 : 2, "r" + std::to_string(s));
      l.params.count_rejected = s == 1;
      pool.push_back(l);
    }
  }
  return pool;
}

/// A random request of one of a few clients over 1 to 3 buckets of the pool.
StoreRequest randomRequest(std::mt19937_64& rng, const std::vector<StoreLimit>& pool) {
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  std::vector<StoreLimit> limits;
  const int n = static_cast<int>(pick(1, 3));
  for (int i = 0; i < n; ++i) {
    StoreLimit l =
        pool[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(pool.size()) - 1))];
    if (n > 1) {
      l.shadow = pick(0, 5) == 0;
      l.quota_group = pick(0, 3) == 0 ? static_cast<int>(pick(0, 1)) : -1;
      const std::int64_t c = pick(0, 9);
      l.cost = c < 6 ? std::optional<std::int64_t>() : c < 9 ? pick(0, 3) : pick(5, 20);
    }
    limits.push_back(l);
  }
  const std::int64_t c = pick(0, 19);
  const std::int64_t cost = c < 14 ? 1 : c < 16 ? 0 : c < 19 ? pick(2, 4) : pick(10, 30);
  return clientRequest(std::move(limits), cost, "client" + std::to_string(pick(0, 2)));
}

/// A Redis store's options on the shared redis-server: `prefix`, no local cache.
RedisOptions storeOptions(const std::string& prefix, std::size_t max_batch) {
  auto options = parseRedisUrl(sharedRedis().url());
  EXPECT_TRUE(options.ok());
  RedisOptions o = options.ok() ? *options : RedisOptions{};
  o.key_prefix = prefix;
  o.local_cache = false;
  o.max_batch = max_batch;
  return o;
}

class BatchConformanceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MemoryStoreOptions memory_options;
    memory_options.sketch_seed = kSeed;
    memory_ = makeMemoryStore(memory_options, clock_, memory_metrics_);
    single_ = redisStore(testPrefix() + "-single", 1, single_metrics_);
    batched_ = redisStore(testPrefix() + "-batched", kMaxBatch, batched_metrics_);
    // A store reads the sketch seed from Redis before its first sketch request (which then
    // goes on the clock of that moment): read it now, with a check that charges nothing.
    StoreLimit probe;
    probe.key = "seed-probe";
    probe.params = sketchParams(4, 8, 4, "probe");
    const StoreRequest check = clientRequest({probe}, 0, "probe");
    for (Store* store : {single_.get(), batched_.get()}) {
      ASSERT_TRUE(runOne(*store, check).ok());
    }
  }

  StorePtr redisStore(const std::string& prefix, std::size_t max_batch, Metrics& metrics) {
    RedisOptions o = storeOptions(prefix, max_batch);
    o.request_timeout = std::chrono::milliseconds(5000);  // correctness, not latency
    o.script_time = ScriptTime::kStoreClock;              // each request's own time
    sharedRedis().command({"SET", redis::sketchSeedKey(o.key_prefix), kSeed});
    StorePtr store = makeRedisStore(io_, o, metrics, clock_);
    EXPECT_TRUE(test::runUntil(io_, [&] { return store->healthy(); }));
    return store;
  }

  /// One request at a time: each answered before the next is made.
  Result<StoreResponse> runOne(Store& store, const StoreRequest& request) {
    std::optional<Result<StoreResponse>> result;
    store.evaluate(request, [&](Result<StoreResponse> r) { result.emplace(std::move(r)); });
    if (!test::runUntil(io_, [&] { return result.has_value(); })) {
      return makeError(ErrorKind::kTimeout, "no answer from the store");
    }
    return std::move(*result);
  }

  /// A check (cost 0) of `request`'s buckets, asked again until the store answers one (while
  /// Redis is paused, each may time out); nothing when none is answered within 10 s.
  std::optional<StoreResponse> checkOnceAnswered(Store& store, StoreRequest request) {
    request.cost = 0;
    std::optional<StoreResponse> seen;
    test::runUntil(
        io_,
        [&] {
          if (!seen) {
            auto r = runOne(store, request);
            if (r.ok()) {
              seen = *r;
            }
          }
          return seen.has_value();
        },
        std::chrono::milliseconds(10'000));
    return seen;
  }

  /// Every request made in one turn (the io_context does not run in between), each at its
  /// own time; then the answers.
  std::vector<Result<StoreResponse>> runTurn(
      Store& store, const std::vector<std::pair<Micros, StoreRequest>>& requests) {
    std::vector<std::optional<Result<StoreResponse>>> results(requests.size());
    for (std::size_t i = 0; i < requests.size(); ++i) {
      clock_.set(requests[i].first);
      store.evaluate(requests[i].second,
                     [&results, i](Result<StoreResponse> r) { results[i].emplace(std::move(r)); });
    }
    const bool done = test::runUntil(io_, [&] {
      return std::all_of(results.begin(), results.end(),
                         [](const auto& r) { return r.has_value(); });
    });
    std::vector<Result<StoreResponse>> out;
    for (auto& r : results) {
      out.push_back(r ? std::move(*r) : makeError(ErrorKind::kTimeout, "no answer"));
    }
    EXPECT_TRUE(done);
    return out;
  }

  static void expectSame(const Result<StoreResponse>& expected, const Result<StoreResponse>& got,
                         const std::string& what, const std::string& where) {
    ASSERT_TRUE(expected.ok()) << where << ": " << expected.error().message;
    ASSERT_TRUE(got.ok()) << where << " " << what << ": " << got.error().message;
    ASSERT_EQ(expected->allowed, got->allowed) << where << " " << what;
    ASSERT_EQ(expected->outcomes.size(), got->outcomes.size()) << where << " " << what;
    for (std::size_t k = 0; k < expected->outcomes.size(); ++k) {
      ASSERT_TRUE(sameOutcome(expected->outcomes[k], got->outcomes[k]))
          << where << " limit " << k << ": memory " << str(expected->outcomes[k]) << " vs " << what
          << " " << str(got->outcomes[k]);
    }
  }

  /// Random turns of 1 to 40 requests (more than kMaxBatch: a full batch goes at once and
  /// the next starts), times moving within a turn too, compared request by request.
  void compareTurns(std::mt19937_64& rng, bool with_sketch, int turns) {
    auto pick = [&](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    };
    const std::vector<StoreLimit> pool = bucketPool(rng, with_sketch);
    Micros now = kT0 + pick(0, 10 * kMicrosPerSecond);
    for (int t = 0; t < turns; ++t) {
      std::vector<std::pair<Micros, StoreRequest>> requests;
      const int size = static_cast<int>(pick(0, 3) == 0 ? pick(1, 3) : pick(4, 40));
      for (int i = 0; i < size; ++i) {
        now += pick(0, 2) == 0 ? pick(1, 30 * kMicrosPerMilli) : 0;
        requests.emplace_back(now, randomRequest(rng, pool));
      }
      std::vector<Result<StoreResponse>> expected;
      std::vector<Result<StoreResponse>> one_by_one;
      for (const auto& [at, request] : requests) {
        clock_.set(at);
        expected.push_back(runOne(*memory_, request));
        one_by_one.push_back(runOne(*single_, request));
      }
      const std::vector<Result<StoreResponse>> together = runTurn(*batched_, requests);
      for (std::size_t i = 0; i < requests.size(); ++i) {
        const std::string where = "turn " + std::to_string(t) + " request " + std::to_string(i);
        expectSame(expected[i], one_by_one[i], "one call per request", where);
        expectSame(expected[i], together[i], "batched", where);
        if (HasFatalFailure()) {
          return;
        }
        ++compared_;
        allowed_ += expected[i]->allowed ? 1 : 0;
      }
      // Past every window now and then: fresh buckets, and expiry within a trace.
      if (pick(0, 9) == 0) {
        now += 4 * kMicrosPerSecond;
      }
    }
  }

  /// Sets `limit` as client `client`'s override of `rule` on every store.
  void setOverrideEverywhere(const std::string& client, const std::string& rule,
                             const LimitParams& base, std::int64_t limit) {
    auto value = std::make_shared<StoredOverride>();
    value->params = base;
    value->params.limit = limit;
    value->requests_per_unit = limit;
    value->unit = TimeUnit::kSecond;
    value->reason = "test";
    value->record_json = R"({"domain":"d","rule":")" + rule + R"("})";
    for (Store* store : {memory_.get(), single_.get(), batched_.get()}) {
      std::optional<Result<bool>> done;
      store->setOverride({client + "|d", overrideRuleField(rule)}, value, 100,
                         [&](Result<bool> r) { done.emplace(std::move(r)); });
      ASSERT_TRUE(test::runUntil(io_, [&] { return done.has_value(); }));
      ASSERT_TRUE(done->ok()) << done->error().message;
    }
  }

  /// A request of one of six clients on its fixed window `rule` may override: mostly a plain
  /// hit, sometimes a check, a reserve (a hold the later requests count) or two limits.
  StoreRequest overridableRequest(std::mt19937_64& rng, const StoreLimit& limit, int serial) {
    auto pick = [&](std::int64_t lo, std::int64_t hi) {
      return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
    };
    std::vector<StoreLimit> limits{limit};
    if (pick(0, 9) == 0) {
      StoreLimit second = limit;
      second.key = "d:second;i0;fw";
      limits.push_back(second);
    }
    const std::int64_t c = pick(0, 9);
    StoreRequest request = clientRequest(std::move(limits),
                                         c < 7   ? 1
                                         : c < 8 ? 0
                                                 : 3,
                                         "client" + std::to_string(pick(0, 5)));
    if (pick(0, 7) == 0) {
      char nonce[17];
      std::snprintf(nonce, sizeof nonce, "%016x", serial);
      request.hold =
          HoldCall{HoldOp::kReserve, nonce, 300 * kMicrosPerMilli, kMicrosPerSecond, 0, 0};
    }
    return request;
  }

  int compared_ = 0;
  int allowed_ = 0;

  ManualClock clock_{kT0};
  Metrics memory_metrics_;
  Metrics single_metrics_;
  Metrics batched_metrics_;
  boost::asio::io_context io_;
  StorePtr memory_;
  StorePtr single_;
  StorePtr batched_;
};

TEST_F(BatchConformanceTest, BatchedCallsDecideExactlyLikeOneCallPerRequest) {
  std::mt19937_64 rng(0xba7c4);
  compareTurns(rng, /*with_sketch=*/false, 60);
  // Admissions and denials both occurred, and batches really formed.
  EXPECT_GT(allowed_, compared_ / 10);
  EXPECT_LT(allowed_, compared_ * 9 / 10);
  Counter& calls = batched_metrics_.counter("redis_script_calls_total", {{"store", "redis"}});
  EXPECT_LT(calls.value() * 3, static_cast<std::uint64_t>(compared_)) << compared_ << " requests";
  EXPECT_EQ(single_metrics_.counter("redis_script_calls_total", {{"store", "redis"}}).value(),
            static_cast<std::uint64_t>(compared_) + 1);  // and the seed probe
}

TEST_F(BatchConformanceTest, BatchesWithSketchLimitsDecideExactlyLikeOneCallPerRequest) {
  std::mt19937_64 rng(0x5ce7c4);
  compareTurns(rng, /*with_sketch=*/true, 40);
  EXPECT_GT(allowed_, compared_ / 10);
  EXPECT_LT(allowed_, compared_ * 9 / 10);
}

TEST_F(BatchConformanceTest, BatchesWithOverridesAndHoldsDecideExactlyLikeOneCallPerRequest) {
  // The limits may take a runtime override (two clients have one), and reserves put holds
  // on buckets that later requests of the same batch read: a batch reads its buckets, their
  // holds and its overrides ahead, and must answer what one call per request answers.
  static const std::string kRule = "d.k";
  StoreLimit limit;
  limit.key = "d:k=v;i0;fw";
  limit.params.algorithm = Algorithm::kFixedWindow;
  limit.params.limit = 6;
  limit.params.window_us = kMicrosPerSecond;
  limit.override_rule = &kRule;
  setOverrideEverywhere("client1", kRule, limit.params, 2);
  setOverrideEverywhere("client3", kRule, limit.params, 11);
  std::mt19937_64 rng(0x0e4d);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  Micros now = kT0 + 3 * kMicrosPerSecond + 100;
  int serial = 0;
  int overridden = 0;
  int reserved = 0;
  for (int t = 0; t < 50; ++t) {
    std::vector<std::pair<Micros, StoreRequest>> requests;
    const int size = static_cast<int>(pick(2, 30));
    for (int i = 0; i < size; ++i) {
      now += pick(0, 3) == 0 ? pick(1, 60 * kMicrosPerMilli) : 0;
      requests.emplace_back(now, overridableRequest(rng, limit, ++serial));
    }
    std::vector<Result<StoreResponse>> expected;
    std::vector<Result<StoreResponse>> one_by_one;
    for (const auto& [at, request] : requests) {
      clock_.set(at);
      expected.push_back(runOne(*memory_, request));
      one_by_one.push_back(runOne(*single_, request));
    }
    const std::vector<Result<StoreResponse>> together = runTurn(*batched_, requests);
    for (std::size_t i = 0; i < requests.size(); ++i) {
      const std::string where = "turn " + std::to_string(t) + " request " + std::to_string(i);
      expectSame(expected[i], one_by_one[i], "one call per request", where);
      expectSame(expected[i], together[i], "batched", where);
      ASSERT_EQ(expected[i]->hold_status, together[i]->hold_status) << where;
      ASSERT_EQ(one_by_one[i]->overrides.size(), together[i]->overrides.size())
          << where << " " << requests[i].second.limits[0].key << " limits "
          << requests[i].second.limits.size() << " hold "
          << static_cast<int>(requests[i].second.hold.op) << " cost " << requests[i].second.cost;
      ASSERT_EQ(expected[i]->overrides.size(), together[i]->overrides.size()) << where;
      overridden += together[i]->overrides.empty() ? 0 : 1;
      reserved += together[i]->hold_status == HoldStatus::kReserved ? 1 : 0;
      allowed_ += expected[i]->allowed ? 1 : 0;
      ++compared_;
    }
  }
  EXPECT_GT(overridden, compared_ / 10);
  EXPECT_GT(reserved, 10);
  EXPECT_GT(allowed_, compared_ / 10);
  EXPECT_LT(allowed_, compared_ * 9 / 10);
}

/// The script's batch layout straight on a connection (as the store sends it).
class RawBatch {
 public:
  explicit RawBatch(boost::asio::io_context& io) : io_(io) {
    redis::ConnectionOptions copts;
    auto options = parseRedisUrl(sharedRedis().url());
    EXPECT_TRUE(options.ok());
    copts.redis = *options;
    copts.scripts.push_back(redis::composeScript(ScriptTime::kStoreClock));
    connection_ = redis::RedisConnection::create(io_, copts);
    connection_->start();
    EXPECT_TRUE(test::runUntil(io_, [&] { return connection_->ready(); }));
  }
  ~RawBatch() { connection_->stop(); }

  /// One call: request j names keys[j] with argument list lists[j] (each its own list).
  Result<redis::Reply> call(const std::vector<std::string>& keys,
                            const std::vector<std::vector<std::string>>& lists) {
    std::vector<std::string> args = {"batch", std::to_string(keys.size()),
                                     std::to_string(lists.size())};
    for (std::size_t j = 0; j < keys.size(); ++j) {
      args.push_back("1");
      args.push_back(std::to_string(j + 1));
    }
    for (const auto& list : lists) {
      args.push_back(std::to_string(list.size()));
      args.insert(args.end(), list.begin(), list.end());
    }
    std::optional<Result<redis::Reply>> reply;
    connection_->evalScript(0, keys, args, std::chrono::milliseconds(5000),
                            [&](Result<redis::Reply> r) { reply.emplace(std::move(r)); });
    if (!test::runUntil(io_, [&] { return reply.has_value(); })) {
      return makeError(ErrorKind::kTimeout, "no answer");
    }
    return std::move(*reply);
  }

  /// One decision in the one-decision layout (no batch).
  Result<redis::Reply> callOne(const std::string& key, const std::vector<std::string>& list) {
    std::optional<Result<redis::Reply>> reply;
    connection_->evalScript(0, {key}, list, std::chrono::milliseconds(5000),
                            [&](Result<redis::Reply> r) { reply.emplace(std::move(r)); });
    if (!test::runUntil(io_, [&] { return reply.has_value(); })) {
      return makeError(ErrorKind::kTimeout, "no answer");
    }
    return std::move(*reply);
  }

 private:
  boost::asio::io_context& io_;
  std::shared_ptr<redis::RedisConnection> connection_;
};

/// A fixed window of `limit` per second at test time `at`, charged `cost` (one decision's
/// list).
std::vector<std::string> fixedWindowHit(Micros at, int limit, const std::string& cost = "1") {
  // clang-format off
  return {std::to_string(at), "0", std::to_string(limit), "1000000", "0", "0", "0", "0", cost,
          "-1", "1"};
  // clang-format on
}

/// A store whose calls Redis may hold (CLIENT PAUSE) without the connection looking dead.
StorePtr pausableStore(boost::asio::io_context& io, Metrics& metrics, const Clock& clock,
                       const std::string& prefix, std::size_t in_flight,
                       std::chrono::milliseconds timeout) {
  RedisOptions o = storeOptions(prefix, kMaxBatch);
  o.max_batches_in_flight = in_flight;
  o.request_timeout = timeout;
  o.stall_timeout = std::chrono::milliseconds(10'000);
  StorePtr store = makeRedisStore(io, o, metrics, clock);
  EXPECT_TRUE(test::runUntil(io, [&] { return store->healthy(); }));
  return store;
}

StoreLimit longWindow(std::int64_t limit) {
  StoreLimit l;
  l.key = "k";
  l.params.algorithm = Algorithm::kFixedWindow;
  l.params.limit = limit;
  l.params.window_us = 10 * 86400 * kMicrosPerSecond;  // no window ends during the test
  return l;
}

TEST_F(BatchConformanceTest, OneRequestsErrorFailsThatRequestAloneInItsBatch) {
  // The script's batch layout straight on a connection: the middle request's cost is not a
  // number, which stops that request's decision only (a fixed window of 5 per second).
  RawBatch raw(io_);
  const std::string prefix = "{" + testPrefix() + "}";
  std::vector<std::vector<std::string>> lists;
  for (const char* cost : {"1", "not-a-number", "2"}) {
    lists.push_back(fixedWindowHit(kT0, 5, cost));
  }
  auto reply = raw.call({prefix + "a", prefix + "b", prefix + "a"}, lists);
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  const redis::Reply& all = *reply;
  ASSERT_EQ(all.type, redis::Reply::Type::kArray);
  ASSERT_EQ(all.elements.size(), 3u);
  ASSERT_EQ(all.elements[0].type, redis::Reply::Type::kArray);
  EXPECT_EQ(all.elements[0].elements[0].integer, 1);  // allowed
  EXPECT_EQ(all.elements[0].elements[2].integer, 4);  // remaining
  EXPECT_EQ(all.elements[1].type, redis::Reply::Type::kString);
  EXPECT_NE(all.elements[1].str.find("ERR"), std::string::npos) << all.elements[1].str;
  ASSERT_EQ(all.elements[2].type, redis::Reply::Type::kArray);
  EXPECT_EQ(all.elements[2].elements[0].integer, 1);
  EXPECT_EQ(all.elements[2].elements[2].integer, 2);  // after the first request's hit: 5 - 1 - 2
  EXPECT_EQ(sharedRedis().command({"EXISTS", prefix + "b"})->integer, 0);
}

TEST_F(BatchConformanceTest, ADeadlinePassedFailsEachRequestOnceAndTheBatchRunsAtMostOnce) {
  // Redis holds every client's commands for 600 ms: the batch (deadline 150 ms) fails each
  // of its requests once with a timeout; Redis then runs it once, never twice.
  Metrics metrics;
  StorePtr store = pausableStore(io_, metrics, clock_, testPrefix() + "-deadline", 1,
                                 std::chrono::milliseconds(150));
  ASSERT_TRUE(store->healthy());
  const StoreRequest hit = clientRequest({longWindow(100)}, 1, "paused");
  ASSERT_TRUE(sharedRedis().command({"CLIENT", "PAUSE", "600", "ALL"}));
  std::vector<std::pair<Micros, StoreRequest>> turn(5, {kT0, hit});
  const auto results = runTurn(*store, turn);
  for (const auto& r : results) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, ErrorKind::kTimeout) << r.error().message;
  }
  EXPECT_EQ(metrics.counter("redis_script_calls_total", {{"store", "redis"}}).value(), 1u);
  // Once Redis answers again.
  const std::optional<StoreResponse> seen = checkOnceAnswered(*store, hit);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->outcomes[0].remaining, 100 - 5);
}

TEST_F(BatchConformanceTest, ABucketNamedSeveralTimesInABatchIsReadAndWrittenOnce) {
  // Five hits on one bucket in one call, over two windows (2 per second): decided on what
  // the hits before them left, the one write leaves the key as five calls of one would, its
  // value byte for byte and its expiry (set by the first hit of the second window).
  RawBatch raw(io_);
  const std::string prefix = "{" + testPrefix() + "}";
  const std::string batched = prefix + "a";
  const std::string alone = prefix + "b";
  std::vector<std::vector<std::string>> lists;
  for (Micros at : {kT0 + 100, kT0 + 200, kT0 + kMicrosPerSecond + 300,
                    kT0 + kMicrosPerSecond + 400, kT0 + kMicrosPerSecond + 500}) {
    lists.push_back(fixedWindowHit(at, 2));
  }
  const long long sets = sharedRedis().commandCalls("set");
  const long long mgets = sharedRedis().commandCalls("mget");
  auto together = raw.call(std::vector<std::string>(5, batched), lists);
  ASSERT_TRUE(together.ok()) << together.error().message;
  EXPECT_EQ(sharedRedis().commandCalls("set") - sets, 1);
  EXPECT_EQ(sharedRedis().commandCalls("mget") - mgets, 1);
  std::vector<redis::Reply> one_by_one;
  for (const auto& list : lists) {
    auto r = raw.callOne(alone, list);
    ASSERT_TRUE(r.ok()) << r.error().message;
    one_by_one.push_back(*r);
  }
  ASSERT_EQ(together->elements.size(), 5u);
  const std::int64_t allowed[] = {1, 1, 1, 1, 0};
  const std::int64_t remaining[] = {1, 0, 1, 0, 0};
  for (std::size_t j = 0; j < 5; ++j) {
    const redis::Reply& got = together->elements[j];
    ASSERT_EQ(got.type, redis::Reply::Type::kArray) << j << ": " << got.str;
    EXPECT_EQ(got.elements[0].integer, allowed[j]) << j;
    EXPECT_EQ(got.elements[2].integer, remaining[j]) << j;
    ASSERT_EQ(got.elements.size(), one_by_one[j].elements.size()) << j;
    for (std::size_t k = 0; k < got.elements.size(); ++k) {
      EXPECT_EQ(got.elements[k].integer, one_by_one[j].elements[k].integer) << j << "." << k;
    }
  }
  auto value = [](const std::string& key) {
    auto r = sharedRedis().command({"GET", key});
    return std::string(r->str, r->len);
  };
  EXPECT_FALSE(value(batched).empty());
  EXPECT_EQ(value(batched), value(alone));
  const long long ttl_batched = sharedRedis().command({"PTTL", batched})->integer;
  const long long ttl_alone = sharedRedis().command({"PTTL", alone})->integer;
  EXPECT_GT(ttl_batched, 0);
  EXPECT_NEAR(static_cast<double>(ttl_batched), static_cast<double>(ttl_alone), 1000.0);
}

TEST_F(BatchConformanceTest, ARefusedWriteOfASharedBucketFailsEveryHitItCarried) {
  // Redis refuses writes (no replica to write to): the call's one write of a bucket three
  // requests hit fails, and so does each of the three; none is counted. A request denied
  // on the same bucket keeps its answer.
  RawBatch raw(io_);
  const std::string key = "{" + testPrefix() + "}a";
  ASSERT_TRUE(sharedRedis().command({"CONFIG", "SET", "min-replicas-to-write", "1"}));
  std::vector<std::vector<std::string>> lists(4, fixedWindowHit(kT0 + 100, 3));
  auto reply = raw.call(std::vector<std::string>(4, key), lists);
  ASSERT_TRUE(sharedRedis().command({"CONFIG", "SET", "min-replicas-to-write", "0"}));
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  ASSERT_EQ(reply->elements.size(), 4u);
  for (std::size_t j = 0; j < 3; ++j) {
    ASSERT_EQ(reply->elements[j].type, redis::Reply::Type::kString) << j;
    EXPECT_NE(reply->elements[j].str.find("NOREPLICAS"), std::string::npos)
        << reply->elements[j].str;
  }
  ASSERT_EQ(reply->elements[3].type, redis::Reply::Type::kArray);
  EXPECT_EQ(reply->elements[3].elements[0].integer, 0);
  EXPECT_EQ(sharedRedis().command({"EXISTS", key})->integer, 0);
}

TEST_F(BatchConformanceTest, DecisionsMadeWhileABatchAwaitsItsAnswerGoTogetherInTheNext) {
  // At most one batch awaits Redis (the default): while Redis holds the first, the decisions
  // of the next turns wait, and go as one call once it is answered; each is answered once,
  // in order. Without the bound (0), each turn's batch goes at the end of its turn.
  for (const std::size_t in_flight : {std::size_t{1}, std::size_t{0}}) {
    SCOPED_TRACE("max_batches_in_flight " + std::to_string(in_flight));
    Metrics metrics;
    StorePtr store =
        pausableStore(io_, metrics, clock_, testPrefix() + "-held" + std::to_string(in_flight),
                      in_flight, std::chrono::milliseconds(10'000));
    Counter& calls = metrics.counter("redis_script_calls_total", {{"store", "redis"}});
    const StoreRequest hit = clientRequest({longWindow(100)}, 1, "held");
    std::vector<std::optional<Result<StoreResponse>>> results(9);
    // Redis holds every call long enough for the three turns below (microseconds each).
    ASSERT_TRUE(sharedRedis().command({"CLIENT", "PAUSE", "1500", "ALL"}));
    for (std::size_t turn = 0; turn < 3; ++turn) {
      for (std::size_t i = 3 * turn; i < 3 * turn + 3; ++i) {
        store->evaluate(
            hit, [&results, i](Result<StoreResponse> r) { results[i].emplace(std::move(r)); });
      }
      io_.poll();  // the end of the turn
      EXPECT_EQ(calls.value(), in_flight == 1 ? 1u : turn + 1);
    }
    ASSERT_TRUE(test::runUntil(
        io_,
        [&] {
          return std::all_of(results.begin(), results.end(),
                             [](const auto& r) { return r.has_value(); });
        },
        std::chrono::milliseconds(10'000)));
    EXPECT_EQ(calls.value(), in_flight == 1 ? 2u : 3u);
    for (std::size_t i = 0; i < results.size(); ++i) {
      ASSERT_TRUE(results[i]->ok()) << i << ": " << results[i]->error().message;
      EXPECT_TRUE((*results[i])->allowed);
      EXPECT_EQ((*results[i])->outcomes[0].remaining, 99 - static_cast<std::int64_t>(i)) << i;
    }
  }
}

TEST_F(BatchConformanceTest, AWaitingBatchKeepsItsDeadlineAndRunsAtMostOnce) {
  // Redis holds every call for 600 ms. The first batch fails at its deadline (150 ms); the
  // decisions that waited behind it then go, already late, and fail once too. Redis runs
  // each call once when the pause ends: every hit counted, none twice.
  Metrics metrics;
  StorePtr store = pausableStore(io_, metrics, clock_, testPrefix() + "-late", 1,
                                 std::chrono::milliseconds(150));
  const StoreRequest hit = clientRequest({longWindow(100)}, 1, "late");
  std::vector<std::optional<Result<StoreResponse>>> results(6);
  ASSERT_TRUE(sharedRedis().command({"CLIENT", "PAUSE", "600", "ALL"}));
  for (std::size_t turn = 0; turn < 2; ++turn) {
    for (std::size_t i = 3 * turn; i < 3 * turn + 3; ++i) {
      store->evaluate(hit,
                      [&results, i](Result<StoreResponse> r) { results[i].emplace(std::move(r)); });
    }
    io_.poll();
  }
  ASSERT_TRUE(test::runUntil(io_, [&] {
    return std::all_of(results.begin(), results.end(), [](const auto& r) { return r.has_value(); });
  }));
  for (const auto& r : results) {
    ASSERT_FALSE(r->ok());
    EXPECT_EQ(r->error().kind, ErrorKind::kTimeout) << r->error().message;
  }
  EXPECT_EQ(metrics.counter("redis_script_calls_total", {{"store", "redis"}}).value(), 2u);
  const std::optional<StoreResponse> seen = checkOnceAnswered(*store, hit);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->outcomes[0].remaining, 100 - 6);
}

}  // namespace
}  // namespace sluice::conformance
