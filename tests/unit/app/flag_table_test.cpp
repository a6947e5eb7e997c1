#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "app/options.hpp"
#include "sluice/common/flag_registry.hpp"

namespace sluice::app {
namespace {

EnvLookup envFrom(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(FlagTableTest, EveryFlagHasHelpAndIsListedInTheHelpText) {
  AppOptions options;
  FlagRegistry registry;
  addAppFlags(registry, options);
  const std::string help = helpText();
  ASSERT_GE(registry.flags().size(), 45u);
  for (const Flag* flag : registry.flags()) {
    EXPECT_FALSE(flag->help.empty()) << flag->name;
    EXPECT_NE(help.find("  --" + std::string(flag->name) + " "), std::string::npos) << flag->name;
  }
}

TEST(FlagTableTest, EveryEnvoyVariableIsDeclaredByTheFlagItSets) {
  // Every mapping of envoy_environment.cpp, each variable set.
  const std::vector<std::map<std::string, std::string>> environments{
      {{"RUNTIME_ROOT", "/d"},
       {"RUNTIME_SUBDIRECTORY", "s"},
       {"RUNTIME_APPDIRECTORY", "a"},
       {"HOST", "0.0.0.0"},
       {"PORT", "9000"},
       {"GRPC_HOST", "0.0.0.0"},
       {"GRPC_PORT", "9001"},
       {"GRPC_MAX_CONNECTION_AGE", "1h"},
       {"GRPC_MAX_CONNECTION_AGE_GRACE", "1m"},
       {"REDIS_TYPE", "single"},
       {"REDIS_SOCKET_TYPE", "tcp"},
       {"REDIS_URL", "r:6379"},
       {"REDIS_AUTH", "pw"},
       {"REDIS_TIMEOUT", "1s"},
       {"CACHE_KEY_PREFIX", "p"},
       {"LOG_LEVEL", "debug"},
       {"LOG_FORMAT", "json"},
       {"LIMIT_RESPONSE_HEADERS_ENABLED", "false"},
       {"MERGE_DOMAIN_CONFIG", "true"},
       {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "true"}},
      {{"GRPC_UDS", "/run/rl.sock"}},
      {{"CONFIG_TYPE", "GRPC_XDS_SOTW"},
       {"CONFIG_GRPC_XDS_SERVER_URL", "cp:18001"},
       {"CONFIG_GRPC_XDS_NODE_ID", "n"},
       {"CONFIG_GRPC_XDS_NODE_METADATA", "a=b"},
       {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"},
       {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/c"},
       {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/k"},
       {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/ca"},
       {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "san"},
       {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "1s"},
       {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "2s"},
       {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.1"},
       {"XDS_CLIENT_BACKOFF_JITTER", "false"},
       {"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "8388608"},
       {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true"},
       {"USE_PROMETHEUS", "true"},
       {"PROMETHEUS_ADDR", ":19001"}},
  };
  AppOptions defaults;
  FlagRegistry registry;
  addAppFlags(registry, defaults);
  std::size_t checked = 0;
  for (const auto& vars : environments) {
    auto o = parseOptions({}, envFrom(vars));
    ASSERT_TRUE(o.ok()) << o.error().message;
    // "A=1 + B=2 -> --flag value": each of A, B is declared by --flag.
    for (const std::string& line : o->envoy_environment.mapped) {
      const auto arrow = line.find(" -> --");
      ASSERT_NE(arrow, std::string::npos) << line;
      const std::string rest = line.substr(arrow + 6);
      const Flag* flag = registry.find(rest.substr(0, rest.find(' ')));
      ASSERT_NE(flag, nullptr) << line;
      const std::string sources = line.substr(0, arrow);
      for (std::string_view source : splitList(sources, '+')) {
        const std::string name(trimSpaces(source.substr(0, source.find('='))));
        EXPECT_NE(flag->envoy_variables.find(name), std::string_view::npos)
            << "--" << flag->name << " does not declare " << name;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 20u);
}

std::string configError(const std::string& yaml) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("sluice-flag-table-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << yaml;
  auto o = parseOptions({"--config", path.string()}, envFrom({}));
  std::filesystem::remove(path);
  return o.ok() ? std::string() : o.error().message.substr(path.string().size());
}

TEST(FlagTableTest, TheServerYamlIsReadStrictlyWithLocations) {
  EXPECT_EQ(configError("listen: \"127.0.0.1:1\n"),
            ":1:9: YAML syntax error: unterminated quoted scalar (the \" opened here is never "
            "closed)");
  EXPECT_EQ(configError("threads: 2\n\tlisten: x\n"),
            ":2:1: YAML syntax error: a tab in the indentation (indent with spaces)");
  EXPECT_EQ(configError("threads: 2\n---\nthreads: 3\n"),
            ":2:1: only one YAML document per server config file");
  EXPECT_EQ(configError("threads: 2\nthreads: 3\n"),
            ":2:1: duplicate key 'threads' (first given at line 1)");
  EXPECT_EQ(configError("listen: [a]\n"), ":1:9: listen: must be a string, not a list");
  EXPECT_EQ(configError("max_body_bytes: 0\n"),
            ":1:17: max_body_bytes: must be an integer from 1 to 67108864, got \"0\"");
}

}  // namespace
}  // namespace sluice::app
