// Reservations through the decision service on a real memory store and a manual clock:
// holds count against every matched limit, commits charge once, releases and expiry give the
// hold back, and bad steps are refused before any counter is touched.
#include "sluice/decision/reservation.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <optional>
#include <string>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr const char* kRules = R"(domain: llm
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1000}
    descriptors:
      - key: model
        rate_limit: {unit: hour, requests_per_unit: 1500}
  - key: bucket
    rate_limit: {unit: minute, requests_per_unit: 1000, algorithm: token_bucket}
  - key: ip
    rate_limit:
      unit: minute
      requests_per_unit: 100
      algorithm: sketch
      sketch: {expected_requests: 1000}
  - key: tenant
    rate_limit: {unit: minute, requests_per_unit: 100, consistency: eventual}
  - key: shaped
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: leaky_bucket, shape: true}
)";

class ReservationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadResult loaded = loadRulesFromStrings({{"llm.yaml", kRules}});
    ASSERT_TRUE(loaded.errors.empty()) << loaded.errors.front().toString();
    rules_ = loaded.rules;
    // The start of a minute: every test's fixed windows stay in one window.
    clock_.set(1'700'000'040LL * kMicrosPerSecond);
    store_ = makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_);
    DecisionServiceParts parts;
    parts.rules = [this] { return rules_; };
    parts.store = store_;
    parts.clock = &clock_;
    parts.reservations = settings_;
    parts.reservations.max_ttl_us = 120 * kMicrosPerSecond;
    parts.reservations.default_ttl_us = 30 * kMicrosPerSecond;
    parts.reservations.max_holds = 3;
    service_ = makeDecisionService(std::move(parts));
  }

  Result<Decision> decide(DecisionRequest r) {
    std::optional<Result<Decision>> out;
    service_->decide(std::move(r), [&](Result<Decision> d) { out.emplace(std::move(d)); });
    EXPECT_TRUE(out.has_value());
    return std::move(*out);
  }

  static DecisionRequest base(std::string key = "user", std::string value = "u1") {
    DecisionRequest r;
    r.domain = "llm";
    r.descriptors = {{Entry{std::move(key), std::move(value)}}};
    return r;
  }

  Result<Decision> reserve(std::int64_t amount, Micros ttl_us = 0, DecisionRequest r = base()) {
    r.hits = amount;
    r.reservation.op = HoldOp::kReserve;
    r.reservation.ttl_us = ttl_us;
    return decide(std::move(r));
  }

  Result<Decision> settle(HoldOp op, const std::string& id, std::int64_t actual = 0,
                          DecisionRequest r = base()) {
    r.hits = actual;
    r.reservation.op = op;
    r.reservation.id = id;
    return decide(std::move(r));
  }

  /// What a plain check (hits 0) says remains of the first limit.
  std::int64_t remaining(DecisionRequest r = base()) {
    r.hits = 0;
    auto d = decide(std::move(r));
    EXPECT_TRUE(d.ok());
    return d->descriptors[0].limits[0].outcome.remaining;
  }

  RuleSetPtr rules_;
  ManualClock clock_;
  Metrics metrics_;
  ReservationSettings settings_;
  StorePtr store_;
  std::unique_ptr<DecisionService> service_;
};

TEST_F(ReservationTest, AHoldCountsAgainstTheLimitUntilCommitted) {
  auto held = reserve(600);
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_EQ(held->reservation.status, HoldStatus::kReserved);
  EXPECT_TRUE(held->allowed);
  EXPECT_EQ(held->descriptors[0].limits[0].outcome.remaining, 400);
  EXPECT_EQ(remaining(), 400);

  auto second = reserve(600);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->reservation.status, HoldStatus::kDenied);
  EXPECT_FALSE(second->allowed);

  DecisionRequest plain = base();
  plain.hits = 401;
  EXPECT_FALSE(decide(std::move(plain))->allowed);

  auto committed = settle(HoldOp::kCommit, held->reservation.id, 250);
  ASSERT_TRUE(committed.ok());
  EXPECT_EQ(committed->reservation.status, HoldStatus::kCommitted);
  EXPECT_EQ(committed->reservation.reserved, 600);
  EXPECT_EQ(remaining(), 750);
}

