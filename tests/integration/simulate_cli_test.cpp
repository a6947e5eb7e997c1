// `sluice simulate` as a user runs it: each exit status, the report's first line, malformed
// lines with their line numbers, the validator's message for bad rules, gzip logs.
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

constexpr const char* kOld = R"(domain: auth
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 5}
)";
constexpr const char* kNew = R"(domain: auth
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 2}
)";

std::string line(int second, const std::string& user) {
  return R"({"time":"2026-11-26T03:50:)" + std::string(second < 10 ? "0" : "") +
         std::to_string(second) +
         R"(.000001Z","domain":"auth","client":"","descriptors":[{"user":")" + user +
         R"("}],"hits":1})";
}

class SimulateCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = makeTempDir("sluice-simulate");
    write("old.yaml", kOld);
    write("new.yaml", kNew);
    // mallory: 4 requests in one minute (2 newly denied); 9 others: one request each.
    std::string log;
    for (int i = 0; i < 4; ++i) {
      log += line(i, "mallory") + "\n";
    }
    for (int i = 0; i < 9; ++i) {
      log += line(10 + i, "user" + std::to_string(i)) + "\n";
    }
    write("access.log", log);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name)) << text;
  }
  std::pair<int, std::string> simulate(std::vector<std::string> args) const {
    args.insert(args.begin(), "simulate");
    return runSluice(args);
  }
  std::vector<std::string> base() const {
    return {"--rules",        path("new.yaml"), "--baseline",
            path("old.yaml"), "--log",          path("access.log")};
  }

  std::string dir_;
};

TEST_F(SimulateCliTest, ReportsTheSummaryFirstAndPassesWithoutAGate) {
  auto [status, output] = simulate(base());
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output.rfind("simulate: 13 requests", 0), 0u) << output;
  EXPECT_NE(output.find("newly denied 2 (15.38 %) of requests, 1 of 10 clients (10.00 %)"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("rule per_user (domain auth)"), std::string::npos) << output;
  EXPECT_NE(output.find("user=mallory: denied 0 -> 2 of 4 requests; peak 4 per minute vs limit 2"),
            std::string::npos)
      << output;
}

TEST_F(SimulateCliTest, JsonReportForMachines) {
  auto args = base();
  args.push_back("--json");
  auto [status, output] = simulate(args);
  ASSERT_EQ(status, 0) << output;
  auto report = nlohmann::json::parse(output);
  EXPECT_EQ(report["summary"]["newly_denied"], 2);
  EXPECT_EQ(report["rules"][0]["rule"], "per_user");
  EXPECT_EQ(report["rules"][0]["most_affected"][0]["client"], "user=mallory");
  EXPECT_EQ(report["rules"][0]["most_affected"][0]["peak"], 4);
}

TEST_F(SimulateCliTest, FailsTheRequestsGateWithStatus3) {
  auto args = base();
  args.insert(args.end(), {"--fail-if-newly-denied", "10"});
  auto [status, output] = simulate(args);
  EXPECT_EQ(status, 3) << output;
  EXPECT_NE(output.find("15.38 % of the requests would newly be denied (more than 10 %)"),
            std::string::npos)
      << output;
  args = base();
  args.insert(args.end(), {"--fail-if-newly-denied", "20"});
  EXPECT_EQ(simulate(args).first, 0);
}

TEST_F(SimulateCliTest, FailsTheClientsGateWithStatus4) {
  auto args = base();
  args.insert(args.end(), {"--fail-if-newly-denied-clients", "5"});
  auto [status, output] = simulate(args);
  EXPECT_EQ(status, 4) << output;
  EXPECT_NE(output.find("10.00 % of the clients would newly be denied"), std::string::npos)
      << output;
}

TEST_F(SimulateCliTest, CountsMalformedLinesWithTheirNumbersOrStopsUnderStrict) {
  std::ofstream(path("access.log"), std::ios::app) << "not json\n"
                                                   << R"({"domain":"auth"})"
                                                   << "\n";
  auto [status, output] = simulate(base());
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("malformed lines: 2 (skipped)"), std::string::npos) << output;
  EXPECT_NE(output.find(path("access.log") + ":14: column 1: not a JSON object"), std::string::npos)
      << output;
  EXPECT_NE(output.find(path("access.log") + ":15: column 1: no \"time\""), std::string::npos)
      << output;
  auto args = base();
  args.push_back("--strict");
  auto [strict_status, strict_output] = simulate(args);
  EXPECT_EQ(strict_status, 2) << strict_output;
  EXPECT_NE(strict_output.find("malformed line: " + path("access.log") + ":14:"), std::string::npos)
      << strict_output;
}

TEST_F(SimulateCliTest, ARulesErrorIsTheValidatorsMessageWithStatus1) {
  write("bad.yaml",
        "domain: auth\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, "
        "requests_per_unit: 1}\n");
  auto [status, output] = simulate({"--rules", path("bad.yaml"), "--log", path("access.log")});
  EXPECT_EQ(status, 1) << output;
  auto [validate_status, validate_output] = runSluice({"--validate", "--rules", path("bad.yaml")});
  EXPECT_EQ(validate_status, 1);
  // The same first line as --validate prints.
  EXPECT_EQ(output.substr(0, output.find('\n')),
            validate_output.substr(0, validate_output.find('\n')));
}

TEST_F(SimulateCliTest, AnEmptyLogSaysSoWithStatus5) {
  write("empty.log", "");
  auto [status, output] = simulate({"--rules", path("new.yaml"), "--log", path("empty.log")});
  EXPECT_EQ(status, 5) << output;
  EXPECT_NE(output.find("the log has no request to replay"), std::string::npos) << output;
}

TEST_F(SimulateCliTest, BadArgumentsAndMissingLogsAreStatus1) {
  EXPECT_EQ(simulate({"--log", path("access.log")}).first, 1);
  EXPECT_EQ(simulate({"--rules", path("new.yaml"), "--log", path("missing.log")}).first, 1);
  auto [status, output] = simulate(
      {"--rules", path("new.yaml"), "--log", path("access.log"), "--fail-if-newly-denied", "200"});
  EXPECT_EQ(status, 1);
  EXPECT_NE(output.find("must be a percentage from 0 to 100"), std::string::npos) << output;
}

TEST_F(SimulateCliTest, ReadsAGzipLog) {
  std::ifstream in(path("access.log"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gzFile file = gzopen(path("access.log.gz").c_str(), "wb");
  ASSERT_NE(file, nullptr);
  gzwrite(file, text.data(), static_cast<unsigned>(text.size()));
  gzclose(file);
  auto [status, output] = simulate({"--rules", path("new.yaml"), "--baseline", path("old.yaml"),
                                    "--log", path("access.log.gz")});
  EXPECT_EQ(status, 0) << output;
  EXPECT_EQ(output.rfind("simulate: 13 requests", 0), 0u) << output;
}

}  // namespace
}  // namespace sluice::test
