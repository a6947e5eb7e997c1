#include "app/rules_watcher.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <thread>

namespace sluice::app {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

std::string rules(const std::string& domain, int per_minute) {
  return "domain: " + domain +
         "\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: minute\n"
         "      requests_per_unit: " +
         std::to_string(per_minute) + "\n";
}

class RulesWatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("sluice_watcher_" + std::to_string(::getpid()) + "_" + std::string(info->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (watcher_) {
      watcher_->stop();
      io_.run_for(100ms);
    }
    fs::remove_all(dir_);
  }

  void write(const std::string& name, const std::string& content) {
    // Write-then-rename, as editors and config management do.
    const fs::path tmp = dir_ / ("." + name + ".tmp");
    std::ofstream(tmp) << content;
    fs::rename(tmp, dir_ / name);
  }

  RulesWatcher& makeWatcher(std::chrono::milliseconds poll = 20ms,
                            std::chrono::milliseconds debounce = 20ms) {
    watcher_ = RulesWatcher::create(io_.get_executor(), {dir_.string(), poll, debounce, {}},
                                    metrics_, clock_);
    return *watcher_;
  }

  /// Runs the io_context until `done` holds or 5 s pass.
  bool runUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      io_.run_for(10ms);
      if (io_.stopped()) {
        io_.restart();
      }
    }
    return done();
  }

  std::uint64_t reloads(const std::string& result) {
    return metrics_.counter("rules_reloads_total", {{"result", result}}).value();
  }

  std::int64_t limitOf(const RuleSetPtr& set, const std::string& domain) {
    return set->findDomain(domain)->descriptors.at(0).limits.at(0).requests_per_unit;
  }

  fs::path dir_;
  boost::asio::io_context io_;
  Metrics metrics_;
  ManualClock clock_{1'700'000'000'123'000};
  std::shared_ptr<RulesWatcher> watcher_;
};

TEST_F(RulesWatcherTest, FirstLoadSwapsInAndStampsTheLoadTime) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  EXPECT_EQ(watcher.current(), nullptr);
  const RulesWatcher::Outcome outcome = watcher.reloadNow();
  EXPECT_EQ(outcome.status, RulesWatcher::Status::kSwapped);
  ASSERT_NE(watcher.current(), nullptr);
  EXPECT_EQ(watcher.current(), outcome.active);
  EXPECT_EQ(watcher.current()->loaded_at_ms, 1'700'000'000'123);
  EXPECT_EQ(limitOf(watcher.current(), "a"), 5);
  EXPECT_EQ(reloads("success"), 1u);
  EXPECT_EQ(metrics_.gauge("rules_active").value(), 1.0);
}

TEST_F(RulesWatcherTest, InvalidFirstLoadLeavesNoRulesAndCountsAFailure) {
  write("a.yaml", "domain: a\nratelimit: {}\n");
  RulesWatcher& watcher = makeWatcher();
  const RulesWatcher::Outcome outcome = watcher.reloadNow();
  EXPECT_EQ(outcome.status, RulesWatcher::Status::kRejected);
  ASSERT_EQ(outcome.errors.size(), 1u);
  EXPECT_EQ(outcome.errors[0].location.line, 2);
  EXPECT_EQ(watcher.current(), nullptr);
  EXPECT_EQ(reloads("failure"), 1u);
}

TEST_F(RulesWatcherTest, BrokenEditKeepsTheOldRulesServing) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  ASSERT_EQ(watcher.reloadNow().status, RulesWatcher::Status::kSwapped);
  const RuleSetPtr before = watcher.current();
  write("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute}\n");
  const RulesWatcher::Outcome outcome = watcher.reloadNow();
  EXPECT_EQ(outcome.status, RulesWatcher::Status::kRejected);
  EXPECT_EQ(outcome.errors.at(0).toString(),
            (dir_ / "a.yaml").string() +
                ":4:17: rate limit is missing 'requests_per_unit' "
                "(envoyproxy/ratelimit would read it as 0 and block all traffic; write "
                "'requests_per_unit: 0' if that is intended)");
  EXPECT_EQ(watcher.current(), before);
  EXPECT_EQ(outcome.active, before);
  EXPECT_EQ(reloads("success"), 1u);
  EXPECT_EQ(reloads("failure"), 1u);
}

