#include "sluice/store/memory_snapshot.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/manual_executor.hpp"
#include "sluice/decision/decision_service.hpp"
#include "store/memory/snapshot_format.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;

constexpr const char* kRulesV1 = R"(domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 4, algorithm: sliding_window_log}
  - key: token
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: monthly
    rate_limit:
      unit: month
      requests_per_unit: 9
      calendar: {time_zone: Europe/Paris}
)";

/// v1 with `log` raised to 8 per minute and `token` gone.
constexpr const char* kRulesV2 = R"(domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: log
    rate_limit: {unit: minute, requests_per_unit: 8, algorithm: sliding_window_log}
  - key: monthly
    rate_limit:
      unit: month
      requests_per_unit: 9
      calendar: {time_zone: Europe/Paris}
)";

RuleSetPtr load(const char* yaml) {
  LoadResult loaded = loadRulesFromStrings({{"api.yaml", yaml}});
  EXPECT_TRUE(loaded.errors.empty()) << loaded.errors.front().toString();
  return loaded.rules;
}

/// One sidecar's memory store and decision service on a manual clock.
struct Sidecar {
  Sidecar(ManualClock& clock, RuleSetPtr rules) : clock(clock), rules(std::move(rules)) {
    store = makeMemoryStore(MemoryStoreOptions{}, clock, metrics);
    DecisionServiceParts parts;
    parts.rules = [this] { return this->rules; };
    parts.store = store;
    parts.clock = &clock;
    service = makeDecisionService(std::move(parts));
  }

  Outcome decide(const std::string& key, const std::string& value, std::int64_t hits = 1) {
    DecisionRequest r;
    r.domain = "api";
    r.client_id = "c";
    r.descriptors = {{Entry{key, value}}};
    r.hits = hits;
    std::optional<Result<Decision>> out;
    service->decide(std::move(r), [&](Result<Decision> d) { out.emplace(std::move(d)); });
    EXPECT_TRUE(out && out->ok());
    return (*out)->descriptors.at(0).limits.at(0).outcome;
  }

  MemoryCounters& counters() { return *memoryCountersOf(*store); }

  ManualClock& clock;
  RuleSetPtr rules;
  Metrics metrics;
  StorePtr store;
  std::unique_ptr<DecisionService> service;
};

bool same(const Outcome& a, const Outcome& b) {
  return a.allowed == b.allowed && a.remaining == b.remaining &&
         a.reset_after_us == b.reset_after_us && a.retry_after_us == b.retry_after_us;
}

class MemorySnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("snapshot-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    options_.path = (dir_ / "counters.snap").string();
    options_.interval = 10s;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Status snapshot(Sidecar& sidecar) {
    ManualExecutor executor(clock_);
    auto snapshotter = makeMemorySnapshotter(
        sidecar.counters(), options_, [&] { return sidecar.rules; }, clock_, executor,
        sidecar.metrics);
    return snapshotter->writeNow();
  }

  Result<SnapshotRestore> restore(Sidecar& sidecar) {
    return restoreMemorySnapshot(sidecar.counters(), options_, sidecar.rules, clock_.nowMicros(),
                                 sidecar.metrics);
  }

  std::string fileBytes() const {
    std::ifstream in(options_.path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  void writeBytes(const std::string& bytes) const {
    std::ofstream(options_.path, std::ios::binary | std::ios::trunc) << bytes;
  }

  ManualClock clock_;
  std::filesystem::path dir_;
  MemorySnapshotOptions options_;
};

TEST_F(MemorySnapshotTest, RestartKeepsEveryCounterExact) {
  Sidecar before(clock_, load(kRulesV1));
  for (int i = 0; i < 3; ++i) {
    before.decide("user", "alice");
    before.decide("log", "alice");
    clock_.advance(1ms);
  }
  before.decide("token", "alice", 7);
  before.decide("monthly", "alice", 4);
  ASSERT_TRUE(snapshot(before).ok());

  Sidecar after(clock_, load(kRulesV1));
  const Result<SnapshotRestore> restored = restore(after);
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_TRUE(restored->found);
  EXPECT_EQ(restored->restored, 4u);
  for (int step = 0; step < 4; ++step) {
    for (const char* key : {"user", "log", "token", "monthly"}) {
      const Outcome a = before.decide(key, "alice", 2);
      const Outcome b = after.decide(key, "alice", 2);
      EXPECT_TRUE(same(a, b)) << key << " step " << step << ": remaining " << a.remaining << " vs "
                              << b.remaining << ", retry " << a.retry_after_us << " vs "
                              << b.retry_after_us;
    }
    clock_.advance(15s);
  }
}

TEST_F(MemorySnapshotTest, PeriodicSnapshotsRunOnTheExecutorEveryInterval) {
  Sidecar sidecar(clock_, load(kRulesV1));
  ManualExecutor executor(clock_);
  auto snapshotter = makeMemorySnapshotter(
      sidecar.counters(), options_, [&] { return sidecar.rules; }, clock_, executor,
      sidecar.metrics);
  snapshotter->start();
  sidecar.decide("user", "bob");
  executor.advance(9s);
  EXPECT_FALSE(std::filesystem::exists(options_.path));
  executor.advance(1s);
  ASSERT_TRUE(std::filesystem::exists(options_.path));
  EXPECT_EQ(sidecar.metrics.counter("memory_snapshots_total", {{"result", "written"}}).value(), 1u);
  EXPECT_EQ(sidecar.metrics.gauge("memory_snapshot_buckets").value(), 1.0);
  sidecar.decide("user", "carol");
  executor.advance(10s);
  EXPECT_EQ(sidecar.metrics.counter("memory_snapshots_total", {{"result", "written"}}).value(), 2u);
  EXPECT_EQ(sidecar.metrics.gauge("memory_snapshot_buckets").value(), 2.0);
  snapshotter->stop();
  executor.advance(30s);
  EXPECT_EQ(sidecar.metrics.counter("memory_snapshots_total", {{"result", "written"}}).value(), 2u);
  EXPECT_FALSE(std::filesystem::exists(options_.path + ".tmp"));
}

TEST_F(MemorySnapshotTest, BucketsThatExpiredMeanwhileAreDropped) {
  Sidecar before(clock_, load(kRulesV1));
  before.decide("user", "alice");     // a minute's window
  before.decide("monthly", "alice");  // until the 1st
  ASSERT_TRUE(snapshot(before).ok());
  clock_.advance(2min);
  Sidecar after(clock_, load(kRulesV1));
  const Result<SnapshotRestore> restored = restore(after);
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->restored, 1u);
  EXPECT_EQ(restored->expired, 1u);
  EXPECT_EQ(
      after.metrics.counter("memory_snapshot_restored_buckets_total", {{"outcome", "expired"}})
          .value(),
      1u);
}

TEST_F(MemorySnapshotTest, OnlyBucketsWhoseLimitStillExistsUnchangedAreRestored) {
  Sidecar before(clock_, load(kRulesV1));
  before.decide("user", "alice", 3);
  before.decide("log", "alice", 3);
  before.decide("token", "alice", 3);
  ASSERT_TRUE(snapshot(before).ok());

  Sidecar after(clock_, load(kRulesV2));
  const Result<SnapshotRestore> restored = restore(after);
  ASSERT_TRUE(restored.ok());
  EXPECT_EQ(restored->restored, 1u);   // user: same limit
  EXPECT_EQ(restored->rule_gone, 2u);  // log: other parameters; token: gone
  EXPECT_EQ(after.decide("user", "alice").remaining, 1);
  EXPECT_EQ(after.decide("log", "alice").remaining, 7);  // a fresh bucket of the new limit
}

TEST_F(MemorySnapshotTest, NoFileIsAFirstStart) {
  Sidecar sidecar(clock_, load(kRulesV1));
  const Result<SnapshotRestore> restored = restore(sidecar);
  ASSERT_TRUE(restored.ok());
  EXPECT_FALSE(restored->found);
}

TEST_F(MemorySnapshotTest, AForeignFileIsRefusedNamingFileAndOffset) {
  writeBytes("not a snapshot at all, just text\n");
  Sidecar sidecar(clock_, load(kRulesV1));
  const Result<SnapshotRestore> restored = restore(sidecar);
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.error().message,
            options_.path +
                ": offset 0: not a Sluice memory snapshot (bad magic) "
                "(--memory-snapshot-on-error start-empty starts without it)");
}

