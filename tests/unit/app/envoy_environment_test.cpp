#include "app/envoy_environment.hpp"

#include <gtest/gtest.h>

#include <map>

#include "app/options.hpp"

namespace sluice::app {
namespace {

EnvLookup envFrom(std::map<std::string, std::string> vars) {
  return [vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

Result<AppOptions> parse(std::map<std::string, std::string> env,
                         std::vector<std::string> args = {}) {
  return parseOptions(args, envFrom(std::move(env)));
}

TEST(EnvoyEnvironmentTest, RuntimeDirectoriesBecomeTheRulesPath) {
  auto o = parse({{"RUNTIME_ROOT", "/data"}, {"RUNTIME_SUBDIRECTORY", "ratelimit"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->rules, "/data/ratelimit/config");
  o = parse({{"RUNTIME_ROOT", "/data/"},
             {"RUNTIME_SUBDIRECTORY", "ratelimit"},
             {"RUNTIME_APPDIRECTORY", "rl"}});
  EXPECT_EQ(o->rules, "/data/ratelimit/rl");
  o = parse({{"RUNTIME_SUBDIRECTORY", "ratelimit"}});
  EXPECT_EQ(o->rules, "/srv/runtime_data/current/ratelimit/config");
}

TEST(EnvoyEnvironmentTest, ListenersFollowEnvoysDefaults) {
  auto o = parse({{"RUNTIME_SUBDIRECTORY", "rl"}, {"PORT", "9000"}, {"GRPC_PORT", "9001"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->listen.size(), 1u);
  EXPECT_EQ(o->listen[0].host, "0.0.0.0");
  EXPECT_EQ(o->listen.at(0).port, 9000);
  EXPECT_EQ(o->grpc_listen, std::vector<std::string>{"0.0.0.0:9001"});
  o = parse({{"GRPC_UDS", "/run/rl.sock"}, {"GRPC_PORT", "9001"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->grpc_listen, std::vector<std::string>{"unix:/run/rl.sock"});
  ASSERT_EQ(o->envoy_environment.unhonoured.size(), 1u);
  EXPECT_NE(o->envoy_environment.unhonoured[0].find("GRPC_PORT"), std::string::npos);
}

TEST(EnvoyEnvironmentTest, GenericNamesAloneAreNotRead) {
  auto o = parse({{"PORT", "9000"}, {"LOG_LEVEL", "debug"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->listen.at(0).port, 8080);
  EXPECT_EQ(o->log_level, "info");
  EXPECT_TRUE(o->envoy_environment.empty());
}

TEST(EnvoyEnvironmentTest, RedisSettings) {
  auto o = parse({{"REDIS_SOCKET_TYPE", "tcp"},
                  {"REDIS_URL", "redis.default:6379"},
                  {"REDIS_AUTH", "user:p@ss"},
                  {"REDIS_TIMEOUT", "250ms"},
                  {"CACHE_KEY_PREFIX", "rl_"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->store, StoreKind::kRedis);
  EXPECT_EQ(o->redis_url, "redis://user:p%40ss@redis.default:6379");
  EXPECT_EQ(o->redis_timeout, std::chrono::milliseconds(250));
  EXPECT_EQ(o->redis_prefix, "rl_");
  for (const auto& line : o->envoy_environment.mapped) {
    EXPECT_EQ(line.find("p%40ss"), std::string::npos) << line;  // the password is masked
  }
  o = parse({{"REDIS_SOCKET_TYPE", "tcp"},
             {"REDIS_TYPE", "cluster"},
             {"REDIS_URL", "10.0.0.1:6379,10.0.0.2:6379"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->store, StoreKind::kRedisCluster);
  EXPECT_EQ(o->redis_url, "redis://10.0.0.1:6379,redis://10.0.0.2:6379");
  o = parse({{"REDIS_URL", "/var/run/redis.sock"}});  // REDIS_SOCKET_TYPE defaults to unix
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->redis_url, "unix:///var/run/redis.sock");
}

TEST(EnvoyEnvironmentTest, UnhonouredVariablesAreNamed) {
  auto o = parse({{"SHADOW_MODE", "true"},
                  {"REDIS_TYPE", "SENTINEL"},
                  {"USE_STATSD", "false"},
                  {"LIMIT_LIMIT_HEADER", "A-Limit"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  std::string all;
  for (const auto& line : o->envoy_environment.unhonoured) {
    all += line + "\n";
  }
  EXPECT_NE(all.find("SHADOW_MODE=true"), std::string::npos) << all;
  EXPECT_NE(all.find("REDIS_TYPE=SENTINEL"), std::string::npos) << all;
  EXPECT_NE(all.find("LIMIT_LIMIT_HEADER=A-Limit"), std::string::npos) << all;
  EXPECT_EQ(all.find("USE_STATSD"), std::string::npos) << all;  // false is what Sluice does
}

TEST(EnvoyEnvironmentTest, GrpcServerTlsMapsOntoTheTlsFlags) {
  auto o = parse({{"GRPC_SERVER_USE_TLS", "true"},
                  {"GRPC_SERVER_TLS_CERT", "/certs/tls.crt"},
                  {"GRPC_SERVER_TLS_KEY", "/certs/tls.key"},
                  {"GRPC_CLIENT_TLS_CACERT", "/certs/ca.crt"},
                  {"GRPC_CLIENT_TLS_SAN", "envoy"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->grpc_tls.cert_file, "/certs/tls.crt");
  EXPECT_EQ(o->grpc_tls.key_file, "/certs/tls.key");
  EXPECT_EQ(o->grpc_tls.client_ca_file, "/certs/ca.crt");
  EXPECT_EQ(o->grpc_tls.client_san, "envoy");
  EXPECT_TRUE(o->envoy_environment.unhonoured.empty());
  auto missing = parse({{"GRPC_SERVER_USE_TLS", "true"}, {"GRPC_SERVER_TLS_CERT", "/c"}});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("GRPC_SERVER_TLS_KEY"), std::string::npos);
  auto off = parse({{"GRPC_SERVER_USE_TLS", "false"}, {"GRPC_SERVER_TLS_CERT", "/c"}});
  ASSERT_TRUE(off.ok()) << off.error().message;
  EXPECT_TRUE(off->grpc_tls.cert_file.empty());
  ASSERT_EQ(off->envoy_environment.unhonoured.size(), 1u);
}

// Every other setting of envoyproxy/ratelimit's src/settings/settings.go, set to something
// Sluice cannot do, is named (none is dropped silently).
TEST(EnvoyEnvironmentTest, EverySettingSluiceCannotHonourIsNamed) {
  const std::map<std::string, std::string> env = {
      {"DEBUG_PORT", "6070"},
      {"GRPC_CLIENT_TLS_SAN", "a"},  // without GRPC_SERVER_USE_TLS=true
      {"CONFIG_TYPE", "GRPC_XDS_SOTW"},
      {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "5s"},
      {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "a:b"},
      {"PROMETHEUS_MAPPER_YAML", "/etc/statsd-exporter/conf.yaml"},
      {"TRACING_SERVICE_NAME", "rl"},
      {"TRACING_SERVICE_NAMESPACE", "ns"},
      {"TRACING_SERVICE_INSTANCE_ID", "i"},
      {"TRACING_EXPORTER_PROTOCOL", "grpc"},
      {"TRACING_SAMPLING_RATE", "0.5"},
      {"MEMCACHE_SRV_REFRESH", "1m"},
      {"MEMCACHE_MAX_IDLE_CONNS", "4"},
      {"MEMCACHE_TLS", "true"},
      {"MEMCACHE_TLS_CLIENT_CERT", "/c"},
      {"MEMCACHE_TLS_CLIENT_KEY", "/k"},
      {"MEMCACHE_TLS_CACERT", "/ca"},
      {"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "true"},
      {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "true"},
      {"REDIS_PERSECOND_SOCKET_TYPE", "tcp"},
      {"REDIS_PERSECOND_TYPE", "SINGLE"},
      {"REDIS_PERSECOND_POOL_SIZE", "5"},
      {"REDIS_PERSECOND_AUTH", "***"},  // a password is named, masked
      {"REDIS_PERSECOND_TLS", "true"},
      {"REDIS_PERSECOND_PIPELINE_WINDOW", "150us"},
      {"REDIS_PERSECOND_PIPELINE_LIMIT", "8"},
  };
  auto o = parse(env);
  ASSERT_TRUE(o.ok()) << o.error().message;
  std::string all;
  for (const auto& line : o->envoy_environment.unhonoured) {
    all += line + "\n";
  }
  for (const auto& [name, value] : env) {
    if (name == "CONFIG_TYPE") {
      continue;  // honoured: --rules-xds
    }
    EXPECT_NE(all.find(name + "=" + value), std::string::npos) << name << " in:\n" << all;
  }
  o = parse({{"REDIS_SENTINEL_AUTH", "hunter2"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  ASSERT_EQ(o->envoy_environment.unhonoured.size(), 1u);
  EXPECT_EQ(o->envoy_environment.unhonoured[0].find("hunter2"), std::string::npos);
  // Envoy's own defaults ask for nothing Sluice does not do: not named.
  o = parse({{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3s"},
             {"XDS_CLIENT_BACKOFF_JITTER", "true"},
             {"MEMCACHE_TLS", "false"},
             {"REDIS_PERSECOND_TLS", "false"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_TRUE(o->envoy_environment.unhonoured.empty());
}

TEST(EnvoyEnvironmentTest, HeadersSwitchAndLogLevel) {
  auto o = parse({{"LIMIT_RESPONSE_HEADERS_ENABLED", "false"}, {"LOG_LEVEL", "WARN"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_FALSE(o->grpc_response_headers);
  EXPECT_EQ(o->log_level, "warn");
}

TEST(EnvoyEnvironmentTest, WinOverSluiceVariablesAndGiveWayToFlags) {
  // An image's SLUICE_* defaults must not hide the manifest's envoy variables.
  auto o = parse({{"RUNTIME_SUBDIRECTORY", "rl"},
                  {"PORT", "9000"},
                  {"SLUICE_LISTEN", "1.2.3.4:1"},
                  {"SLUICE_STORE", "memory"}},
                 {"--rules", "mine"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->listen.at(0).port, 9000);
  EXPECT_EQ(o->rules, "mine");
}

TEST(EnvoyEnvironmentTest, BadValuesNameTheVariable) {
  auto o = parse({{"GRPC_MAX_CONNECTION_AGE", "forever"}});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("GRPC_MAX_CONNECTION_AGE=\"forever\""), std::string::npos)
      << o.error().message;
  o = parse({{"REDIS_TYPE", "weird"}});
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.error().message.find("REDIS_TYPE"), std::string::npos);
}

TEST(EnvoyEnvironmentTest, GoDurations) {
  EXPECT_EQ(parseGoDuration("24h"), std::chrono::hours(24));
  EXPECT_EQ(parseGoDuration("1h30m"), std::chrono::minutes(90));
  EXPECT_EQ(parseGoDuration("1.5s"), std::chrono::milliseconds(1500));
  EXPECT_EQ(parseGoDuration("250ms"), std::chrono::milliseconds(250));
  EXPECT_EQ(parseGoDuration("0"), std::chrono::milliseconds(0));
  EXPECT_FALSE(parseGoDuration("10").has_value());
  EXPECT_FALSE(parseGoDuration("").has_value());
  EXPECT_FALSE(parseGoDuration("1d").has_value());
}

TEST(GrpcOptionsTest, ListenIsRepeatableAndValidated) {
  auto o = parse({}, {"--grpc-listen", "127.0.0.1:8081", "--grpc-listen", "unix:/tmp/rl.sock"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->grpc_listen, (std::vector<std::string>{"127.0.0.1:8081", "unix:/tmp/rl.sock"}));
  EXPECT_FALSE(parse({}, {"--grpc-listen", "unix:relative.sock"}).ok());
  EXPECT_FALSE(parse({}, {"--grpc-listen", "nohost"}).ok());
  o = parse({}, {"--grpc-unix-mode", "0600"});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->grpc_unix_mode, 0600u);
  EXPECT_FALSE(parse({}, {"--grpc-unix-mode", "0999"}).ok());
}

TEST(GrpcOptionsTest, ReflectionIsOffUnlessAskedFor) {
  auto o = parse({});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_FALSE(o->grpc_reflection);
  o = parse({}, {"--grpc-reflection", "true"});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_TRUE(o->grpc_reflection);
  o = parse({{"SLUICE_GRPC_REFLECTION", "true"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_TRUE(o->grpc_reflection);
  EXPECT_FALSE(parse({}, {"--grpc-reflection", "maybe"}).ok());
}

}  // namespace
}  // namespace sluice::app

namespace sluice::app {
namespace {

TEST(EnvoyEnvironmentTest, XdsSettingsBecomeTheXdsFlags) {
  auto o = parse({{"CONFIG_TYPE", "GRPC_XDS_SOTW"},
                  {"CONFIG_GRPC_XDS_SERVER_URL", "envoy-gateway:18001"},
                  {"CONFIG_GRPC_XDS_NODE_ID", "envoy-ratelimit"},
                  {"CONFIG_GRPC_XDS_NODE_METADATA", "a=b,c=d"},
                  {"CONFIG_GRPC_XDS_SERVER_USE_TLS", "true"},
                  {"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "/certs/tls.crt"},
                  {"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "/certs/tls.key"},
                  {"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "/certs/ca.crt"},
                  {"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "envoy-gateway"},
                  {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "2s"},
                  {"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "1m"},
                  {"XDS_CLIENT_BACKOFF_RANDOM_FACTOR", "0.25"},
                  {"XDS_CLIENT_BACKOFF_JITTER", "false"},
                  {"FORCE_START_WITHOUT_INITIAL_CONFIG", "true"},
                  {"RUNTIME_ROOT", "/data"},
                  {"USE_PROMETHEUS", "true"},
                  {"PROMETHEUS_ADDR", ":19001"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->rules_xds, "envoy-gateway:18001");
  EXPECT_FALSE(o->rules_given);  // RUNTIME_ROOT is not used with xDS
  EXPECT_EQ(o->xds_node_id, "envoy-ratelimit");
  EXPECT_EQ(o->xds_node_metadata, "a=b,c=d");
  EXPECT_TRUE(o->xds_tls);
  EXPECT_EQ(o->xds_tls_cert, "/certs/tls.crt");
  EXPECT_EQ(o->xds_tls_key, "/certs/tls.key");
  EXPECT_EQ(o->xds_tls_ca, "/certs/ca.crt");
  EXPECT_EQ(o->xds_tls_server_name, "envoy-gateway");
  EXPECT_EQ(o->xds_backoff_initial.count(), 2000);
  EXPECT_EQ(o->xds_backoff_max.count(), 60000);
  EXPECT_EQ(o->xds_backoff_random_factor, 0.25);
  EXPECT_FALSE(o->xds_backoff_jitter);
  EXPECT_TRUE(o->force_start_without_rules);
  EXPECT_EQ(o->metrics_listen, "0.0.0.0:19001");
  EXPECT_TRUE(o->envoy_environment.unhonoured.empty());
}

TEST(EnvoyEnvironmentTest, XdsDefaultsAreEnvoysAndFileModeSaysWhatIsUnused) {
  auto o = parse({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_EQ(o->rules_xds, "localhost:18000");
  EXPECT_EQ(o->xds_node_id, "default");
  o = parse({{"CONFIG_TYPE", "FILE"}, {"CONFIG_GRPC_XDS_SERVER_URL", "cp:1"}});
  ASSERT_TRUE(o.ok()) << o.error().message;
  EXPECT_TRUE(o->rules_xds.empty());
  std::string mapped;
  for (const auto& line : o->envoy_environment.notes) {
    mapped += line + "\n";
  }
  EXPECT_NE(mapped.find("CONFIG_GRPC_XDS_SERVER_URL=cp:1 not used: CONFIG_TYPE is FILE"),
            std::string::npos)
      << mapped;
  EXPECT_FALSE(parse({{"CONFIG_TYPE", "GRPC_XDS_DELTA"}}).ok());
}

}  // namespace
}  // namespace sluice::app
