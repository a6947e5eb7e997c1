#include "app/options.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

namespace sluice::app {
namespace {

EnvLookup envFrom(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

Result<AppOptions> parse(std::vector<std::string> args,
                         std::map<std::string, std::string> env = {}) {
  return parseOptions(args, envFrom(std::move(env)));
}

std::string writeTemp(const std::string& text) {
  auto path = std::filesystem::temp_directory_path() /
              ("sluice-options-" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

TEST(OptionsTest, Defaults) {
  auto o = parse({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->listen.front().host, "127.0.0.1");
  EXPECT_EQ(o->listen.front().port, 8080);
  EXPECT_EQ(o->rules, "config/rules");
  EXPECT_EQ(o->store, StoreKind::kMemory);
  EXPECT_EQ(o->default_domain, "default");
  EXPECT_EQ(o->max_body_bytes, 1u << 20);
  EXPECT_FALSE(o->validate);
}

TEST(OptionsTest, RedisUrlsAreParsedOnceWithPrefixAndTimeout) {
  auto o = parse({"--store", "redis", "--redis", "redis://10.0.0.5:7000/2", "--redis-prefix", "rl",
                  "--redis-timeout-ms", "30"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->redis_nodes.size(), 1u);
  EXPECT_EQ(o->redis_nodes[0].host, "10.0.0.5");
  EXPECT_EQ(o->redis_nodes[0].port, 7000);
  EXPECT_EQ(o->redis_nodes[0].db, 2);
  EXPECT_EQ(o->redis_nodes[0].key_prefix, "rl");
  EXPECT_EQ(o->redis_nodes[0].request_timeout, std::chrono::milliseconds(30));
  EXPECT_EQ(o->redis_nodes[0].max_batch, 32u);  // the default

  auto batch = parse({"--store", "redis", "--redis-max-batch", "1"});
  ASSERT_TRUE(batch.ok()) << batch.error().message;
  EXPECT_EQ(batch->redis_nodes[0].max_batch, 1u);
  EXPECT_FALSE(parse({"--store", "redis", "--redis-max-batch", "0"}).ok());
  EXPECT_EQ(batch->redis_nodes[0].max_batches_in_flight, 1u);  // the default
  auto unbounded = parse({"--store", "redis", "--redis-batches-in-flight", "0"});
  ASSERT_TRUE(unbounded.ok()) << unbounded.error().message;
  EXPECT_EQ(unbounded->redis_nodes[0].max_batches_in_flight, 0u);
  EXPECT_FALSE(parse({"--store", "redis", "--redis-batches-in-flight", "-1"}).ok());

  auto cluster = parse({"--store", "redis_cluster", "--redis", "redis://a:1,redis://b:2"});
  ASSERT_TRUE(cluster.ok()) << cluster.error().message;
  EXPECT_EQ(cluster->store, StoreKind::kRedisCluster);
  ASSERT_EQ(cluster->redis_nodes.size(), 2u);
  EXPECT_EQ(cluster->redis_nodes[1].host, "b");

  EXPECT_TRUE(parse({})->redis_nodes.empty());
  auto bad = parse({"--store", "redis", "--redis", "http://x"});
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(bad.error().message.starts_with("--redis: ")) << bad.error().message;
}

TEST(OptionsTest, FlagsInBothSpellings) {
  auto o = parse({"--listen", "0.0.0.0:9000", "--threads=3", "--store", "redis", "--validate",
                  "--redis-timeout-ms", "50"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->listen.front().host, "0.0.0.0");
  EXPECT_EQ(o->listen.front().port, 9000);
  EXPECT_EQ(o->threads, 3u);
  EXPECT_EQ(o->store, StoreKind::kRedis);
  EXPECT_TRUE(o->validate);
  EXPECT_EQ(o->redis_timeout, std::chrono::milliseconds(50));
}

TEST(OptionsTest, Ipv6Listen) {
  auto o = parse({"--listen", "[::1]:8081"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->listen.front().host, "::1");
  EXPECT_EQ(o->listen.front().port, 8081);
}

TEST(OptionsTest, ListenTakesTcpAndUnixAddressesCommaSeparated) {
  auto o = parse({"--listen", "127.0.0.1:9000,unix:/run/sluice/s.sock", "--listen-mode", "600"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->listen.size(), 2u);
  EXPECT_EQ(o->listen[0], http::ListenAddress::tcp("127.0.0.1", 9000));
  EXPECT_EQ(o->listen[1], http::ListenAddress::unixSocket("/run/sluice/s.sock"));
  EXPECT_EQ(o->listen[1].toString(), "unix:/run/sluice/s.sock");
  EXPECT_EQ(o->listen_mode, 0600u);
}

TEST(OptionsTest, ListenOnAUnixSocketAloneFromTheEnvironment) {
  auto o = parse({}, {{"SLUICE_LISTEN", "unix:sluice.sock"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->listen.size(), 1u);
  EXPECT_EQ(o->listen[0].kind, http::ListenAddress::Kind::kUnix);
  EXPECT_EQ(o->listen[0].path, "sluice.sock");
  EXPECT_EQ(o->listen_mode, 0660u);
}

TEST(OptionsTest, BadListenListsAndModesNameTheFlag) {
  EXPECT_EQ(parse({"--listen", "unix:"}).error().message,
            "--listen: unix: needs a socket path, e.g. unix:/run/sluice/sluice.sock");
  EXPECT_EQ(parse({"--listen", "127.0.0.1:80,"}).error().message,
            "--listen: must be HOST:PORT, got \"\"");
  EXPECT_EQ(parse({"--listen", "unix:/a,unix:/a"}).error().message,
            "--listen: \"unix:/a\" is given twice");
  EXPECT_EQ(parse({"--listen-mode", "0886"}).error().message,
            "--listen-mode: must be octal permissions such as 0660 or 0600, got \"0886\"");
  EXPECT_EQ(parse({"--listen-mode", "1777"}).error().message,
            "--listen-mode: must be octal permissions such as 0660 or 0600, got \"1777\"");
}

TEST(OptionsTest, BadValuesNameTheFlag) {
  EXPECT_EQ(parse({"--store", "etcd"}).error().message,
            "--store: must be one of memory, redis, redis_cluster, got \"etcd\"");
  EXPECT_EQ(parse({"--threads", "0"}).error().message,
            "--threads: must be an integer from 1 to 1024, got \"0\"");
  EXPECT_EQ(parse({"--listen", "8080"}).error().message,
            "--listen: must be HOST:PORT, got \"8080\"");
  EXPECT_EQ(parse({"--listen", "h:99999"}).error().message,
            "--listen: port must be an integer from 0 to 65535, got \"99999\"");
  EXPECT_EQ(parse({"--bogus"}).error().message, "unknown flag --bogus (see --help)");
  EXPECT_EQ(parse({"--rules"}).error().message, "--rules needs a value PATH");
  EXPECT_EQ(parse({"stray"}).error().message, "unexpected argument \"stray\" (see --help)");
  EXPECT_EQ(parse({"--validate=yes"}).error().message, "--validate takes no value");
}

TEST(OptionsTest, EnvironmentMirrorsFlagsAndFlagsWin) {
  auto o = parse({"--rules", "/flag"}, {{"SLUICE_RULES", "/env"},
                                        {"SLUICE_FAILURE_MODE", "closed"},
                                        {"SLUICE_MAX_BODY_BYTES", "2048"}});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->rules, "/flag");
  EXPECT_EQ(o->failure_mode, FailureMode::kClosed);
  EXPECT_EQ(o->max_body_bytes, 2048u);
  EXPECT_EQ(parse({}, {{"SLUICE_THREADS", "x"}}).error().message,
            "SLUICE_THREADS: must be an integer from 1 to 1024, got \"x\"");
}

TEST(OptionsTest, ConfigFileIsOverriddenByEnvironmentAndFlags) {
  std::string file = writeTemp(
      "listen: 127.0.0.1:7000\nrules: /file\nstore: memory\ndefault_domain: web\n"
      "failure-mode: local\nforward_auth:\n  domain: x\n");
  auto o = parse({"--config", file, "--listen", "127.0.0.1:7001"}, {{"SLUICE_RULES", "/env"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->listen.front().port, 7001);
  EXPECT_EQ(o->rules, "/env");
  EXPECT_EQ(o->default_domain, "web");
  EXPECT_EQ(o->failure_mode, FailureMode::kLocal);
  std::remove(file.c_str());
}

TEST(OptionsTest, ConfigFileErrorsHaveALocation) {
  std::string file = writeTemp("listen: 127.0.0.1:7000\nthreds: 2\n");
  auto o = parse({"--config", file});
  ASSERT_FALSE(o.ok());
  EXPECT_EQ(o.error().message,
            file + ":2:1: unknown key \"threds\" (the keys are the flags of --help)");
  std::remove(file.c_str());
  EXPECT_NE(parse({"--config", "/does/not/exist.yaml"}).error().message.find("cannot read"),
            std::string::npos);
}

TEST(OptionsTest, HelpListsEveryFlag) {
  auto o = parse({"--help", "--bogus-after-help-is-fine-too"});
  ASSERT_FALSE(o.ok());  // unknown flags are reported even with --help
  o = parse({"-h"});
  ASSERT_TRUE(o.ok());
  EXPECT_TRUE(o->help);
  std::string help = helpText();
  for (const char* flag :
       {"--config", "--listen", "--rules", "--store", "--redis ", "--failure-mode", "--threads",
        "--log-level", "--validate", "--default-domain", "--max-body-bytes", "--redis-timeout-ms",
        "--redis-prefix", "--redis-max-batch", "--redis-batches-in-flight"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

}  // namespace
}  // namespace sluice::app