TEST_F(MemorySnapshotTest, ATruncatedFileIsRefusedOrSkippedWithStartEmpty) {
  Sidecar before(clock_, load(kRulesV1));
  before.decide("user", "alice");
  before.decide("log", "alice");
  ASSERT_TRUE(snapshot(before).ok());
  const std::string whole = fileBytes();
  for (std::size_t cut : {std::size_t{5}, std::size_t{30}, whole.size() / 2, whole.size() - 1}) {
    writeBytes(whole.substr(0, cut));
    Sidecar after(clock_, load(kRulesV1));
    const Result<SnapshotRestore> refused = restore(after);
    ASSERT_FALSE(refused.ok()) << cut;
    EXPECT_EQ(refused.error().message.rfind(options_.path + ": offset ", 0), 0u)
        << refused.error().message;
    EXPECT_NE(refused.error().message.find("truncated"), std::string::npos)
        << refused.error().message;
    options_.on_error = SnapshotOnError::kStartEmpty;
    const Result<SnapshotRestore> empty = restore(after);
    ASSERT_TRUE(empty.ok());
    EXPECT_TRUE(empty->started_empty);
    EXPECT_EQ(empty->restored, 0u);
    EXPECT_EQ(after.decide("user", "alice").remaining, 4);
    options_.on_error = SnapshotOnError::kFail;
  }
}

TEST_F(MemorySnapshotTest, AFlippedByteIsAChecksumMismatch) {
  Sidecar before(clock_, load(kRulesV1));
  before.decide("user", "alice");
  ASSERT_TRUE(snapshot(before).ok());
  std::string bytes = fileBytes();
  bytes[28 + 12 + 6] ^= 0x20;  // inside the first block's payload
  writeBytes(bytes);
  Sidecar after(clock_, load(kRulesV1));
  const Result<SnapshotRestore> refused = restore(after);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find(": offset 28: checksum mismatch in the block"),
            std::string::npos)
      << refused.error().message;
}

// Checksums prove a file is the one written, not that Sluice wrote it: a forged file with
// good checksums and states no algorithm writes restores only the plausible buckets.
TEST_F(MemorySnapshotTest, AForgedStateIsDroppedNotRestored) {
  Sidecar before(clock_, load(kRulesV1));
  before.decide("user", "alice", 2);
  before.decide("log", "alice", 1);
  ASSERT_TRUE(snapshot(before).ok());
  auto contents = memory_detail::parseSnapshot(fileBytes());
  ASSERT_TRUE(contents.ok());
  ASSERT_EQ(contents->records.size(), 2u);
  std::string payload;
  for (const auto& record : contents->records) {
    const bool log = record.key.ends_with(";swl");
    std::vector<LogEntry> entries = record.state.log;
    if (log) {
      std::reverse(entries.begin(), entries.end());  // newest first: never written
      entries.push_back(LogEntry{clock_.nowMicros(), -3});
    }
    const std::int64_t count = log ? record.state.b : -1'000;  // a negative count
    memory_detail::appendSnapshotRecord(payload, record.key, record.rule, record.state.a, count,
                                        record.state.c, record.expires_at, &entries);
  }
  std::string file;
  memory_detail::appendSnapshotHeader(file, contents->written_at);
  memory_detail::appendBlockHeader(file, payload, 2);
  file += payload;
  memory_detail::appendSnapshotEnd(file, 2);
  writeBytes(file);

  Sidecar after(clock_, load(kRulesV1));
  const Result<SnapshotRestore> restored = restore(after);
  ASSERT_TRUE(restored.ok()) << restored.error().message;
  EXPECT_EQ(restored->restored, 0u);
  EXPECT_EQ(restored->invalid, 2u);
  EXPECT_EQ(after.decide("user", "alice").remaining, 4);  // fresh, not 1,005
  EXPECT_EQ(after.decide("log", "alice").remaining, 3);
}

TEST_F(MemorySnapshotTest, AFailedWriteKeepsThePreviousSnapshotAndCounts) {
  Sidecar sidecar(clock_, load(kRulesV1));
  sidecar.decide("user", "alice");
  ASSERT_TRUE(snapshot(sidecar).ok());
  const std::string previous = fileBytes();
  // A directory where the temporary file would go: the write fails before the rename.
  std::filesystem::create_directory(options_.path + ".tmp");
  sidecar.decide("user", "alice");
  const Status failed = snapshot(sidecar);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().message.find(options_.path + ".tmp: cannot create"), std::string::npos)
      << failed.error().message;
  EXPECT_EQ(fileBytes(), previous);
  EXPECT_EQ(sidecar.metrics.counter("memory_snapshots_total", {{"result", "failed"}}).value(), 1u);
}

}  // namespace
}  // namespace sluice
