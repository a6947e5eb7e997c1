#include "sluice/common/flag_registry.hpp"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

namespace sluice {
namespace {

struct Settings {
  std::string name = "default";
  int count = 1;
  bool verbose = false;
  std::string list;
};

FlagRegistry registryFor(Settings& s) {
  namespace set = flag_setters;
  FlagRegistry registry;
  registry.section("First");
  registry.add({.name = "name", .metavar = "NAME", .help = "a name", .set = set::text(s.name)});
  registry.add({.name = "count",
                .metavar = "N",
                .help = "a count",
                .set = set::integer(s.count, 1, 9),
                .envoy_variables = "COUNT"});
  registry.section("Second");
  registry.add({.name = "verbose", .help = "talk", .set = set::toggle(s.verbose)});
  registry.add({.name = "list",
                .metavar = "ITEMS",
                .help = "repeatable",
                .set = set::text(s.list),
                .repeatable = true});
  registry.add({.name = "only-here",
                .metavar = "X",
                .help = "command line only",
                .set = set::text(s.name),
                .command_line_only = true});
  return registry;
}

EnvironmentLookup envFrom(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

TEST(FlagRegistryTest, CommandLineInBothSpellingsAndRepeated) {
  Settings s;
  FlagRegistry registry = registryFor(s);
  auto given = registry.parseCommandLine(
      {"--name", "x", "--count=3", "--verbose", "--list", "a", "--list=b"});
  ASSERT_TRUE(given.ok()) << given.error().message;
  ASSERT_TRUE(FlagRegistry::applyCommandLine(*given).ok());
  EXPECT_EQ(s.name, "x");
  EXPECT_EQ(s.count, 3);
  EXPECT_TRUE(s.verbose);
  EXPECT_EQ(s.list, "a,b");
}

TEST(FlagRegistryTest, CommandLineErrorsNameTheFlag) {
  Settings s;
  FlagRegistry registry = registryFor(s);
  EXPECT_EQ(registry.parseCommandLine({"--nope"}).error().message,
            "unknown flag --nope (see --help)");
  EXPECT_EQ(registry.parseCommandLine({"--name"}).error().message, "--name needs a value NAME");
  EXPECT_EQ(registry.parseCommandLine({"--verbose=1"}).error().message, "--verbose takes no value");
  EXPECT_EQ(registry.parseCommandLine({"x"}).error().message,
            "unexpected argument \"x\" (see --help)");
  auto given = registry.parseCommandLine({"--count", "10"});
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(FlagRegistry::applyCommandLine(*given).error().message,
            "--count: must be an integer from 1 to 9, got \"10\"");
}

TEST(FlagRegistryTest, EnvironmentVariablesMirrorFlagsButNotCommandLineOnlyOnes) {
  Settings s;
  FlagRegistry registry = registryFor(s);
  ASSERT_TRUE(
      registry
          .applyEnvironment(envFrom(
              {{"SLUICE_COUNT", "4"}, {"SLUICE_VERBOSE", "yes"}, {"SLUICE_ONLY_HERE", "ignored"}}))
          .ok());
  EXPECT_EQ(s.count, 4);
  EXPECT_TRUE(s.verbose);
  EXPECT_EQ(s.name, "default");
  EXPECT_EQ(registry.applyEnvironment(envFrom({{"SLUICE_COUNT", "x"}})).error().message,
            "SLUICE_COUNT: must be an integer from 1 to 9, got \"x\"");
  EXPECT_EQ(FlagRegistry::environmentName("max-body-bytes"), "SLUICE_MAX_BODY_BYTES");
}

TEST(FlagRegistryTest, ConfigKeysWithDashesOrUnderscores) {
  Settings s;
  FlagRegistry registry = registryFor(s);
  EXPECT_NE(registry.findConfigKey("count"), nullptr);
  EXPECT_EQ(registry.findConfigKey("only_here"), nullptr);
  EXPECT_EQ(registry.findConfigKey("nope"), nullptr);
}

TEST(FlagRegistryTest, AFlagAddedTwiceIsAProgrammingError) {
  Settings s;
  FlagRegistry registry = registryFor(s);
  EXPECT_THROW(registry.add({.name = "count", .set = flag_setters::text(s.name)}),
               std::logic_error);
}

TEST(FlagRegistryTest, HelpHasSectionsAlignedAndTheEnvoyVariables) {
  Settings s;
  FlagRegistry registry = registryFor(s);
  const std::string help = registry.helpText();
  EXPECT_NE(help.find("\nFirst:\n  --name NAME    a name\n"), std::string::npos) << help;
  EXPECT_NE(help.find("\nSecond:\n  --verbose      talk\n"), std::string::npos) << help;
  EXPECT_EQ(registry.envoyVariablesText(), "  --count <- COUNT\n");
}

}  // namespace
}  // namespace sluice
