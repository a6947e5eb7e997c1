// The eventual engine's flags as a user gives them (docs/eventual.md's table).
#include <gtest/gtest.h>

#include <map>

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
