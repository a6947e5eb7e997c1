// Counters across restarts (--memory-snapshot; docs/operations.md, "Counters across
// restarts") with the real binary: SIGTERM then a restart keeps every counter exact, a
// SIGKILL loses at most what came after the last periodic snapshot, and a damaged file is
// refused with its name and offset, or set aside with --memory-snapshot-on-error start-empty.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/http_client.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kRules = R"(domain: snap
descriptors:
  - key: fixed
    rate_limit: {unit: hour, requests_per_unit: 1000}
  - key: log
    rate_limit: {unit: hour, requests_per_unit: 1000, algorithm: sliding_window_log}
  - key: quota
    rate_limit:
      unit: month
      requests_per_unit: 1000
      calendar: {time_zone: Europe/Paris}
)";

class MemorySnapshotProcessTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = makeTempDir("sluice-snapshot"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path() const { return dir_ + "/counters.snap"; }

  SluiceOptions options(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args{"--threads", "2", "--memory-snapshot", path()};
    args.insert(args.end(), extra.begin(), extra.end());
    return withRules({{"snap.yaml", kRules}}, args);
  }

  static std::string body(const std::string& client, const std::string& key, int hits) {
    return R"({"domain":"snap","clientId":")" + client + R"(","descriptors":[[{"key":")" + key +
           R"(","value":"v"}]],"hits":)" + std::to_string(hits) + "}";
  }

  /// What `client` has left on `key` (a check: hits 0 consumes nothing).
  static std::int64_t remaining(SluiceProcess& sluice, const std::string& client,
                                const std::string& key) {
    const HttpResponse r = sluice.client().post("/shouldAllowRequest", body(client, key, 0));
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["descriptors"][0]["limits"][0]["remaining"].get<std::int64_t>();
  }

  static std::uint64_t snapshotsWritten(SluiceProcess& sluice) {
    const std::string metrics = sluice.client().get("/metrics").body;
    const std::string series = "sluice_memory_snapshots_total{result=\"written\"} ";
    const std::size_t at = metrics.find(series);
    return at == std::string::npos ? 0 : std::stoull(metrics.substr(at + series.size()));
  }

  static void stopWith(SluiceProcess& sluice, int signal_number) {
    sluice.signal(signal_number);
    ASSERT_TRUE(sluice.wait(10s).has_value()) << sluice.log();
  }

  std::string dir_;
};

TEST_F(MemorySnapshotProcessTest, SigtermThenRestartKeepsEveryCounterExact) {
  awayFromWindowBoundary(std::chrono::hours(1), 30s);
  std::map<std::pair<std::string, std::string>, std::int64_t> used;
  {
    SluiceProcess sluice(options());
    HttpClient client = sluice.client();
    for (int c = 0; c < 40; ++c) {
      const std::string id = "client-" + std::to_string(c);
      for (const char* key : {"fixed", "log", "quota"}) {
        const int hits = 1 + (c * 7 + static_cast<int>(key[0])) % 13;
        ASSERT_EQ(client.post("/shouldAllowRequest", body(id, key, hits)).status, 200);
        used[{id, key}] = hits;
      }
    }
    stopWith(sluice, SIGTERM);
    EXPECT_NE(sluice.log().find("memory snapshot written at shutdown"), std::string::npos)
        << sluice.log();
  }
  SluiceProcess restarted(options());
  EXPECT_NE(restarted.log().find("120 buckets restored"), std::string::npos) << restarted.log();
  for (const auto& [where, hits] : used) {
    EXPECT_EQ(remaining(restarted, where.first, where.second), 1000 - hits)
        << where.first << " " << where.second;
  }
}

TEST_F(MemorySnapshotProcessTest, SigkillLosesAtMostTheLastInterval) {
  awayFromWindowBoundary(std::chrono::hours(1), 30s);
  SluiceOptions opts = options({"--snapshot-interval", "300ms"});
  {
    SluiceProcess sluice(opts);
    HttpClient client = sluice.client();
    ASSERT_EQ(client.post("/shouldAllowRequest", body("k", "fixed", 10)).status, 200);
    // A periodic snapshot taken after those 10: wait for the next one to be written.
    const std::uint64_t before = snapshotsWritten(sluice);
    ASSERT_TRUE(waitFor([&] { return snapshotsWritten(sluice) >= before + 2; }, 10s));
    ASSERT_EQ(client.post("/shouldAllowRequest", body("k", "fixed", 5)).status, 200);
    stopWith(sluice, SIGKILL);
  }
  SluiceProcess restarted(opts);
  const std::int64_t used = 1000 - remaining(restarted, "k", "fixed");
  EXPECT_GE(used, 10);  // what the last snapshot held
  EXPECT_LE(used, 15);  // never more than was charged
}

TEST_F(MemorySnapshotProcessTest, ATruncatedFileIsRefusedOrSetAsideWithStartEmpty) {
  {
    SluiceProcess sluice(options());
    ASSERT_EQ(sluice.client().post("/shouldAllowRequest", body("t", "fixed", 3)).status, 200);
    stopWith(sluice, SIGTERM);
  }
  std::string bytes;
  {
    std::ifstream in(path(), std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_GT(bytes.size(), 40u);
  std::ofstream(path(), std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() - 7);

  const std::string rules_dir = dir_ + "/rules";
  std::filesystem::create_directories(rules_dir);
  std::ofstream(rules_dir + "/snap.yaml") << kRules;
  auto [code, output] =
      runSluice({"--rules", rules_dir, "--listen", "127.0.0.1:0", "--memory-snapshot", path()});
  EXPECT_EQ(code, 1) << output;
  EXPECT_NE(output.find(path() + ": offset "), std::string::npos) << output;
  EXPECT_NE(output.find("truncated"), std::string::npos) << output;

  SluiceOptions empty = options({"--memory-snapshot-on-error", "start-empty"});
  SluiceProcess sluice(empty);
  EXPECT_EQ(remaining(sluice, "t", "fixed"), 1000);
  EXPECT_TRUE(std::filesystem::exists(path() + ".unreadable"));
  EXPECT_NE(sluice.log().find("starting empty"), std::string::npos) << sluice.log();
}

TEST_F(MemorySnapshotProcessTest, TheEnvironmentVariablesSetIt) {
  SluiceOptions opts = withRules({{"snap.yaml", kRules}}, {"--threads", "1"});
  opts.env = {{"SLUICE_MEMORY_SNAPSHOT", path()}, {"SLUICE_SNAPSHOT_INTERVAL", "200ms"}};
  SluiceProcess sluice(opts);
  ASSERT_EQ(sluice.client().post("/shouldAllowRequest", body("e", "log", 2)).status, 200);
  ASSERT_TRUE(waitFor([&] { return std::filesystem::exists(path()); }, 10s));
}

}  // namespace
}  // namespace sluice::test
