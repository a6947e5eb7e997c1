// The benchmark harness in its smoke mode (bench/README.md): `bench/run.sh --smoke` starts every
// installed peer and both Sluice stores for a second or two each, so that bench/ cannot rot.
// Peers that are not installed are skipped by the harness; Sluice not answering fails it.
// It takes about 35 s, more than the 20 s the suite allows a test without a reason: every
// installed system (up to six: nginx, HAProxy, Node, redis-benchmark's ceiling, Sluice on
// memory and on Redis) is started, warmed up and loaded in turn, and only the whole harness
// proves that bench/run.sh still works; a shorter run would leave a system out.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

namespace sluice::test {
namespace {

constexpr int kExitSkipped = 77;  // bench.py: no load generator (wrk) on this machine

struct RunResult {
  int exit_code = -1;
  std::string output;
};

RunResult runCommand(const std::string& command) {
  RunResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return result;
  }
  std::array<char, 4096> buffer{};
  while (std::fgets(buffer.data(), buffer.size(), pipe) != nullptr) {
    result.output += buffer.data();
  }
  int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

TEST(BenchSmokeTest, HarnessDrivesEveryInstalledSystemAndSluiceAnswers) {
  namespace fs = std::filesystem;
  const fs::path out =
      fs::temp_directory_path() / ("sluice-bench-smoke-" + std::to_string(::getpid()));
  fs::remove_all(out);
  // `timeout` ends a hung harness with SIGTERM, on which bench.py stops what it started.
  std::string command =
      "timeout -s TERM 150 " SLUICE_SOURCE_DIR "/bench/run.sh --smoke --no-install";
  command += " --sluice " SLUICE_BINARY " --out " + out.string() + " 2>&1";
  RunResult run = runCommand(command);
  std::cout << run.output;
  if (run.exit_code == kExitSkipped) {
    fs::remove_all(out);
    GTEST_SKIP() << "wrk is not installed (scripts/deps.sh bench): Sluice answered, no load ran";
  }
  ASSERT_EQ(run.exit_code, 0) << run.output;

  std::ifstream in(out / "latest.json");
  ASSERT_TRUE(in.good()) << "no latest.json in " << out;
  const auto doc = nlohmann::json::parse(in);
  const auto& point = doc.at("throughput").at("10k_allow");
  for (const char* store : {"sluice-memory", "sluice-redis"}) {
    if (doc.at("skipped").contains(store)) {
      continue;  // redis-server not installed: the harness said so
    }
    ASSERT_TRUE(point.contains(store)) << store << " has no result";
    EXPECT_GT(point.at(store).at("summary").at("rps").at("median").get<double>(), 0.0) << store;
  }
  EXPECT_TRUE(fs::exists(out / "latest.md"));
  fs::remove_all(out);
}

}  // namespace
}  // namespace sluice::test
