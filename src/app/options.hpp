#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "app/envoy_environment.hpp"
#include "app/operations_options.hpp"
#include "http/forward_auth.hpp"
#include "http/server.hpp"
#include "sluice/common/result.hpp"
#include "sluice/store/redis_store.hpp"

namespace YAML {
class Node;
}

namespace sluice::app {

/// Where the counters live (--store).
enum class StoreKind { kMemory, kRedis, kRedisCluster };

/// "memory", "redis", "redis_cluster".
std::string_view storeKindName(StoreKind kind);

/// Everything the command line (README.md, "Command line") can set. Precedence, lowest first:
/// defaults, the server YAML (`--config`), `SLUICE_*` environment variables, flags.
struct AppOptions {
  bool help = false;
  bool validate = false;    ///< --validate: check the rules and exit
  std::string config_file;  ///< --config: server YAML with the same keys as the flags
  /// --listen: TCP addresses and unix sockets, all served alike (default 127.0.0.1:8080).
  std::vector<http::ListenAddress> listen{http::ListenAddress{}};
  unsigned listen_mode = 0660;  ///< --listen-mode: permissions of the unix socket files
  std::string rules = "config/rules";
  /// --merge-domain-config: rules files that share a domain are merged (envoyproxy/ratelimit's
  /// MERGE_DOMAIN_CONFIG); off, a domain in two files is an error.
  bool merge_domain_config = false;
  StoreKind store = StoreKind::kMemory;
  std::string redis_url = "redis://127.0.0.1:6379/0";  ///< --redis as given
  /// --redis parsed once every source is applied (with redis_prefix and redis_timeout):
  /// one node for `redis`, the seeds for `redis_cluster`, empty for `memory`.
  std::vector<RedisOptions> redis_nodes;
  FailureMode failure_mode = FailureMode::kOpen;
  unsigned threads = 0;  ///< 0: one per core
  std::string log_level = "info";
  std::string default_domain = "default";
  std::size_t max_body_bytes = 1 << 20;
  std::chrono::milliseconds redis_timeout{20};
  /// --redis-max-batch: most decisions per script call (RedisOptions::max_batch).
  std::size_t redis_max_batch = 32;
  /// Start-up: requests wait for the store's first connection, /readyz is 503, this long.
  std::chrono::milliseconds store_connect_wait{2000};
  std::string redis_prefix = "sluice";
  std::chrono::milliseconds drain_timeout{30'000};
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::size_t memory_max_keys = 1'000'000;
  /// --grpc-listen: Envoy's Rate Limit Service v3 on "HOST:PORT" and/or "unix:/path"
  /// (empty: no gRPC).
  std::vector<std::string> grpc_listen;
  unsigned grpc_unix_mode = 0660;
  std::chrono::milliseconds grpc_max_connection_age{std::chrono::hours(24)};
  std::chrono::milliseconds grpc_max_connection_age_grace{std::chrono::hours(1)};
  bool grpc_response_headers = true;  ///< rate-limit headers in response_headers_to_add
  /// How /json and gRPC RLS charge a request's limits (--envoy-charge; docs/refunds.md).
  Charge envoy_charge = Charge::kEvery;
  bool grpc_reflection = false;  ///< grpc.reflection.v1alpha on the gRPC listener
  /// `consistency: eventual` (docs/eventual.md): sync interval, own region, other regions
  /// (NAME=URL,...; parsed at start-up against the Redis options), bound on eventual keys.
  std::chrono::milliseconds sync_interval{50};
  std::string region = "local";
  std::string regions;
  std::size_t eventual_max_keys = 200'000;
  http::ForwardAuthConfig forward_auth;  ///< `forward_auth:` of --config, then the flags
  /// The server YAML's root when --config was given: its sections that belong to other
  /// modules (kDelegatedSections) are parsed by their owners, with their own locations.
  std::shared_ptr<const YAML::Node> config_root;
  OperationsOptions operations;  ///< log format, access log, events, admin listener
  /// envoyproxy/ratelimit variables found in the environment and what they became (logged
  /// at start-up).
  EnvoyEnvironment envoy_environment;
};

/// Keys of the server YAML that are not flags and are parsed elsewhere.
inline constexpr std::string_view kDelegatedSections[] = {"forward_auth"};

/// Reads an environment variable; nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

/// Parses `args` (without argv[0]). Errors (kInvalidArgument) name the flag, variable or
/// `file:line:column` and what is wrong.
Result<AppOptions> parseOptions(const std::vector<std::string>& args, const EnvLookup& env);

/// The --help text.
std::string helpText();

/// Parses a --grpc-listen list: comma-separated "HOST:PORT" or "unix:/absolute/path".
Result<std::vector<std::string>> parseGrpcListen(std::string_view text);

/// Splits "HOST:PORT" ("[::1]:8080" for IPv6). Errors name the text.
Status parseListen(std::string_view text, std::string& host, std::uint16_t& port);

/// A comma-separated list of listen addresses: "HOST:PORT" or "unix:PATH" (an absolute or
/// relative path, without commas), e.g. "127.0.0.1:8080,unix:/run/sluice/sluice.sock".
/// Errors name the element; an address given twice is an error.
Result<std::vector<http::ListenAddress>> parseListenList(std::string_view text);

/// Octal permissions of a unix socket file: "660", "0660", "0600" (at most 0777).
Result<unsigned> parseFileMode(std::string_view text);

}  // namespace sluice::app
