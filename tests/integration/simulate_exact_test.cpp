// `sluice simulate` on a fixed log, its whole report pinned: a change to how the replay is
// done (its speed) must not change one number of what it reports. The log
// (tests/data/simulate/access.log.gz, written by make_log.py there) varies every input a
// replay has to keep exact; the expected reports were written by the replay before it was
// made faster.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

const std::string kData = std::string(SLUICE_SOURCE_DIR) + "/tests/data/simulate";

std::string readFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

/// The report of `sluice simulate ARGS`, with the data directory's path taken out of it (the
/// malformed lines are reported by file name), and its exit status.
std::pair<int, std::string> simulate(std::vector<std::string> args) {
  args.insert(args.begin(), "simulate");
  auto [status, output] = runSluice(args, std::chrono::seconds(60));
  const std::string dir = kData + "/";
  for (std::size_t at = output.find(dir); at != std::string::npos; at = output.find(dir, at)) {
    output.erase(at, dir.size());
  }
  return {status, output};
}

TEST(SimulateExactTest, TheReportAgainstABaselineIsExactlyTheSame) {
  auto [status, output] = simulate(
      {"--rules", kData + "/new", "--baseline", kData + "/old", "--log", kData + "/access.log.gz"});
  EXPECT_EQ(status, 0);
  EXPECT_EQ(output, readFile(kData + "/expected-baseline.txt"));
}

TEST(SimulateExactTest, TheJsonReportIsExactlyTheSame) {
  auto [status, output] = simulate({"--rules", kData + "/new", "--baseline", kData + "/old",
                                    "--log", kData + "/access.log.gz", "--json", "--top", "3"});
  EXPECT_EQ(status, 0);
  EXPECT_EQ(output, readFile(kData + "/expected-baseline.json"));
}

TEST(SimulateExactTest, TheReportWithoutABaselineIsExactlyTheSame) {
  auto [status, output] = simulate({"--rules", kData + "/new", "--log", kData + "/access.log.gz"});
  EXPECT_EQ(status, 0);
  EXPECT_EQ(output, readFile(kData + "/expected-new.txt"));
}

}  // namespace
}  // namespace sluice::test
