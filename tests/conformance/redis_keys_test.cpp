// Keys written by the production script: every key has a TTL no longer than its state
// needs, and hostile descriptor values and client ids get distinct buckets.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice::conformance {
namespace {

class RedisKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto parsed = parseRedisUrl(sharedRedis().url());
    ASSERT_TRUE(parsed.ok());
    RedisOptions o = *parsed;
    o.key_prefix = testPrefix();
    prefix_ = o.key_prefix;
    store_ = makeRedisStore(io_, o, metrics_, clock_);
    ASSERT_TRUE(test::runUntil(io_, [&] { return store_->healthy(); }));
  }

  Result<StoreResponse> run(const StoreRequest& request) {
    std::optional<Result<StoreResponse>> result;
    store_->evaluate(request, [&](Result<StoreResponse> r) { result.emplace(std::move(r)); });
    EXPECT_TRUE(test::runUntil(io_, [&] { return result.has_value(); }));
    return result ? std::move(*result) : Result<StoreResponse>(makeError(ErrorKind::kTimeout, ""));
  }

  std::vector<std::string> keys() {
    auto reply = sharedRedis().command({"KEYS", prefix_ + ":*"});
    std::vector<std::string> out;
    for (std::size_t i = 0; i < reply->elements; ++i) {
      out.emplace_back(reply->element[i]->str, reply->element[i]->len);
    }
    return out;
  }

  boost::asio::io_context io_;
  Metrics metrics_;
  SystemClock clock_;
  StorePtr store_;
  std::string prefix_;
};

TEST_F(RedisKeysTest, EveryAlgorithmWritesItsKeyWithATtlBoundedByItsState) {
  const Micros window = 10 * kMicrosPerSecond;
  std::vector<StoreLimit> limits;
  for (Algorithm a :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    StoreLimit l;
    l.key = BucketKey::storeKey("ttl-client", "ttl:" + std::string(algorithmName(a)));
    l.params.algorithm = a;
    l.params.limit = 5;
    l.params.window_us = window;
    limits.push_back(l);
  }
  auto r = run(StoreRequest{limits, 1});
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto written = keys();
  EXPECT_EQ(written.size(), limits.size());
  for (std::size_t i = 0; i < limits.size(); ++i) {
    const std::string key = BucketKey::redisKey(prefix_, limits[i].key);
    auto pttl = sharedRedis().command({"PTTL", key});
    SCOPED_TRACE(key);
    EXPECT_GT(pttl->integer, 0);
    // Never longer than the state needs: the outcome's reset_after, rounded up to ms
    // (sliding_window_counter keeps its count for the next window: 2 W).
    EXPECT_LE(pttl->integer, (r->outcomes[i].reset_after_us + 999) / 1000);
    EXPECT_LE(pttl->integer, 2 * window / 1000);
  }
}

TEST_F(RedisKeysTest, AFixedWindowRewrittenInItsWindowKeepsTheExpiryOfTheWindowsEnd) {
  // The first write of a window sets its PX (the window's end, rounded up to ms); the later
  // ones of the same window keep it (SET ... KEEPTTL), alone or in a batch: the key never
  // outlives the window by more than the rounding, and never expires before its end.
  StoreLimit l;
  l.key = BucketKey::storeKey("keep-ttl", "ttl:fw");
  l.params.algorithm = Algorithm::kFixedWindow;
  l.params.limit = 100;
  l.params.window_us = 3600 * kMicrosPerSecond;
  const std::string key = BucketKey::redisKey(prefix_, l.key);
  for (int attempt = 0; attempt < 2; ++attempt) {
    sharedRedis().command({"DEL", key});
    auto first = run(StoreRequest{{l}, 1});
    ASSERT_TRUE(first.ok()) << first.error().message;
    const long long first_pttl = sharedRedis().command({"PTTL", key})->integer;
    EXPECT_GT(first_pttl, 0);
    EXPECT_LE(first_pttl, (first->outcomes[0].reset_after_us + 999) / 1000);
    std::vector<std::optional<Result<StoreResponse>>> turn(3);  // one batched call
    for (auto& r : turn) {
      store_->evaluate(StoreRequest{{l}, 1}, [&r](Result<StoreResponse> got) { r.emplace(got); });
    }
    ASSERT_TRUE(test::runUntil(io_, [&] { return turn[0] && turn[1] && turn[2]; }));
    auto last = run(StoreRequest{{l}, 1});  // alone
    ASSERT_TRUE(last.ok()) << last.error().message;
    if (last->outcomes[0].remaining != 95) {
      continue;  // the hour turned between the requests: once more, in the new window
    }
    const long long pttl = sharedRedis().command({"PTTL", key})->integer;
    EXPECT_GT(pttl, 0);
    EXPECT_LE(pttl, first_pttl);
    // This write's own PX would be its reset_after rounded up; the kept one may be the
    // first write's rounding, at most a millisecond later.
    EXPECT_LE(pttl, (last->outcomes[0].reset_after_us + 999) / 1000 + 1);
    return;
  }
  FAIL() << "the window turned twice";
}