TEST_F(RulesWatcherTest, FixAfterBreakSwapsIn) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  ASSERT_EQ(watcher.reloadNow().status, RulesWatcher::Status::kSwapped);
  write("a.yaml", "domain: a\nbroken: [\n");
  ASSERT_EQ(watcher.reloadNow().status, RulesWatcher::Status::kRejected);
  write("a.yaml", rules("a", 7));
  EXPECT_EQ(watcher.reloadNow().status, RulesWatcher::Status::kSwapped);
  EXPECT_EQ(limitOf(watcher.current(), "a"), 7);
}

TEST_F(RulesWatcherTest, UnchangedContentIsNotSwapped) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  ASSERT_EQ(watcher.reloadNow().status, RulesWatcher::Status::kSwapped);
  const RuleSetPtr before = watcher.current();
  write("a.yaml", rules("a", 5));
  EXPECT_EQ(watcher.reloadNow().status, RulesWatcher::Status::kUnchanged);
  EXPECT_EQ(watcher.current(), before);
  EXPECT_EQ(reloads("success"), 1u);
}

TEST_F(RulesWatcherTest, CallbacksRunAfterEverySwap) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  std::vector<std::string> hashes;
  watcher.onReload([&](RuleSetPtr set) { hashes.push_back(set->hash); });
  watcher.reloadNow();
  write("a.yaml", "nonsense: [\n");
  watcher.reloadNow();
  write("a.yaml", rules("a", 6));
  watcher.reloadNow();
  ASSERT_EQ(hashes.size(), 2u);
  EXPECT_EQ(hashes[1], watcher.current()->hash);
}

TEST_F(RulesWatcherTest, PollingPicksUpAnEdit) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  watcher.reloadNow();
  watcher.start();
  io_.run_for(50ms);
  write("a.yaml", rules("a", 9));
  EXPECT_TRUE(runUntil([&] { return limitOf(watcher.current(), "a") == 9; }));
}

TEST_F(RulesWatcherTest, PollingPicksUpSameSizeRewrites) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  watcher.reloadNow();
  watcher.start();
  for (int limit = 1; limit <= 4; ++limit) {
    // In place, same size, no pause: only the content digest tells these apart.
    std::ofstream(dir_ / "a.yaml") << rules("a", limit);
    EXPECT_TRUE(runUntil([&] { return limitOf(watcher.current(), "a") == limit; })) << limit;
  }
}

TEST_F(RulesWatcherTest, PollingPicksUpAddedAndDeletedFiles) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  watcher.reloadNow();
  watcher.start();
  write("b.yml", rules("b", 3));
  ASSERT_TRUE(runUntil([&] { return watcher.current()->findDomain("b") != nullptr; }));
  EXPECT_EQ(limitOf(watcher.current(), "b"), 3);
  fs::remove(dir_ / "b.yml");
  EXPECT_TRUE(runUntil([&] { return watcher.current()->findDomain("b") == nullptr; }));
  EXPECT_NE(watcher.current()->findDomain("a"), nullptr);
}

TEST_F(RulesWatcherTest, PollingRejectsABrokenEditOnceAndKeepsServing) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  watcher.reloadNow();
  const RuleSetPtr before = watcher.current();
  watcher.start();
  write("a.yaml", "domain: a\nbroken: [\n");
  ASSERT_TRUE(runUntil([&] { return reloads("failure") == 1; }));
  // Not retried while the file stays the same.
  io_.run_for(200ms);
  EXPECT_EQ(reloads("failure"), 1u);
  EXPECT_EQ(watcher.current(), before);
  write("a.yaml", rules("a", 8));
  EXPECT_TRUE(runUntil([&] { return limitOf(watcher.current(), "a") == 8; }));
}

