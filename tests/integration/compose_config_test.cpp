// Validates docker-compose.yml offline with `docker-compose config` (no engine needed):
// the file parses, every service's keys are valid for the Compose specification, and the
// optional Envoy and Traefik profiles resolve too. Skipped when docker-compose is absent.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;  ///< stdout and stderr
};

CommandResult runShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    return result;
  }
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

bool haveDockerCompose() { return runShell("command -v docker-compose").exit_code == 0; }

std::string inSourceDir(const std::string& command) {
  return std::string("cd '") + SLUICE_SOURCE_DIR + "' && " + command;
}

TEST(ComposeConfigTest, DefaultStackIsValid) {
  if (!haveDockerCompose()) {
    GTEST_SKIP() << "docker-compose is not installed (scripts/deps.sh test installs it)";
  }
  CommandResult result = runShell(inSourceDir("docker-compose -f docker-compose.yml config"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* service : {"redis:", "sluice:", "nginx:", "upstream:"}) {
    EXPECT_NE(result.output.find(service), std::string::npos) << service << "\n" << result.output;
  }
  // Sluice waits for a healthy Redis and uses it.
  EXPECT_NE(result.output.find("condition: service_healthy"), std::string::npos);
  EXPECT_NE(result.output.find("SLUICE_STORE: redis"), std::string::npos) << result.output;
  // The optional gateways sit behind profiles, out of a plain `docker compose up`.
  EXPECT_NE(result.output.find("profiles:"), std::string::npos) << result.output;
}

TEST(ComposeConfigTest, EnvoyAndTraefikProfilesAreValid) {
  if (!haveDockerCompose()) {
    GTEST_SKIP() << "docker-compose is not installed (scripts/deps.sh test installs it)";
  }
  CommandResult result = runShell(
      inSourceDir("docker-compose -f docker-compose.yml --profile envoy --profile traefik config"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* service : {"envoy:", "traefik:", "sluice-edge:"}) {
    EXPECT_NE(result.output.find(service), std::string::npos) << service << "\n" << result.output;
  }
}

// Envoy itself cannot run here: what can be checked offline is that its config parses, uses
// the rate-limit filter over gRPC (not ext_authz), and points at the port the sidecar's
// gRPC listener is given in the compose file, over HTTP/2.
// The image serves Envoy's gRPC Rate Limit Service on envoyproxy/ratelimit's port.
TEST(ComposeConfigTest, ImageExposesAndListensOnTheGrpcPort) {
  std::ifstream file(std::string(SLUICE_SOURCE_DIR) + "/Dockerfile");
  ASSERT_TRUE(file) << "no Dockerfile";
  std::stringstream text;
  text << file.rdbuf();
  std::istringstream lines(text.str());
  std::string line;
  bool exposed = false;
  while (std::getline(lines, line)) {
    if (line.starts_with("EXPOSE ")) {
      exposed = exposed || (" " + line + " ").find(" 8081 ") != std::string::npos;
    }
  }
  EXPECT_TRUE(exposed) << "no EXPOSE ... 8081 in the Dockerfile";
  EXPECT_NE(text.str().find("SLUICE_GRPC_LISTEN=0.0.0.0:8081"), std::string::npos);
}

TEST(ComposeConfigTest, EnvoyProfileUsesTheRateLimitFilterOverGrpc) {
  YAML::Node envoy = YAML::LoadFile(std::string(SLUICE_SOURCE_DIR) + "/docker/envoy/envoy.yaml");
  const YAML::Node manager =
      envoy["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"];
  const YAML::Node filter = manager["http_filters"][0];
  EXPECT_EQ(filter["name"].as<std::string>(), "envoy.filters.http.ratelimit");
  EXPECT_EQ(filter["typed_config"]["rate_limit_service"]["transport_api_version"].as<std::string>(),
            "V3");
  EXPECT_EQ(filter["typed_config"]["domain"].as<std::string>(), "api");
  const std::string cluster =
      filter["typed_config"]["rate_limit_service"]["grpc_service"]["envoy_grpc"]["cluster_name"]
          .as<std::string>();
  bool found = false;
  for (const auto& c : envoy["static_resources"]["clusters"]) {
    if (c["name"].as<std::string>() != cluster) {
      continue;
    }
    found = true;
    EXPECT_TRUE(c["typed_extension_protocol_options"].IsDefined()) << "gRPC needs HTTP/2";
    const YAML::Node address = c["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
                                ["address"]["socket_address"];
    EXPECT_EQ(address["address"].as<std::string>(), "sluice-edge");
    EXPECT_EQ(address["port_value"].as<int>(), 8081);
  }
  EXPECT_TRUE(found) << "no cluster " << cluster;
  if (!haveDockerCompose()) {
    GTEST_SKIP() << "docker-compose is not installed (scripts/deps.sh test installs it)";
  }
  CommandResult result =
      runShell(inSourceDir("docker-compose -f docker-compose.yml --profile envoy config"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("SLUICE_GRPC_LISTEN: 0.0.0.0:8081"), std::string::npos)
      << result.output;
}

TEST(ComposeConfigTest, EveryMountedFileExists) {
  if (!haveDockerCompose()) {
    GTEST_SKIP() << "docker-compose is not installed (scripts/deps.sh test installs it)";
  }
  // `config` does not check bind-mount sources; a missing one would only fail at `up`.
  CommandResult result =
      runShell(inSourceDir("docker-compose -f docker-compose.yml --profile envoy --profile traefik "
                           "--profile observability config | "
                           "sed -n 's/^ *- \\(\\/[^:]*\\):.*/\\1/p' | sort -u"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  ASSERT_FALSE(result.output.empty()) << "no bind mounts found";
  std::size_t start = 0;
  int checked = 0;
  while (start < result.output.size()) {
    std::size_t end = result.output.find('\n', start);
    std::string path = result.output.substr(start, end - start);
    start = end == std::string::npos ? result.output.size() : end + 1;
    if (path.empty()) {
      continue;
    }
    EXPECT_EQ(runShell("test -e '" + path + "'").exit_code, 0) << "missing mount source " << path;
    ++checked;
  }
  EXPECT_GE(checked, 11);
}

TEST(ComposeConfigTest, ObservabilityProfileAddsPrometheusAndGrafana) {
  if (!haveDockerCompose()) {
    GTEST_SKIP() << "docker-compose is not installed (scripts/deps.sh test installs it)";
  }
  CommandResult result =
      runShell(inSourceDir("docker-compose -f docker-compose.yml --profile observability config"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  for (const char* needle :
       {"prometheus:", "grafana:", "/etc/prometheus/alerts.yml", "sluice.json", "9091",
        // Behind the profile, out of a plain `docker compose up`.
        "- observability"}) {
    EXPECT_NE(result.output.find(needle), std::string::npos) << needle << "\n" << result.output;
  }
}

TEST(ComposeConfigTest, SidecarsMayDrainLongerThanTheDrainTimeout) {
  if (!haveDockerCompose()) {
    GTEST_SKIP() << "docker-compose is not installed (scripts/deps.sh test installs it)";
  }
  // docs/deployment.md: the stop timeout must exceed --drain-timeout-ms (30 s by default).
  CommandResult result = runShell(
      inSourceDir("docker-compose -f docker-compose.yml --profile envoy config | "
                  "awk '/^  [a-z-]+:$/ {service=$1} /stop_grace_period/ {print service, $2}'"));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("sluice: 35s"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("sluice-edge: 35s"), std::string::npos) << result.output;
}

}  // namespace
