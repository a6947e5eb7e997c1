#include "app/options.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <utility>

#include "sluice/common/yaml_document.hpp"
#include "sluice/common/yaml_reader.hpp"

namespace sluice::app {
namespace {

constexpr std::string_view kLogLevels[] = {"trace", "debug",    "info", "warn",
                                           "error", "critical", "off"};

Error invalid(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addGeneralFlags(FlagRegistry& registry, AppOptions& o) {
  namespace set = flag_setters;
  registry.section("General");
  registry.add({.name = "config",
                .metavar = "FILE",
                .help = "server YAML file with the same keys as these flags",
                .set = set::text(o.config_file),
                .command_line_only = true});
  registry.add({.name = "validate",
                .help = "check the rules, print every error as file:line:column: message, exit "
                        "0 or 1",
                .set = set::toggle(o.validate),
                .command_line_only = true});
  registry.add({.name = "log-level",
                .metavar = "LEVEL",
                .help = "trace | debug | info | warn | error | critical | off (default info)",
                .set = set::oneOf(o.log_level, kLogLevels),
                .envoy_variables = "LOG_LEVEL"});
  registry.add({.name = "metrics-listen",
                .metavar = "HOST:PORT",
                .help = "also serve GET /metrics on this address; :PORT binds every IPv4 "
                        "address (default off)",
                .set = [&o](std::string_view value) -> Status {
                  // Go's ":PORT" (PROMETHEUS_ADDR's spelling) is every IPv4 address here.
                  std::string text(value);
                  if (!text.empty() && text.front() == ':') {
                    text = "0.0.0.0" + text;
                  }
                  if (auto address = parseHostPort(text); !address) {
                    return address.error();
                  }
                  o.metrics_listen = std::move(text);
                  return {};
                },
                .envoy_variables = "USE_PROMETHEUS=true, PROMETHEUS_ADDR"});
  registry.add({.name = "help",
                .help = "print this help and exit",
                .set = set::toggle(o.help),
                .command_line_only = true});
  registry.add({.name = "envoy-charge",
                .metavar = "MODE",
                .help = "how POST /json and gRPC RLS charge a request's limits: every (each "
                        "matched limit counted, denied or not, as envoyproxy/ratelimit) or "
                        "all-or-nothing (a denied request charges nothing) (default every)",
                .set = [&o](std::string_view value) -> Status {
                  if (value == "every") {
                    o.envoy_charge = Charge::kEvery;
                  } else if (value == "all-or-nothing") {
                    o.envoy_charge = Charge::kAllOrNothing;
                  } else {
                    return invalid("must be every or all-or-nothing, got \"" + std::string(value) +
                                   "\"");
                  }
                  return {};
                },
                .envoy_variables = "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"});
}

std::string location(const std::string& file, const YAML::Mark& mark) {
  const SourceLocation at = yamlLocation(file, mark);
  return at.file + ":" + std::to_string(at.line) + ":" + std::to_string(at.column);
}

/// The server YAML's keys: every flag that is not for the command line only, in both
/// spellings (max-body-bytes, max_body_bytes), and the sections other modules read.
std::vector<std::string> configKeys(const FlagRegistry& registry) {
  std::vector<std::string> keys(std::begin(kDelegatedSections), std::end(kDelegatedSections));
  for (const Flag* flag : registry.flags()) {
    if (!flag->command_line_only) {
      std::string key(flag->name);
      keys.push_back(key);
      std::replace(key.begin(), key.end(), '-', '_');
      keys.push_back(std::move(key));
    }
  }
  return keys;
}

/// Sets each key of the server YAML's root mapping with its flag; the first error, located.
Status applyConfigKeys(const FlagRegistry& registry, const YAML::Node& root, AppOptions& options) {
  const std::string& file = options.config_file;
  std::vector<LocatedError> errors;
  YamlReader reader(file, errors, YamlReader::Naming::kPath);
  const std::vector<std::string> names = configKeys(registry);
  const std::vector<std::string_view> allowed(names.begin(), names.end());
  const KeySet keys{allowed, "in the server config", [](const std::string& key) {
                      return "unknown key \"" + key + "\" (the keys are the flags of --help)";
                    }};
  const Fields fields = reader.readFields(root, keys);
  for (const auto& [key, field] : fields) {
    if (!errors.empty()) {
      break;
    }
    if (key == "forward_auth") {
      auto forward_auth = http::parseForwardAuthConfig(field.value, file);
      if (!forward_auth) {
        return forward_auth.error();
      }
      options.forward_auth = std::move(*forward_auth);
      continue;
    }
    auto value = reader.readString(field, key);
    if (!value) {
      continue;
    }
    if (auto status = registry.findConfigKey(key)->set(*value); !status) {
      reader.error(reader.at(field), key + ": " + status.error().message);
    }
  }
  if (!errors.empty()) {
    return invalid(errors.front().toString());
  }
  return {};
}

Status applyConfigFile(const FlagRegistry& registry, AppOptions& options) {
  const std::string& file = options.config_file;
  std::ifstream in(file, std::ios::binary);
  std::ostringstream content;
  if (in) {
    content << in.rdbuf();
  }
  if (!in || in.bad()) {
    return invalid(file + ": cannot read the server config file");
  }
  YamlDocument document =
      parseYamlDocument(file, content.str(), "only one YAML document per server config file");
  if (document.error) {
    return invalid(document.error->toString());
  }
  const YAML::Node& root = document.root;
  if (root.IsNull()) {
    return {};
  }
  if (!root.IsMap()) {
    return invalid(location(file, root.Mark()) + ": the server config must be a mapping");
  }
  if (auto status = applyConfigKeys(registry, root, options); !status) {
    return status;
  }
  return {};
}

/// envoyproxy/ratelimit's variables, so that its manifests run Sluice: above SLUICE_*
/// variables, which container images set as defaults (docs/envoy.md).
Status applyEnvoyEnvironment(const FlagRegistry& registry, const EnvLookup& env,
                             AppOptions& options) {
  auto envoy = mapEnvoyEnvironment(
      env, [&registry](std::string_view name) { return registry.findConfigKey(name) != nullptr; });
  if (!envoy) {
    return envoy.error();
  }
  for (const auto& [name, value] : envoy->flags) {
    if (auto status = registry.find(name)->set(value); !status) {
      return invalid("envoyproxy/ratelimit variables: --" + name + " " + value + ": " +
                     status.error().message);
    }
  }
  options.envoy_environment = std::move(*envoy);
  return {};
}

/// Parses --redis for the chosen store, once every source has been applied.
Status parseRedisNodes(AppOptions& options) {
  if (options.store == StoreKind::kMemory) {
    return {};
  }
  RedisOptions base;
  base.key_prefix = options.redis_prefix;
  base.request_timeout = options.redis_timeout;
  base.max_batch = options.redis_max_batch;
  base.max_batches_in_flight = options.redis_batches_in_flight;
  base.connect_wait = options.store_connect_wait;
  if (options.store == StoreKind::kRedisCluster) {
    auto seeds = parseRedisClusterUrls(options.redis_url, base);
    if (!seeds) {
      return invalid("--redis: " + seeds.error().message);
    }
    options.redis_nodes = std::move(*seeds);
    return {};
  }
  auto node = parseRedisUrl(options.redis_url, base);
  if (!node) {
    return invalid("--redis: " + node.error().message);
  }
  options.redis_nodes = {std::move(*node)};
  return {};
}

}  // namespace

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addAppFlags(FlagRegistry& registry, AppOptions& options) {
  addGeneralFlags(registry, options);
  http::addHttpFlags(registry, options);
  addRulesFlags(registry, options);
  xds::addXdsFlags(registry, options);
  addStoreFlags(registry, options);
  grpc::addGrpcFlags(registry, options);
  addReservationFlags(registry, options);
  addOperationsFlags(registry, options.operations);
}

Result<AppOptions> parseOptions(const std::vector<std::string>& args, const EnvLookup& env) {
  AppOptions options;
  FlagRegistry registry;
  addAppFlags(registry, options);
  // The command line is split first, so that the config file can be applied before the
  // environment and the flags that override it.
  auto given = registry.parseCommandLine(args);
  if (!given) {
    return given.error();
  }
  const auto named = [&given](std::string_view name) {
    return std::find_if(given->begin(), given->end(),
                        [name](const GivenFlag& g) { return g.flag->name == name; });
  };
  if (named("help") != given->end()) {
    options.help = true;
    return options;
  }
  if (auto config = env("SLUICE_CONFIG")) {
    options.config_file = *config;
  }
  if (auto config = named("config"); config != given->end()) {
    options.config_file = config->value;
  }
  if (!options.config_file.empty()) {
    if (auto status = applyConfigFile(registry, options); !status) {
      return status.error();
    }
  }
  if (auto status = registry.applyEnvironment(env); !status) {
    return status.error();
  }
  if (auto status = applyEnvoyEnvironment(registry, env, options); !status) {
    return status.error();
  }
  if (auto status = FlagRegistry::applyCommandLine(*given); !status) {
    return status.error();
  }
  if (!options.rules_xds.empty() && options.rules_given) {
    return invalid("--rules and --rules-xds are two sources of the rules: give one of them");
  }
  if (!options.validate) {
    if (auto status = parseRedisNodes(options); !status) {
      return status.error();
    }
  }
  return options;
}

std::string helpText() {
  AppOptions options;
  FlagRegistry registry;
  addAppFlags(registry, options);
  return "Usage: sluice [FLAGS]\n"
         "Sluice: an HTTP rate-limiter sidecar (POST /shouldAllowRequest, POST /json, /check,\n"
         "GET /healthz, /readyz, /rules, /metrics).\n\n"
         "Flags (each also settable as SLUICE_<NAME> in the environment, e.g. SLUICE_LISTEN,\n"
         "and as a key of the --config YAML; flags win over the environment, which wins over\n"
         "the file; --config, --validate and --help are for the command line only):\n" +
         registry.helpText() +
         "\nenvoyproxy/ratelimit's variables are mapped onto these flags, above SLUICE_*\n"
         "variables; the mapping is logged at start-up (see docs/envoy.md):\n" +
         registry.envoyVariablesText() +
         "\nSignals: SIGTERM/SIGINT drain in-flight requests and exit 0; SIGHUP reloads the "
         "rules.\n";
}

}  // namespace sluice::app