TEST_F(ReservationTest, ACommitTwiceChargesOnce) {
  auto held = reserve(100);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(settle(HoldOp::kCommit, held->reservation.id, 80)->reservation.status,
            HoldStatus::kCommitted);
  EXPECT_EQ(settle(HoldOp::kCommit, held->reservation.id, 80)->reservation.status,
            HoldStatus::kSettled);
  EXPECT_EQ(remaining(), 920);
  // Even once the hold's time is over, the id is remembered: still charged once.
  clock_.advance(std::chrono::seconds(31));
  EXPECT_EQ(settle(HoldOp::kCommit, held->reservation.id, 80)->reservation.status,
            HoldStatus::kSettled);
  EXPECT_EQ(remaining(), 920);
}

// The same bucket twice in one request (a descriptor sent twice): held once, settled once,
// and the bucket's memory forgotten once both limits have let go of it.
TEST_F(ReservationTest, TheSameBucketTwiceIsHeldAndForgottenOnce) {
  DecisionRequest twice = base();
  twice.descriptors.push_back(twice.descriptors.front());
  auto held = reserve(100, 0, twice);
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_EQ(held->reservation.status, HoldStatus::kReserved);
  auto committed = settle(HoldOp::kCommit, held->reservation.id, 100, twice);
  ASSERT_TRUE(committed.ok()) << committed.error().message;
  EXPECT_EQ(committed->reservation.status, HoldStatus::kCommitted);
  EXPECT_EQ(committed->reservation.reserved, 100);
  EXPECT_EQ(settle(HoldOp::kCommit, held->reservation.id, 100, twice)->reservation.status,
            HoldStatus::kSettled);
  // Past the hold's expiry and its memory (--max-reservation-ttl after it): the next request
  // on the bucket forgets the memory, and the set with it, on both limits.
  clock_.advance(std::chrono::seconds(30 + 120 + 1));
  DecisionRequest check = twice;
  check.hits = 0;
  auto after = decide(std::move(check));
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_TRUE(after->allowed);
  // Forgotten: a commit now is a late one (charged as a report), not a second one.
  EXPECT_EQ(settle(HoldOp::kCommit, held->reservation.id, 100, twice)->reservation.status,
            HoldStatus::kLate);
}

TEST_F(ReservationTest, AReleaseGivesTheHoldBackAndASecondIsRefused) {
  auto held = reserve(700);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(remaining(), 300);
  EXPECT_EQ(settle(HoldOp::kRelease, held->reservation.id)->reservation.status,
            HoldStatus::kReleased);
  EXPECT_EQ(remaining(), 1000);
  EXPECT_EQ(settle(HoldOp::kRelease, held->reservation.id)->reservation.status,
            HoldStatus::kSettled);
  EXPECT_EQ(remaining(), 1000);
}

TEST_F(ReservationTest, AnExpiredHoldReturnsByItselfAndALateCommitIsAReport) {
  auto held = reserve(900, 10 * kMicrosPerSecond);
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(remaining(), 100);
  clock_.advance(std::chrono::milliseconds(9999));
  EXPECT_EQ(remaining(), 100);
  clock_.advance(std::chrono::milliseconds(1));
  EXPECT_EQ(remaining(), 1000);
  auto late = settle(HoldOp::kCommit, held->reservation.id, 950);
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->reservation.status, HoldStatus::kLate);
  EXPECT_EQ(remaining(), 50);
  EXPECT_EQ(settle(HoldOp::kCommit, held->reservation.id, 950)->reservation.status,
            HoldStatus::kSettled);
  EXPECT_EQ(remaining(), 50);
}

TEST_F(ReservationTest, AReleaseAfterExpiryIsExpired) {
  auto held = reserve(10, 5 * kMicrosPerSecond);
  ASSERT_TRUE(held.ok());
  clock_.advance(std::chrono::seconds(6));
  EXPECT_EQ(settle(HoldOp::kRelease, held->reservation.id)->reservation.status,
            HoldStatus::kExpired);
}

