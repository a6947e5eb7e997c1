// Reservation holds (store.hpp: HoldCall, HoldStatus) on the memory store (C++) and a real
// redis-server (80_holds.lua, 99_evaluate.lua): expected answers first, then random traces
// of reserves, commits, releases, charges and checks compared field by field.
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "conformance/conformance_harness.hpp"

namespace sluice::conformance {
namespace {

constexpr Micros kMs = kMicrosPerMilli;
constexpr Micros kSec = kMicrosPerSecond;

LimitParams params(Algorithm algorithm, std::int64_t limit, Micros window) {
  LimitParams p;
  p.algorithm = algorithm;
  p.limit = limit;
  p.window_us = window;
  return p;
}

StoreLimit limitOf(const std::string& key, const LimitParams& p) {
  StoreLimit limit;
  limit.key = key;
  limit.params = p;
  return limit;
}

std::string nonceOf(int n) {
  char text[17];
  std::snprintf(text, sizeof text, "%016x", static_cast<unsigned>(n));
  return text;
}

StoreRequest step(const std::vector<StoreLimit>& limits, HoldOp op, std::int64_t cost,
                  const std::string& nonce, Micros ttl, Micros expires_at) {
  StoreRequest request = clientRequest(limits, cost, "holder");
  request.hold.op = op;
  request.hold.nonce = nonce;
  request.hold.ttl_us = ttl;
  request.hold.keep_us = 2 * kSec;
  request.hold.expires_at_us = expires_at;
  request.hold.max_holds = 4;
  if (op == HoldOp::kCommit) {
    request.charge = Charge::kReport;
  }
  return request;
}

std::string describe(const StoreResponse& r) {
  std::string out = "status=" + std::to_string(static_cast<int>(r.hold_status)) +
                    " allowed=" + std::to_string(r.allowed) +
                    " expires=" + std::to_string(r.hold_expires_at_us) +
                    " amount=" + std::to_string(r.hold_amount) + " expired=[";
  for (const auto e : r.holds_expired) {
    out += std::to_string(e) + ",";
  }
  out += "]";
  for (const Outcome& o : r.outcomes) {
    out += " " + str(o);
  }
  return out;
}

bool sameResponse(const StoreResponse& a, const StoreResponse& b) {
  if (a.hold_status != b.hold_status || a.allowed != b.allowed ||
      a.hold_expires_at_us != b.hold_expires_at_us || a.hold_amount != b.hold_amount ||
      a.outcomes.size() != b.outcomes.size()) {
    return false;
  }
  std::vector<std::uint32_t> ea = a.holds_expired;
  std::vector<std::uint32_t> eb = b.holds_expired;
  ea.resize(a.outcomes.size());
  eb.resize(b.outcomes.size());
  if (ea != eb) {
    return false;
  }
  for (std::size_t i = 0; i < a.outcomes.size(); ++i) {
    if (!sameOutcome(a.outcomes[i], b.outcomes[i])) {
      return false;
    }
  }
  return true;
}

/// Runs one request on both stores and requires the same answer; returns the memory one.
StoreResponse both(StorePair& pair, const StoreRequest& request, const std::string& what) {
  auto m = pair.run(pair.memory(), request);
  auto r = pair.run(pair.redis(), request);
  EXPECT_TRUE(m.ok() && r.ok()) << what << ": " << (m.ok() ? r.error().message : m.error().message);
  if (!m.ok() || !r.ok()) {
    return StoreResponse{};
  }
  EXPECT_TRUE(sameResponse(*m, *r))
      << what << "\n memory: " << describe(*m) << "\n redis:  " << describe(*r);
  return *m;
}

class ConformanceReservationTest : public ::testing::Test {
 protected:
  StorePair pair_{testPrefix()};
};

TEST_F(ConformanceReservationTest, AHoldCountsUntilCommittedAndACommitChargesOnce) {
  const std::vector<StoreLimit> limits = {
      limitOf("user", params(Algorithm::kFixedWindow, 1000, 60 * kSec))};
  StoreResponse held =
      both(pair_, step(limits, HoldOp::kReserve, 600, nonceOf(1), 10 * kSec, 0), "reserve 600");
  EXPECT_EQ(held.hold_status, HoldStatus::kReserved);
  EXPECT_EQ(held.outcomes[0].remaining, 400);
  EXPECT_EQ(held.hold_expires_at_us, kT0 + 10 * kSec);
  EXPECT_EQ(both(pair_, step(limits, HoldOp::kReserve, 401, nonceOf(2), kSec, 0), "reserve 401")
                .hold_status,
            HoldStatus::kDenied);
  StoreRequest plain = clientRequest(limits, 401, "holder");
  EXPECT_FALSE(both(pair_, plain, "charge 401").allowed);
  StoreResponse committed = both(
      pair_, step(limits, HoldOp::kCommit, 250, nonceOf(1), 0, held.hold_expires_at_us), "commit");
  EXPECT_EQ(committed.hold_status, HoldStatus::kCommitted);
  EXPECT_EQ(committed.hold_amount, 600);
  EXPECT_EQ(committed.outcomes[0].remaining, 750);
  EXPECT_EQ(both(pair_, step(limits, HoldOp::kCommit, 250, nonceOf(1), 0, held.hold_expires_at_us),
                 "commit again")
                .hold_status,
            HoldStatus::kSettled);
  EXPECT_EQ(both(pair_, clientRequest(limits, 0, "holder"), "check").outcomes[0].remaining, 750);
}

TEST_F(ConformanceReservationTest, ExpiryReturnsTheHoldAndALateCommitIsAReport) {
  const std::vector<StoreLimit> limits = {
      limitOf("tokens", params(Algorithm::kTokenBucket, 100, 10 * kSec))};
  StoreResponse held =
      both(pair_, step(limits, HoldOp::kReserve, 90, nonceOf(7), 500 * kMs, 0), "reserve");
  ASSERT_EQ(held.hold_status, HoldStatus::kReserved);
  pair_.clock().set(kT0 + 499 * kMs);
  EXPECT_EQ(both(pair_, clientRequest(limits, 0, "holder"), "check").outcomes[0].remaining, 10);
  pair_.clock().set(kT0 + 500 * kMs);
  StoreResponse after = both(pair_, clientRequest(limits, 0, "holder"), "check after");
  EXPECT_EQ(after.outcomes[0].remaining, 100);
  ASSERT_EQ(after.holds_expired.size(), 1U);
  EXPECT_EQ(after.holds_expired[0], 1U);
  StoreResponse late = both(
      pair_, step(limits, HoldOp::kCommit, 95, nonceOf(7), 0, held.hold_expires_at_us), "late");
  EXPECT_EQ(late.hold_status, HoldStatus::kLate);
  EXPECT_EQ(late.outcomes[0].remaining, 5);
  EXPECT_EQ(both(pair_, step(limits, HoldOp::kRelease, 0, nonceOf(7), 0, held.hold_expires_at_us),
                 "release after")
                .hold_status,
            HoldStatus::kSettled);
}

TEST_F(ConformanceReservationTest, UnknownExpiredAndFullAnswerAlike) {
  const std::vector<StoreLimit> limits = {
      limitOf("swl", params(Algorithm::kSlidingWindowLog, 10, kSec))};
  EXPECT_EQ(both(pair_, step(limits, HoldOp::kRelease, 0, nonceOf(99), 0, kT0 + kSec), "unknown")
                .hold_status,
            HoldStatus::kUnknown);
  EXPECT_EQ(
      both(pair_, step(limits, HoldOp::kRelease, 0, nonceOf(99), 0, kT0), "expired").hold_status,
      HoldStatus::kExpired);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(both(pair_, step(limits, HoldOp::kReserve, 1, nonceOf(10 + i), kSec, 0), "hold")
                  .hold_status,
              HoldStatus::kReserved);
  }
  EXPECT_EQ(
      both(pair_, step(limits, HoldOp::kReserve, 1, nonceOf(20), kSec, 0), "full").hold_status,
      HoldStatus::kFull);
}

/// Random traces over every algorithm that holds reservations, two limits per request.
TEST_F(ConformanceReservationTest, RandomTracesAgree) {
  const std::vector<LimitParams> kinds = {
      params(Algorithm::kFixedWindow, 20, kSec),
      params(Algorithm::kSlidingWindowCounter, 20, kSec),
      params(Algorithm::kSlidingWindowLog, 20, kSec),
      params(Algorithm::kTokenBucket, 20, kSec),
      params(Algorithm::kLeakyBucket, 20, kSec),
  };
  std::mt19937 rng(20261126);
  int nonce = 1000;
  for (std::size_t k = 0; k < kinds.size(); ++k) {
    const std::vector<StoreLimit> limits = {
        limitOf("trace" + std::to_string(k) + ":a", kinds[k]),
        limitOf("trace" + std::to_string(k) + ":b", params(Algorithm::kFixedWindow, 30, 2 * kSec))};
    struct Held {
      std::string nonce;
      Micros expires_at;
    };
    std::vector<Held> held;
    Micros now = kT0 + static_cast<Micros>(k) * 100 * kSec;
    for (int s = 0; s < 300; ++s) {
      now += static_cast<Micros>(rng() % 150) * kMs;
      pair_.clock().set(now);
      const int op = static_cast<int>(rng() % 6);
      const std::string what = std::string(algorithmName(kinds[k].algorithm)) + " step " +
                               std::to_string(s) + " op " + std::to_string(op);
      if (op == 0 || (op >= 3 && held.empty())) {
        const std::int64_t amount = 1 + static_cast<std::int64_t>(rng() % 8);
        const Micros ttl = (50 + static_cast<Micros>(rng() % 600)) * kMs;
        const std::string n = nonceOf(++nonce);
        StoreResponse r = both(pair_, step(limits, HoldOp::kReserve, amount, n, ttl, 0), what);
        if (r.hold_status == HoldStatus::kReserved) {
          held.push_back({n, r.hold_expires_at_us});
        }
      } else if (op == 1) {
        both(pair_, clientRequest(limits, static_cast<std::int64_t>(rng() % 5), "holder"), what);
      } else if (op == 2) {
        both(pair_, clientRequest(limits, 0, "holder"), what);
      } else {
        const std::size_t pick = rng() % held.size();
        const HoldOp settle = op == 5 ? HoldOp::kRelease : HoldOp::kCommit;
        both(pair_,
             step(limits, settle, static_cast<std::int64_t>(rng() % 9), held[pick].nonce, 0,
                  held[pick].expires_at),
             what);
        if (rng() % 2 == 0) {
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(pick));
        }
      }
      if (::testing::Test::HasFailure()) {
        return;
      }
    }
  }
}

}  // namespace
}  // namespace sluice::conformance
