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

#include "app/operations_options.hpp"
#include "http/forward_auth.hpp"
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
  std::string listen_host = "127.0.0.1";
  std::uint16_t listen_port = 8080;
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
  std::string redis_prefix = "sluice";
  std::chrono::milliseconds drain_timeout{30'000};
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  std::size_t memory_max_keys = 1'000'000;
  http::ForwardAuthConfig forward_auth;  ///< `forward_auth:` of --config, then the flags
  /// The server YAML's root when --config was given: its sections that belong to other
  /// modules (kDelegatedSections) are parsed by their owners, with their own locations.
  std::shared_ptr<const YAML::Node> config_root;
  OperationsOptions operations;  ///< log format, access log, events, admin listener
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

/// Splits "HOST:PORT" ("[::1]:8080" for IPv6). Errors name the text.
Status parseListen(std::string_view text, std::string& host, std::uint16_t& port);

}  // namespace sluice::app
