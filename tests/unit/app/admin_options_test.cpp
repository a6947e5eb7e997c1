#include <gtest/gtest.h>

#include <map>

#include "app/operations_options.hpp"
#include "app/options.hpp"

namespace sluice::app {
namespace {

Result<AppOptions> parse(std::vector<std::string> args,
                         std::map<std::string, std::string> env = {}) {
  return parseOptions(args, [env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
  });
}

TEST(AdminOptionsTest, OperatorsFeaturesAreOffByDefault) {
  auto options = parse({});
  ASSERT_TRUE(options);
  const OperationsOptions& o = options->operations;
  EXPECT_EQ(o.log_format, LogFormat::kPlain);
  EXPECT_TRUE(o.access_log.empty());
  EXPECT_FALSE(o.events);
  EXPECT_FALSE(o.admin);
  EXPECT_EQ(o.events_stream, "sluice:denials");
  EXPECT_EQ(o.events_maxlen, 100'000u);
}

TEST(AdminOptionsTest, ParsesEveryFlag) {
  auto options = parse({"--log-format", "json", "--access-log", "-", "--events", "redis-stream",
                        "--events-redis", "redis://10.0.0.1:6380/2", "--events-stream", "s",
                        "--events-maxlen", "500", "--admin-listen", "0.0.0.0:9191"});
  ASSERT_TRUE(options) << options.error().message;
  const OperationsOptions& o = options->operations;
  EXPECT_EQ(o.log_format, LogFormat::kJson);
  EXPECT_EQ(o.access_log, "-");
  EXPECT_TRUE(o.events);
  EXPECT_EQ(o.events_redis, "redis://10.0.0.1:6380/2");
  EXPECT_EQ(o.events_stream, "s");
  EXPECT_EQ(o.events_maxlen, 500u);
  EXPECT_TRUE(o.admin);
  EXPECT_EQ(o.admin_host, "0.0.0.0");
  EXPECT_EQ(o.admin_port, 9191);
}

TEST(AdminOptionsTest, ABarePortStaysOnLoopback) {
  auto options = parse({"--admin-listen", "9090"});
  ASSERT_TRUE(options);
  EXPECT_TRUE(options->operations.admin);
  EXPECT_EQ(options->operations.admin_host, "127.0.0.1");
  EXPECT_EQ(options->operations.admin_port, 9090);
}

TEST(AdminOptionsTest, EnvironmentVariablesMirrorTheFlags) {
  auto options = parse({}, {{"SLUICE_ADMIN_LISTEN", "127.0.0.1:7000"},
                            {"SLUICE_LOG_FORMAT", "json"},
                            {"SLUICE_EVENTS", "redis-stream"}});
  ASSERT_TRUE(options) << options.error().message;
  EXPECT_EQ(options->operations.admin_port, 7000);
  EXPECT_EQ(options->operations.log_format, LogFormat::kJson);
  EXPECT_TRUE(options->operations.events);
}

TEST(AdminOptionsTest, BadValuesNameTheFlag) {
  for (const auto& args : std::vector<std::vector<std::string>>{{"--log-format", "xml"},
                                                                {"--events", "kafka"},
                                                                {"--events-maxlen", "0"},
                                                                {"--events-maxlen", "ten"},
                                                                {"--admin-listen", "host:notaport"},
                                                                {"--events-stream", ""}}) {
    auto options = parse(args);
    ASSERT_FALSE(options) << args[0];
    EXPECT_NE(options.error().message.find(args[0]), std::string::npos) << options.error().message;
  }
}

TEST(AdminOptionsTest, OffTurnsAFeatureOffAgain) {
  OperationsOptions o;
  ASSERT_TRUE(applyOperationsOption(o, "admin-listen", "9000"));
  ASSERT_TRUE(applyOperationsOption(o, "admin-listen", "off"));
  EXPECT_FALSE(o.admin);
  ASSERT_TRUE(applyOperationsOption(o, "access-log", "/tmp/a.log"));
  ASSERT_TRUE(applyOperationsOption(o, "access-log", "off"));
  EXPECT_TRUE(o.access_log.empty());
}

TEST(AdminOptionsTest, TopDenialsWindowAndCapacity) {
  auto defaults = parse({});
  ASSERT_TRUE(defaults);
  EXPECT_EQ(defaults->operations.top_window_ms, 60'000);
  EXPECT_EQ(defaults->operations.top_capacity, 100u);
  auto options = parse({"--top-window-ms", "5000"}, {{"SLUICE_TOP_CAPACITY", "32"}});
  ASSERT_TRUE(options) << options.error().message;
  EXPECT_EQ(options->operations.top_window_ms, 5000);
  EXPECT_EQ(options->operations.top_capacity, 32u);
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--top-window-ms", "999"},
                                                        {"--top-window-ms", "86400001"},
                                                        {"--top-capacity", "0"},
                                                        {"--top-capacity", "10001"},
                                                        {"--top-capacity", "x"}}) {
    auto bad = parse({flag, value});
    ASSERT_FALSE(bad) << flag << " " << value;
    EXPECT_NE(bad.error().message.find(flag), std::string::npos) << bad.error().message;
  }
}

// The eventual engine's flags as a user gives them (docs/eventual.md's table).
TEST(EventualOptionsTest, QuietKeysAreOnByDefaultAndTurnedOffByFlagOrEnvironment) {
  auto defaults = parse({});
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_TRUE(defaults->eventual_quiet_keys);

  auto flag = parse({"--eventual-quiet-keys", "false"});
  ASSERT_TRUE(flag) << flag.error().message;
  EXPECT_FALSE(flag->eventual_quiet_keys);

  auto env = parse({}, {{"SLUICE_EVENTUAL_QUIET_KEYS", "false"}});
  ASSERT_TRUE(env) << env.error().message;
  EXPECT_FALSE(env->eventual_quiet_keys);

  auto bad = parse({"--eventual-quiet-keys", "sometimes"});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("--eventual-quiet-keys"), std::string::npos)
      << bad.error().message;
}

}  // namespace
}  // namespace sluice::app