TEST_F(RulesWatcherTest, EditorTemporariesDoNotTriggerAReload) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  watcher.reloadNow();
  const std::string before = rulesFingerprint(dir_.string());
  std::ofstream(dir_ / ".a.yaml.swp") << "x";
  std::ofstream(dir_ / "a.yaml~") << "x";
  std::ofstream(dir_ / "notes.txt") << "x";
  EXPECT_EQ(rulesFingerprint(dir_.string()), before);
  write("a.yaml", rules("a", 6));
  EXPECT_NE(rulesFingerprint(dir_.string()), before);
}

TEST_F(RulesWatcherTest, RequestReloadRunsOnTheExecutor) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  watcher.requestReload();
  EXPECT_EQ(watcher.current(), nullptr);
  EXPECT_TRUE(runUntil([&] { return watcher.current() != nullptr; }));
}

// A change is served within 2 seconds (config/rules/README.md, "Validation and reload"). The watcher notices it at its next poll
// and reloads once it has been stable for `debounce`, so the bound is poll_interval +
// debounce with the defaults sluice runs with (src/app/app.cpp), plus the load itself. This
// is checked here, not with a wall clock in the integration test (rules_reload_test), where
// a loaded machine makes the process slow rather than the watcher late.
TEST(RulesWatcherDefaultsTest, DefaultsNoticeAChangeWithinTwoSeconds) {
  const RulesWatcher::Options defaults;
  EXPECT_LE(defaults.poll_interval + defaults.debounce, 2s);
}

TEST_F(RulesWatcherTest, StopEndsPolling) {
  write("a.yaml", rules("a", 5));
  RulesWatcher& watcher = makeWatcher();
  watcher.reloadNow();
  watcher.start();
  io_.run_for(50ms);
  watcher.stop();
  io_.restart();
  // With the timer cancelled nothing is left to run: run() returns by itself (a poll chain
  // still armed would keep it running for ever). The 30 s deadline only bounds a failure;
  // no wall-clock bound on a passing run, which may be slow on a loaded machine.
  std::promise<void> ran;
  std::future<void> returned = ran.get_future();
  std::thread runner([&] {
    io_.run();
    ran.set_value();
  });
  const bool ended = returned.wait_for(30s) == std::future_status::ready;
  if (!ended) {
    io_.stop();
  }
  runner.join();
  EXPECT_TRUE(ended) << "io_context::run() did not return: something is still polling";
  write("a.yaml", rules("a", 9));
  io_.restart();
  io_.run_for(100ms);
  EXPECT_EQ(limitOf(watcher.current(), "a"), 5);
}

TEST_F(RulesWatcherTest, WorksOnAMultiThreadedExecutor) {
  write("a.yaml", rules("a", 5));
  boost::asio::thread_pool pool(4);
  auto watcher =
      RulesWatcher::create(pool.get_executor(), {dir_.string(), 10ms, 10ms, {}}, metrics_, clock_);
  watcher->reloadNow();
  watcher->start();
  watcher->start();
  for (int limit = 6; limit <= 8; ++limit) {
    write("a.yaml", rules("a", limit));
    watcher->requestReload();
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (limitOf(watcher->current(), "a") != limit &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
    EXPECT_EQ(limitOf(watcher->current(), "a"), limit);
  }
  watcher->stop();
  pool.join();
}

TEST_F(RulesWatcherTest, WatchesASingleFile) {
  write("only.yaml", rules("a", 5));
  watcher_ = RulesWatcher::create(
      io_.get_executor(), {(dir_ / "only.yaml").string(), 20ms, 20ms, {}}, metrics_, clock_);
  watcher_->reloadNow();
  watcher_->start();
  write("only.yaml", rules("a", 6));
  EXPECT_TRUE(runUntil([&] { return limitOf(watcher_->current(), "a") == 6; }));
}

}  // namespace
}  // namespace sluice::app
