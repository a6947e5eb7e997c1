#include "sluice/common/manual_executor.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice {
namespace {

using namespace std::chrono_literals;

TEST(ManualExecutorTest, RunsPostedWorkOnlyWhenTold) {
  ManualClock clock;
  ManualExecutor executor(clock);
  std::string ran;
  executor.post([&] {
    ran += "a";
    executor.post([&] { ran += "c"; });
  });
  executor.post([&] { ran += "b"; });
  EXPECT_EQ(ran, "");
  EXPECT_EQ(executor.runReady(), 3U);
  EXPECT_EQ(ran, "abc");
}

TEST(ManualExecutorTest, TimersFireInDeadlineOrderAsTheClockAdvances) {
  ManualClock clock;
  ManualExecutor executor(clock);
  const Micros start = clock.nowMicros();
  std::string ran;
  Micros fired_at = 0;
  TimerPtr late = executor.makeTimer();
  TimerPtr early = executor.makeTimer();
  late->schedule(30ms, [&] { ran += "late"; });
  early->schedule(10ms, [&] {
    ran += "early,";
    fired_at = clock.nowMicros();
    early->schedule(50ms, [&] { ran += ",again"; });
  });
  executor.advance(9ms);
  EXPECT_EQ(ran, "");
  executor.advance(21ms);
  EXPECT_EQ(ran, "early,late");
  EXPECT_EQ(fired_at - start, 10'000);  // the clock stopped at the deadline
  executor.advance(30ms);
  EXPECT_EQ(ran, "early,late,again");
  EXPECT_EQ(executor.pendingTimers(), 0U);
}

TEST(ManualExecutorTest, ACancelledOrDestroyedTimerDoesNotFire) {
  ManualClock clock;
  ManualExecutor executor(clock);
  int fired = 0;
  TimerPtr cancelled = executor.makeTimer();
  cancelled->schedule(1ms, [&] { ++fired; });
  cancelled->cancel();
  {
    TimerPtr gone = executor.makeTimer();
    gone->schedule(1ms, [&] { ++fired; });
  }
  TimerPtr replaced = executor.makeTimer();
  replaced->schedule(1ms, [&] { fired += 10; });
  replaced->schedule(2ms, [&] { fired += 100; });
  executor.advance(5ms);
  EXPECT_EQ(fired, 100);
}

}  // namespace
}  // namespace sluice
