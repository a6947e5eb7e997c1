#include "sluice/common/top_denials.hpp"

#include <gtest/gtest.h>

#include <string>

#include "sluice/common/clock.hpp"

namespace sluice {
namespace {

constexpr Micros kWindow = 60 * kMicrosPerSecond;
// A window boundary, so that the tests can step across windows exactly.
constexpr Micros kStart = 1'700'000'040LL * kMicrosPerSecond;

TopDenialsOptions options(std::size_t capacity = 8) {
  TopDenialsOptions o;
  o.window_us = kWindow;
  o.capacity = capacity;
  return o;
}

TEST(TopDenialsTest, ReportsMostDeniedClientsPerRuleMergedAcrossThreads) {
  ManualClock clock(kStart);
  TopDenialsBoard board(options(), clock);
  TopDenials& t1 = board.addThread();
  TopDenials& t2 = board.addThread();
  for (int i = 0; i < 5; ++i) {
    t1.record("auth", "login", "mallory", clock.nowMicros());
  }
  for (int i = 0; i < 4; ++i) {
    t2.record("auth", "login", "mallory", clock.nowMicros());
  }
  t2.record("auth", "login", "alice", clock.nowMicros());
  t1.record("api", "per_user", "bob", clock.nowMicros());

  TopDenialsReport report = board.report({});
  ASSERT_EQ(report.rules.size(), 2u);
  EXPECT_EQ(report.rules[0].domain, "api");  // by domain, then rule
  const RuleTopDenials& login = report.rules[1];
  EXPECT_EQ(login.rule, "login");
  EXPECT_EQ(login.denied, 10u);
  EXPECT_EQ(login.error_bound, 0u);  // 5/8 + 5/8 rounded down
  ASSERT_EQ(login.clients.size(), 2u);
  EXPECT_EQ(login.clients[0].key, "mallory");
  EXPECT_EQ(login.clients[0].count, 9u);
  EXPECT_EQ(login.clients[0].error, 0u);
  EXPECT_EQ(login.clients[1].key, "alice");
  EXPECT_EQ(report.from_us, kStart - kWindow);
  EXPECT_EQ(report.to_us, kStart);
}

TEST(TopDenialsTest, FiltersByDomainRuleAndLimitsTheNumberOfClients) {
  ManualClock clock(kStart);
  TopDenialsBoard board(options(), clock);
  TopDenials& t = board.addThread();
  t.record("auth", "login", "a", kStart);
  t.record("auth", "login", "b", kStart);
  t.record("auth", "login", "b", kStart);
  t.record("auth", "signup", "c", kStart);
  t.record("api", "login", "d", kStart);

  TopDenialsQuery by_domain;
  by_domain.domain = "auth";
  EXPECT_EQ(board.report(by_domain).rules.size(), 2u);

  TopDenialsQuery by_rule;
  by_rule.rule = "login";
  auto report = board.report(by_rule);
  ASSERT_EQ(report.rules.size(), 2u);  // auth/login and api/login

  TopDenialsQuery one;
  one.domain = "auth";
  one.rule = "login";
  one.n = 1;
  report = board.report(one);
  ASSERT_EQ(report.rules.size(), 1u);
  ASSERT_EQ(report.rules[0].clients.size(), 1u);
  EXPECT_EQ(report.rules[0].clients[0].key, "b");
  EXPECT_EQ(report.rules[0].denied, 3u);  // N counts every denial, not only the n shown

  TopDenialsQuery none;
  none.domain = "nope";
  EXPECT_TRUE(board.report(none).rules.empty());
}

TEST(TopDenialsTest, CoversThePreviousAndTheCurrentWindowOnly) {
  ManualClock clock(kStart);
  TopDenialsBoard board(options(), clock);
  TopDenials& t = board.addThread();
  t.record("auth", "login", "old", kStart);
  clock.advance(std::chrono::seconds(60));  // next window: "old" is in the previous one
  t.record("auth", "login", "new", clock.nowMicros());
  auto report = board.report({});
  ASSERT_EQ(report.rules.size(), 1u);
  EXPECT_EQ(report.rules[0].denied, 2u);

  clock.advance(std::chrono::seconds(60));  // "old" is two windows back: gone
  report = board.report({});
  ASSERT_EQ(report.rules.size(), 1u);
  EXPECT_EQ(report.rules[0].denied, 1u);
  ASSERT_EQ(report.rules[0].clients.size(), 1u);
  EXPECT_EQ(report.rules[0].clients[0].key, "new");

  clock.advance(std::chrono::seconds(60));
  EXPECT_TRUE(board.report({}).rules.empty());
}

TEST(TopDenialsTest, ARuleSilentForTwoWindowsIsDroppedWhenAWindowStarts) {
  ManualClock clock(kStart);
  TopDenials t(options());
  t.record("auth", "removed_by_reload", "a", kStart);
  t.record("auth", "login", "a", kStart + 3 * kWindow);
  auto parts = t.parts({}, kStart + 3 * kWindow);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].rule, "login");
  // And it is not resurrected by a query of an old time either.
  EXPECT_EQ(t.parts({}, kStart).size(), 1u);
}

TEST(TopDenialsTest, SkippingAWindowClearsBothSummaries) {
  TopDenials t(options());
  t.record("auth", "login", "a", kStart);
  t.record("auth", "login", "b", kStart + 2 * kWindow);  // the window before is empty
  auto parts = t.parts({}, kStart + 2 * kWindow);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].summary.total, 1u);
}

TEST(TopDenialsTest, ErrorBoundIsStatedWhenClientsOutnumberCounters) {
  ManualClock clock(kStart);
  TopDenialsBoard board(options(2), clock);
  TopDenials& t = board.addThread();
  for (int i = 0; i < 10; ++i) {
    t.record("auth", "login", "heavy", kStart);
  }
  for (int i = 0; i < 6; ++i) {
    t.record("auth", "login", "light-" + std::to_string(i), kStart);
  }
  auto report = board.report({});
  ASSERT_EQ(report.rules.size(), 1u);
  const RuleTopDenials& rule = report.rules[0];
  EXPECT_EQ(rule.denied, 16u);
  EXPECT_EQ(rule.error_bound, 8u);  // 16 / 2
  ASSERT_FALSE(rule.clients.empty());
  EXPECT_EQ(rule.clients[0].key, "heavy");
  EXPECT_EQ(rule.clients[0].count, 10u);
  for (const auto& client : rule.clients) {
    EXPECT_LE(client.error, rule.error_bound);
  }
}

}  // namespace
}  // namespace sluice