TEST_F(RedisKeysTest, AFreshBucketCheckedWithoutCostWritesNothing) {
  StoreLimit l;
  l.key = BucketKey::storeKey("c", "check:k");
  l.params.limit = 5;
  ASSERT_TRUE(run(StoreRequest{{l}, 0}).ok());
  EXPECT_TRUE(keys().empty());
}

TEST_F(RedisKeysTest, HostileDescriptorValuesAndClientIdsGetDistinctBuckets) {
  auto loaded = loadRulesFromStrings({{"hostile.yaml", R"(domain: hostile
descriptors:
  - key: k
    rate_limit:
      unit: hour
      requests_per_unit: 1
  - key: a_b
    descriptors:
      - key: c
        rate_limit:
          unit: hour
          requests_per_unit: 1
  - key: a
    descriptors:
      - key: b_c
        rate_limit:
          unit: hour
          requests_per_unit: 1
)"}});
  ASSERT_TRUE(loaded.rules) << (loaded.errors.empty() ? "" : loaded.errors[0].toString());
  const DomainConfig* domain = loaded.rules->findDomain("hostile");
  ASSERT_NE(domain, nullptr);

  const std::vector<std::string> values = {"x",
                                           "x:y",
                                           "x}",
                                           "{x",
                                           "x y",
                                           "x\ny",
                                           "é",
                                           "%78",
                                           "X",
                                           "x_y",
                                           "x|y",
                                           "*",
                                           std::string("x\0y", 3),
                                           "",
                                           "{}",
                                           "x:{y}",
                                           "\xff\xfe"};
  const std::vector<std::string> clients = {"", "u", "u}", "{u", "u:1", "u 1", "é", "%75"};
  std::vector<std::vector<Descriptor>> requests;
  for (const auto& v : values) {
    requests.push_back({{{"k", v}}});
  }
  requests.push_back({{{"a_b", "v"}, {"c", "w"}}});
  requests.push_back({{{"a", "v"}, {"b_c", "w"}}});

  std::set<std::string> redis_keys;
  for (const auto& client : clients) {
    for (const auto& descriptors : requests) {
      RequestMatch match = matchRequest(*domain, descriptors);
      ASSERT_EQ(match.descriptors.size(), 1u);
      ASSERT_EQ(match.descriptors[0].limits.size(), 1u);
      const MatchedLimit& ml = match.descriptors[0].limits[0];
      StoreLimit l{BucketKey::storeKey(client, ml.bucket_key), ml.limit->params, false,
                   std::nullopt, -1};
      const std::string key = BucketKey::redisKey(prefix_, l.key);
      // The client id appears once (its escaped form, in the hash tag).
      if (!client.empty()) {
        EXPECT_EQ(key.find(escapeKeyPart(client) + "|"), key.rfind(escapeKeyPart(client) + "|"))
            << key;
      }
      redis_keys.insert(key);
      auto r = run(StoreRequest{{l}, 1});
      ASSERT_TRUE(r.ok());
      // L = 1: a second request on a shared bucket would be denied.
      EXPECT_TRUE(r->allowed) << "client '" << client << "' descriptor value '"
                              << descriptors[0][0].value << "' shared a bucket";
    }
  }
  EXPECT_EQ(redis_keys.size(), clients.size() * requests.size());
  EXPECT_EQ(keys().size(), redis_keys.size());
}

}  // namespace
}  // namespace sluice::conformance