TEST_F(ReservationTest, HoldsCountOnEveryMatchedLimitAllOrNothing) {
  DecisionRequest both = base();
  both.descriptors = {{Entry{"user", "u1"}, Entry{"model", "m"}}};
  // Nested: user=u1 alone (1000/min) and user=u1,model=m (1500/h) are separate descriptors.
  both.descriptors = {{Entry{"user", "u1"}}, {Entry{"user", "u1"}, Entry{"model", "m"}}};
  auto first = reserve(900, 0, both);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->reservation.status, HoldStatus::kReserved);
  DecisionRequest model = base();
  model.descriptors = {{Entry{"user", "u1"}, Entry{"model", "m"}}};
  EXPECT_EQ(remaining(model), 600);
  // The hour limit has room for 600 more, the minute limit for 100: denied, nothing held.
  auto second = reserve(500, 0, both);
  EXPECT_EQ(second->reservation.status, HoldStatus::kDenied);
  EXPECT_EQ(remaining(model), 600);
}

TEST_F(ReservationTest, TokenBucketHoldsTokens) {
  auto held = reserve(800, 0, base("bucket", "b"));
  ASSERT_TRUE(held.ok()) << held.error().message;
  EXPECT_EQ(held->reservation.status, HoldStatus::kReserved);
  EXPECT_EQ(remaining(base("bucket", "b")), 200);
  EXPECT_EQ(reserve(300, 0, base("bucket", "b"))->reservation.status, HoldStatus::kDenied);
  EXPECT_EQ(
      settle(HoldOp::kRelease, held->reservation.id, 0, base("bucket", "b"))->reservation.status,
      HoldStatus::kReleased);
  EXPECT_EQ(remaining(base("bucket", "b")), 1000);
}

TEST_F(ReservationTest, ABucketHoldsAtMostMaxHolds) {
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(reserve(1)->reservation.status, HoldStatus::kReserved);
  }
  auto full = reserve(1);
  EXPECT_EQ(full->reservation.status, HoldStatus::kFull);
  EXPECT_FALSE(full->allowed);
}

TEST_F(ReservationTest, RefusedStepsTouchNoCounter) {
  auto sketch = reserve(5, 0, base("ip", "1.2.3.4"));
  ASSERT_FALSE(sketch.ok());
  EXPECT_NE(sketch.error().message.find("a sketch limit cannot hold"), std::string::npos);
  auto eventual = reserve(5, 0, base("tenant", "t"));
  ASSERT_FALSE(eventual.ok());
  EXPECT_NE(eventual.error().message.find("an eventual limit cannot hold"), std::string::npos);
  auto shaped = reserve(5, 0, base("shaped", "s"));
  ASSERT_FALSE(shaped.ok());
  EXPECT_NE(shaped.error().message.find("shaped leaky bucket"), std::string::npos);
  auto too_long = reserve(5, 121 * kMicrosPerSecond);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.error().message.find("--max-reservation-ttl"), std::string::npos);
  auto negative = reserve(5, -1);
  ASSERT_FALSE(negative.ok());
  auto nothing = reserve(0);
  ASSERT_FALSE(nothing.ok());
  auto held = reserve(10);
  ASSERT_TRUE(held.ok());
  auto huge = settle(HoldOp::kCommit, held->reservation.id, 5000);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().message.find("larger than any matched limit"), std::string::npos);
  auto foreign = settle(HoldOp::kCommit, held->reservation.id, 5, base("user", "u2"));
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.error().message.find("was made for another"), std::string::npos);
  auto garbage = settle(HoldOp::kRelease, "r1.nope");
  ASSERT_FALSE(garbage.ok());
  EXPECT_EQ(remaining(), 990);
}

TEST_F(ReservationTest, AnIdOfNoHoldIsUnknownUntilItsExpiry) {
  auto held = reserve(10, 20 * kMicrosPerSecond);
  ASSERT_TRUE(held.ok());
  auto id = parseReservationId(held->reservation.id);
  ASSERT_TRUE(id.ok());
  id->nonce = "0123456789abcdef";
  const std::string made_up = formatReservationId(*id);
  EXPECT_EQ(settle(HoldOp::kCommit, made_up, 5)->reservation.status, HoldStatus::kUnknown);
  EXPECT_EQ(remaining(), 990);
}

