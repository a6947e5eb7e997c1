#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "app/envoy_environment.hpp"
#include "app/operations_options.hpp"
#include "sluice/common/flag_registry.hpp"
#include "sluice/common/result.hpp"
#include "sluice/decision/reservation.hpp"
#include "sluice/grpc/grpc_flags.hpp"
#include "sluice/http/http_flags.hpp"
#include "sluice/rules/rules_flags.hpp"
#include "sluice/store/redis_store.hpp"
#include "sluice/store/store_flags.hpp"
#include "sluice/xds/xds_flags.hpp"

namespace sluice::app {

/// Everything the command line (README.md, "Command line") can set: each module's settings,
/// filled by the flags it adds to the registry (addAppFlags), and the app's own. Precedence,
/// lowest first: defaults, the server YAML (`--config`), `SLUICE_*` environment variables,
/// envoyproxy/ratelimit's variables, flags.
struct AppOptions : http::HttpSettings,
                    RulesSettings,
                    xds::XdsSettings,
                    StoreSettings,
                    grpc::GrpcSettings,
                    ReservationSettings {
  bool help = false;
  bool validate = false;    ///< --validate: check the rules and exit
  std::string config_file;  ///< --config: server YAML with the same keys as the flags
  std::string log_level = "info";
  /// How /json and gRPC RLS charge a request's limits (--envoy-charge; docs/refunds.md).
  Charge envoy_charge = Charge::kEvery;
  /// --metrics-listen HOST:PORT: GET /metrics also there (envoyproxy/ratelimit's
  /// PROMETHEUS_ADDR); empty: only on --listen and the admin listener.
  std::string metrics_listen;
  /// --redis parsed once every source is applied (with redis_prefix and redis_timeout):
  /// one node for `redis`, the seeds for `redis_cluster`, empty for `memory`.
  std::vector<RedisOptions> redis_nodes;
  OperationsOptions operations;  ///< log format, access log, events, admin listener
  /// envoyproxy/ratelimit variables found in the environment and what they became (logged
  /// at start-up).
  EnvoyEnvironment envoy_environment;
};

/// Keys of the server YAML that are not flags and are parsed elsewhere.
inline constexpr std::string_view kDelegatedSections[] = {"forward_auth"};

/// Reads an environment variable; nullopt when unset.
using EnvLookup = EnvironmentLookup;

/// Adds every flag to `registry`, bound to `options`: the app's own (--config, --validate,
/// --log-level, --help), then each module's, in the order of --help.
void addAppFlags(FlagRegistry& registry, AppOptions& options);

/// Parses `args` (without argv[0]). Errors (kInvalidArgument) name the flag, variable or
/// `file:line:column` and what is wrong.
Result<AppOptions> parseOptions(const std::vector<std::string>& args, const EnvLookup& env);

/// The --help text.
std::string helpText();

}  // namespace sluice::app