TEST_F(ReservationTest, ReservationIdsRoundTrip) {
  const ReservationId id{1'700'000'000'000'000, "00ff00ff00ff00ff", 0x1234};
  const std::string text = formatReservationId(id);
  EXPECT_EQ(text, "r1.1700000000000000.00ff00ff00ff00ff.0000000000001234");
  auto back = parseReservationId(text);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->expires_at_us, id.expires_at_us);
  EXPECT_EQ(back->nonce, id.nonce);
  EXPECT_EQ(back->fingerprint, id.fingerprint);
  EXPECT_FALSE(parseReservationId("r1.12.00FF00FF00FF00FF.0000000000001234").ok());
  EXPECT_FALSE(parseReservationId("").ok());
}

TEST_F(ReservationTest, TheFingerprintIsTheSameInEveryBuild) {
  // Ids made by one sidecar are checked by the others, which may run another build: the
  // fingerprint (FNV-1a over domain, client and descriptors) never changes its value.
  DecisionRequest request;
  request.domain = "llm";
  request.descriptors = {{{"user", "u1"}}};
  EXPECT_EQ(reservationFingerprint(request), 0x8d37919d7a99b46cULL);
  request.domain = "api";
  request.client_id = "client-7";
  request.descriptors = {{{"user", "u1"}, {"model", std::string(300, 'm')}},
                         {{"path", "/v1/chat"}}};
  EXPECT_EQ(reservationFingerprint(request), 0xd91214b14fdb066aULL);
}

TEST_F(ReservationTest, IdsOfEveryExpiryLengthRoundTrip) {
  for (const Micros expiry :
       {Micros{1}, Micros{12345678}, Micros{123456789}, Micros{999'999'999'999'999},
        Micros{1'000'000'000'000'000}, Micros{1'795'678'306'250'665}, Micros{9'999'999'999'999'999},
        Micros{10'000'000'000'000'000}, std::numeric_limits<Micros>::max()}) {
    const ReservationId id{expiry, "0123456789abcdef", 0xfedcba9876543210ULL};
    const std::string text = formatReservationId(id);
    EXPECT_EQ(text, "r1." + std::to_string(expiry) + ".0123456789abcdef.fedcba9876543210");
    auto back = parseReservationId(text);
    ASSERT_TRUE(back.ok()) << text;
    EXPECT_EQ(back->expires_at_us, expiry);
    EXPECT_EQ(back->nonce, id.nonce);
    EXPECT_EQ(back->fingerprint, id.fingerprint);
  }
  EXPECT_TRUE(parseReservationId("r1.0001795678306250665.bd74af11e301f534.8d37919d7a99b46c").ok());
}

TEST_F(ReservationTest, AnIdWithAnyByteOutOfPlaceIsRefused) {
  const std::string good = "r1.1795678306250665.bd74af11e301f534.8d37919d7a99b46c";
  ASSERT_TRUE(parseReservationId(good).ok());
  // Every byte of the expiry, the nonce and the fingerprint, replaced by bytes around the
  // digits' and letters' ranges: only another digit (or hex digit) is still an id.
  for (std::size_t i = 3; i < good.size(); ++i) {
    if (good[i] == '.') {
      continue;
    }
    const bool hex = i > 19;
    for (const int c : {0x00, 0x2f, 0x30, 0x39, 0x3a, 0x40, 0x41, 0x46, 0x60, 0x61, 0x66, 0x67,
                        0x7f, 0x80, 0xb0, 0xe1, 0xff}) {
      std::string text = good;
      text[i] = static_cast<char>(c);
      const bool digit = c >= '0' && c <= '9';
      const bool letter = c >= 'a' && c <= 'f';
      const bool expected = digit || (hex && letter);
      EXPECT_EQ(parseReservationId(text).ok(), expected) << i << " " << c;
    }
  }
}

}  // namespace
}  // namespace sluice
