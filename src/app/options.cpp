#include "app/options.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <functional>
#include <utility>

#include "sluice/rules/rules.hpp"
#include "sluice/store/eventual_store.hpp"

namespace sluice::app {
namespace {

/// --store's spellings.
constexpr std::pair<StoreKind, std::string_view> kStoreKinds[] = {
    {StoreKind::kMemory, "memory"},
    {StoreKind::kRedis, "redis"},
    {StoreKind::kRedisCluster, "redis_cluster"},
};

constexpr std::size_t kMaxBodyLimit = 64 << 20;
constexpr unsigned kMaxThreads = 1024;

/// One flag: `--name VALUE` (or `--name=VALUE`), env SLUICE_<NAME>, config key `name`.
struct Flag {
  std::string_view name;
  std::string_view metavar;  ///< empty: a switch without value
  std::string_view help;
  std::function<Status(AppOptions&, std::string_view)> apply;
  bool in_env_and_config = true;
  /// Given several times on the command line, the values add up (joined with ',').
  bool repeatable = false;
};

Error invalid(std::string message) {
  return makeError(ErrorKind::kInvalidArgument, std::move(message));
}

template <typename T>
Result<T> parseNumber(std::string_view text, T min, T max) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return invalid("must be an integer from " + std::to_string(min) + " to " + std::to_string(max) +
                   ", got \"" + std::string(text) + "\"");
  }
  return value;
}

Status oneOf(std::string_view text, std::initializer_list<std::string_view> allowed,
             std::string& out) {
  for (auto a : allowed) {
    if (text == a) {
      out = std::string(text);
      return {};
    }
  }
  std::string list;
  for (auto a : allowed) {
    list += list.empty() ? "" : ", ";
    list += a;
  }
  return invalid("must be one of " + list + ", got \"" + std::string(text) + "\"");
}

/// A switch: given without a value on the command line (""), or true/false (also 1/0,
/// yes/no, on/off) from the environment or the config file.
Status parseSwitch(std::string_view text, bool& out) {
  std::string lower;
  for (char ch : text) {
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  if (lower.empty() || lower == "true" || lower == "1" || lower == "yes" || lower == "on") {
    out = true;
    return {};
  }
  if (lower == "false" || lower == "0" || lower == "no" || lower == "off") {
    out = false;
    return {};
  }
  return invalid("must be true or false, got \"" + std::string(text) + "\"");
}

/// A boolean that must be spelled out (a flag with a BOOL value).
Status boolean(std::string_view text, bool& out) {
  if (text.empty()) {
    return invalid("must be true or false, got \"\"");
  }
  return parseSwitch(text, out);
}

Status nonEmpty(std::string_view text, std::string& out) {
  if (text.empty()) {
    return invalid("must not be empty");
  }
  out = std::string(text);
  return {};
}

/// A flag that sets a count field within [min, max].
template <typename T>
std::function<Status(AppOptions&, std::string_view)> countField(T AppOptions::*field, T min,
                                                                T max) {
  return [field, min, max](AppOptions& o, std::string_view v) -> Status {
    auto n = parseNumber<T>(v, min, max);
    if (!n) {
      return n.error();
    }
    o.*field = *n;
    return {};
  };
}

/// A flag that sets a duration field from milliseconds within [min, max].
std::function<Status(AppOptions&, std::string_view)> millisField(
    std::chrono::milliseconds AppOptions::*field, long min, long max) {
  return [field, min, max](AppOptions& o, std::string_view v) -> Status {
    auto n = parseNumber<long>(v, min, max);
    if (!n) {
      return n.error();
    }
    o.*field = std::chrono::milliseconds(*n);
    return {};
  };
}

const std::vector<Flag>& flags() {
  static const std::vector<Flag> kFlags{
      {"config", "FILE", "server YAML file with the same keys as these flags",
       [](AppOptions& o, std::string_view v) { return nonEmpty(v, o.config_file); }, false},
      {"listen", "ADDRESSES",
       "where to serve, comma-separated: HOST:PORT and/or unix:PATH (default "
       "127.0.0.1:8080)",
       [](AppOptions& o, std::string_view v) -> Status {
         auto list = parseListenList(v);
         if (!list) {
           return list.error();
         }
         o.listen = std::move(*list);
         return {};
       }},
      {"listen-mode", "MODE", "octal permissions of the unix: sockets of --listen (default 0660)",
       [](AppOptions& o, std::string_view v) -> Status {
         auto mode = parseFileMode(v);
         if (!mode) {
           return mode.error();
         }
         o.listen_mode = *mode;
         return {};
       }},
      {"rules", "PATH", "a rules file or a directory of *.yaml (default config/rules)",
       [](AppOptions& o, std::string_view v) { return nonEmpty(v, o.rules); }},
      {"merge-domain-config", "",
       "merge rules files that share a domain (envoyproxy/ratelimit's MERGE_DOMAIN_CONFIG; "
       "default off: a domain in two files is an error); SLUICE_MERGE_DOMAIN_CONFIG=true|false",
       [](AppOptions& o, std::string_view v) -> Status {
         return parseSwitch(v, o.merge_domain_config);
       }},
      {"store", "KIND", "memory | redis | redis_cluster (default memory)",
       [](AppOptions& o, std::string_view v) {
         for (const auto& [value, name] : kStoreKinds) {
           if (v == name) {
             o.store = value;
             return Status{};
           }
         }
         std::string ignored;
         return oneOf(v, {"memory", "redis", "redis_cluster"}, ignored);
       }},
      {"redis", "URL",
       "redis://[user:password@]host:port/db or unix:///path (default "
       "redis://127.0.0.1:6379/0); with --store redis_cluster, comma-separated seed nodes "
       "redis://host:port,redis://host:port",
       [](AppOptions& o, std::string_view v) { return nonEmpty(v, o.redis_url); }},
      {"failure-mode", "MODE", "open | closed | local: when the store fails (default open)",
       [](AppOptions& o, std::string_view v) {
         std::string mode;
         if (auto status = oneOf(v, {"open", "closed", "local"}, mode); !status) {
           return status;
         }
         o.failure_mode = *parseFailureMode(mode);
         return Status{};
       }},
      {"threads", "N", "I/O threads (default: one per core)",
       countField<unsigned>(&AppOptions::threads, 1u, kMaxThreads)},
      {"log-level", "LEVEL", "trace | debug | info | warn | error | critical | off (default info)",
       [](AppOptions& o, std::string_view v) {
         return oneOf(v, {"trace", "debug", "info", "warn", "error", "critical", "off"},
                      o.log_level);
       }},
      {"validate", "",
       "check the rules, print every error as file:line:column: message, "
       "exit 0 or 1",
       [](AppOptions& o, std::string_view) -> Status {
         o.validate = true;
         return {};
       },
       false},
      {"forward-auth-domain", "NAME",
       "/check: the domain (default: forward_auth.domain, else "
       "the default domain)",
       [](AppOptions& o, std::string_view v) {
         return http::applyForwardAuthOption(o.forward_auth, "domain", v);
       }},
      {"forward-auth-deny-status", "STATUS",
       "/check: the answer to a denied request (default "
       "429; 403 for nginx auth_request)",
       [](AppOptions& o, std::string_view v) {
         return http::applyForwardAuthOption(o.forward_auth, "deny-status", v);
       }},
      {"forward-auth-client", "SOURCES",
       "/check: the client id, first source with a value, e.g. "
       "header:X-User-Id,cookie:sid,ip (default ip)",
       [](AppOptions& o, std::string_view v) {
         return http::applyForwardAuthOption(o.forward_auth, "client", v);
       }},
      {"trusted-proxies", "CIDRS",
       "/check: peers whose X-Forwarded-For is believed, e.g. "
       "10.0.0.0/8,127.0.0.1 (default none)",
       [](AppOptions& o, std::string_view v) {
         return http::applyForwardAuthOption(o.forward_auth, "trusted-proxies", v);
       }},
      {"default-domain", "NAME", "domain of requests that name none (default \"default\")",
       [](AppOptions& o, std::string_view v) { return nonEmpty(v, o.default_domain); }},
      {"max-body-bytes", "N", "larger request bodies get 413 (default 1048576)",
       countField<std::size_t>(&AppOptions::max_body_bytes, 1, kMaxBodyLimit)},
      {"redis-timeout-ms", "MS", "per-request Redis deadline (default 20)",
       millisField(&AppOptions::redis_timeout, 1, 60'000)},
      {"redis-max-batch", "N",
       "most decisions sent to Redis in one script call: the decisions an I/O thread "
       "collects in one event-loop turn go as one EVALSHA per node, up to N each "
       "(1: one call per decision; default 32)",
       countField<std::size_t>(&AppOptions::redis_max_batch, 1, 1024)},
      {"store-connect-wait-ms", "MS",
       "start-up: requests wait for the store's first connection, and /readyz is 503, "
       "up to this long (default 2000)",
       millisField(&AppOptions::store_connect_wait, 0, 600'000)},
      {"redis-prefix", "PREFIX", "prefix of every Redis key (default sluice)",
       [](AppOptions& o, std::string_view v) { return nonEmpty(v, o.redis_prefix); }},
      {"drain-timeout-ms", "MS",
       "on SIGTERM, how long in-flight requests may finish "
       "(default 30000)",
       millisField(&AppOptions::drain_timeout, 0, 3'600'000)},
      {"request-timeout-ms", "MS",
       "a request must arrive whole within this, from its first "
       "byte (default 10000)",
       millisField(&AppOptions::request_timeout, 1, 3'600'000)},
      {"idle-timeout-ms", "MS",
       "idle keep-alive connections are closed after this "
       "(default 60000)",
       millisField(&AppOptions::idle_timeout, 1, 3'600'000)},
      {"grpc-listen", "ADDRESS",
       "Envoy's gRPC Rate Limit Service v3 on HOST:PORT and/or unix:/PATH; repeat the flag "
       "or separate with commas (default off)",
       [](AppOptions& o, std::string_view v) -> Status {
         auto list = parseGrpcListen(v);
         if (!list) {
           return list.error();
         }
         o.grpc_listen = std::move(*list);
         return {};
       },
       true, true},
      {"grpc-unix-mode", "MODE", "permissions of a gRPC unix socket, octal (default 0660)",
       [](AppOptions& o, std::string_view v) -> Status {
         unsigned mode = 0;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), mode, 8);
         if (v.empty() || ec != std::errc() || end != v.data() + v.size() || mode > 0777) {
           return invalid("must be an octal mode from 0 to 0777, got \"" + std::string(v) + "\"");
         }
         o.grpc_unix_mode = mode;
         return {};
       }},
      {"grpc-max-connection-age-ms", "MS",
       "gRPC connections get GOAWAY after this age (default 86400000, 24 h)",
       millisField(&AppOptions::grpc_max_connection_age, 1, 2'147'483'647)},
      {"grpc-max-connection-age-grace-ms", "MS",
       "then calls still running get this long (default 3600000, 1 h)",
       millisField(&AppOptions::grpc_max_connection_age_grace, 1, 2'147'483'647)},
      {"grpc-response-headers", "BOOL",
       "gRPC answers carry the rate-limit headers in response_headers_to_add (default true)",
       [](AppOptions& o, std::string_view v) { return boolean(v, o.grpc_response_headers); }},
      {"grpc-reflection", "BOOL",
       "gRPC server reflection (grpc.reflection.v1alpha, for grpcurl) on the gRPC listener "
       "(default false)",
       [](AppOptions& o, std::string_view v) { return boolean(v, o.grpc_reflection); }},
      {"memory-max-keys", "N", "bound on the memory store's buckets (default 1000000)",
       countField<std::size_t>(&AppOptions::memory_max_keys, 1, std::size_t{1} << 32)},
      {"sync-interval", "DURATION",
       "eventual limits: how often each sidecar sends its hits and reads the totals, "
       "e.g. 50ms (default 50ms; 5ms to 10s)",
       [](AppOptions& o, std::string_view v) -> Status {
         auto us = parseDuration(v);
         if (!us && !v.empty() &&
             std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
           auto ms = parseNumber<long>(v, 5, 10'000);
           if (!ms) {
             return ms.error();
           }
           us = *ms * kMicrosPerMilli;
         }
         if (!us || *us < 5 * kMicrosPerMilli || *us > 10 * kMicrosPerSecond ||
             *us % kMicrosPerMilli != 0) {
           return invalid("must be a duration from 5ms to 10s in whole milliseconds, got \"" +
                          std::string(v) + "\"");
         }
         o.sync_interval = std::chrono::milliseconds(*us / kMicrosPerMilli);
         return {};
       }},
      {"region", "NAME", "eventual limits: this sidecar's region (default local)",
       [](AppOptions& o, std::string_view v) -> Status {
         if (auto status = checkRegionName(std::string(v)); !status) {
           return status;
         }
         o.region = std::string(v);
         return {};
       }},
      {"regions", "NAME=URL,...",
       "eventual limits: the other regions' Redis, e.g. "
       "eu=redis://10.1.0.5:6379/0,us=redis://10.2.0.5:6379/0; a region that is a Redis "
       "Cluster: NAME=cluster:URL+URL... (its seeds) (default none)",
       [](AppOptions& o, std::string_view v) { return nonEmpty(v, o.regions); }},
      {"eventual-max-keys", "N", "bound on the eventual keys a sidecar holds (default 200000)",
       countField<std::size_t>(&AppOptions::eventual_max_keys, 1, std::size_t{1} << 32)},
      {"log-format", "FORMAT", "plain | json: one JSON object per log line (default plain)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "log-format", v);
       }},
      {"access-log", "PATH", "one line per decision to PATH, - for stdout (default off)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "access-log", v);
       }},
      {"access-log-format", "FORMAT",
       "plain | json: json is the line `sluice simulate` replays (default: --log-format)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "access-log-format", v);
       }},
      {"events", "KIND", "redis-stream: append each denial to a Redis Stream (default off)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "events", v);
       }},
      {"events-redis", "URL", "Redis of the events stream (default: --redis)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "events-redis", v);
       }},
      {"events-stream", "NAME", "stream key of the events (default sluice:denials)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "events-stream", v);
       }},
      {"events-maxlen", "N", "XADD MAXLEN ~ N caps the stream (default 100000)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "events-maxlen", v);
       }},
      {"admin-listen", "HOST:PORT",
       "admin listener: DELETE /limits, GET /limits/top plus the read-only views; a "
       "bare PORT binds 127.0.0.1 (default off)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "admin-listen", v);
       }},
      {"top-window-ms", "MS",
       "GET /limits/top: window of the most-denied counts; the answer covers the previous "
       "and the current window (default 60000)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "top-window-ms", v);
       }},
      {"top-capacity", "N",
       "GET /limits/top: clients counted per rule, window and I/O thread; counts are within "
       "denials/N (default 100)",
       [](AppOptions& o, std::string_view v) {
         return applyOperationsOption(o.operations, "top-capacity", v);
       }},
      {"help", "", "print this help and exit",
       [](AppOptions& o, std::string_view) -> Status {
         o.help = true;
         return {};
       },
       false},
  };
  return kFlags;
}

const Flag* findFlag(std::string_view name) {
  for (const auto& f : flags()) {
    if (f.name == name) {
      return &f;
    }
  }
  return nullptr;
}

std::string envName(std::string_view flag) {
  std::string name = "SLUICE_";
  for (char ch : flag) {
    name += ch == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  }
  return name;
}

std::string location(const std::string& file, const YAML::Mark& mark) {
  return file + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

Status applyConfigFile(AppOptions& options) {
  const std::string& file = options.config_file;
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::BadFile&) {
    return invalid(file + ": cannot read the server config file");
  } catch (const YAML::Exception& e) {
    return invalid(location(file, e.mark) + ": " + e.msg);
  }
  if (root.IsNull()) {
    return {};
  }
  if (!root.IsMap()) {
    return invalid(location(file, root.Mark()) + ": the server config must be a mapping");
  }
  for (const auto& item : root) {
    std::string key = item.first.as<std::string>("");
    std::string flag_name = key;
    std::replace(flag_name.begin(), flag_name.end(), '_', '-');
    std::string where = location(file, item.first.Mark());
    if (std::find(std::begin(kDelegatedSections), std::end(kDelegatedSections), key) !=
        std::end(kDelegatedSections)) {
      if (key == "forward_auth") {
        auto forward_auth = http::parseForwardAuthConfig(item.second, file);
        if (!forward_auth) {
          return forward_auth.error();
        }
        options.forward_auth = std::move(*forward_auth);
      }
      continue;
    }
    const Flag* flag = findFlag(flag_name);
    if (flag == nullptr || !flag->in_env_and_config) {
      return invalid(where + ": unknown key \"" + key + "\" (the keys are the flags of --help)");
    }
    if (!item.second.IsScalar()) {
      return invalid(location(file, item.second.Mark()) + ": " + key + ": must be a scalar");
    }
    if (auto status = flag->apply(options, item.second.Scalar()); !status) {
      return invalid(location(file, item.second.Mark()) + ": " + key + ": " +
                     status.error().message);
    }
  }
  options.config_root = std::make_shared<const YAML::Node>(root);
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

Result<std::vector<std::string>> parseGrpcListen(std::string_view text) {
  std::vector<std::string> list;
  while (true) {
    std::size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    if (item.starts_with("unix:")) {
      std::string_view path = item.substr(5);
      if (path.empty() || path.front() != '/') {
        return invalid("a unix socket must be unix:/absolute/path, got \"" + std::string(item) +
                       "\"");
      }
    } else {
      std::string host;
      std::uint16_t port = 0;
      if (auto status = parseListen(item, host, port); !status) {
        return invalid(status.error().message + " (or unix:/path)");
      }
    }
    if (std::find(list.begin(), list.end(), item) == list.end()) {
      list.emplace_back(item);
    }
    if (comma == std::string_view::npos) {
      break;
    }
    text.remove_prefix(comma + 1);
  }
  return list;
}

std::string_view storeKindName(StoreKind kind) {
  for (const auto& [value, name] : kStoreKinds) {
    if (value == kind) {
      return name;
    }
  }
  return "memory";
}

Status parseListen(std::string_view text, std::string& host, std::uint16_t& port) {
  auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return invalid("must be HOST:PORT, got \"" + std::string(text) + "\"");
  }
  std::string_view h = text.substr(0, colon);
  if (h.front() == '[') {
    if (h.back() != ']' || h.size() < 3) {
      return invalid("must be HOST:PORT ([::1]:8080 for IPv6), got \"" + std::string(text) + "\"");
    }
    h = h.substr(1, h.size() - 2);
  }
  auto p = parseNumber<unsigned>(text.substr(colon + 1), 0, 65535);
  if (!p) {
    return invalid("port " + p.error().message);
  }
  host = std::string(h);
  port = static_cast<std::uint16_t>(*p);
  return {};
}

Result<std::vector<http::ListenAddress>> parseListenList(std::string_view text) {
  std::vector<http::ListenAddress> list;
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    http::ListenAddress address;
    if (item.starts_with("unix:")) {
      const std::string_view path = item.substr(5);
      if (path.empty()) {
        return invalid("unix: needs a socket path, e.g. unix:/run/sluice/sluice.sock");
      }
      address = http::ListenAddress::unixSocket(std::string(path));
    } else if (auto status = parseListen(item, address.host, address.port); !status) {
      return status.error();
    }
    if (std::find(list.begin(), list.end(), address) != list.end()) {
      return invalid("\"" + std::string(item) + "\" is given twice");
    }
    list.push_back(std::move(address));
    if (comma == std::string_view::npos) {
      break;
    }
    text.remove_prefix(comma + 1);
  }
  return list;
}

Result<unsigned> parseFileMode(std::string_view text) {
  const bool octal =
      !text.empty() && text.size() <= 4 &&
      std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '7'; });
  unsigned mode = 0;
  for (char c : octal ? text : std::string_view{}) {
    mode = mode * 8 + static_cast<unsigned>(c - '0');
  }
  if (!octal || mode > 0777) {
    return invalid("must be octal permissions such as 0660 or 0600, got \"" + std::string(text) +
                   "\"");
  }
  return mode;
}

Result<AppOptions> parseOptions(const std::vector<std::string>& args, const EnvLookup& env) {
  // Split "--name value" and "--name=value" first, so the config file can be applied
  // before the environment and the flags that override it.
  std::vector<std::pair<const Flag*, std::string>> given;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string_view arg = args[i];
    if (arg == "-h") {
      arg = "--help";
    }
    if (!arg.starts_with("--")) {
      return invalid("unexpected argument \"" + std::string(arg) + "\" (see --help)");
    }
    std::string_view name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string_view::npos) {
      value = std::string(name.substr(eq + 1));
      name = name.substr(0, eq);
    }
    const Flag* flag = findFlag(name);
    if (flag == nullptr) {
      return invalid("unknown flag --" + std::string(name) + " (see --help)");
    }
    if (flag->metavar.empty()) {
      if (value) {
        return invalid("--" + std::string(name) + " takes no value");
      }
      value = "";
    } else if (!value) {
      if (i + 1 >= args.size()) {
        return invalid("--" + std::string(name) + " needs a value " + std::string(flag->metavar));
      }
      value = args[++i];
    }
    auto previous =
        std::find_if(given.begin(), given.end(), [flag](const auto& g) { return g.first == flag; });
    if (flag->repeatable && previous != given.end()) {
      previous->second += "," + *value;
      continue;
    }
    given.emplace_back(flag, std::move(*value));
  }

  AppOptions options;
  for (const auto& [flag, value] : given) {
    if (flag->name == "help") {
      options.help = true;
      return options;
    }
  }
  if (auto config = env("SLUICE_CONFIG")) {
    options.config_file = *config;
  }
  for (const auto& [flag, value] : given) {
    if (flag->name == "config") {
      options.config_file = value;
    }
  }
  if (!options.config_file.empty()) {
    if (auto status = applyConfigFile(options); !status) {
      return status.error();
    }
  }
  for (const auto& flag : flags()) {
    if (!flag.in_env_and_config) {
      continue;
    }
    std::string name = envName(flag.name);
    if (auto value = env(name)) {
      if (auto status = flag.apply(options, *value); !status) {
        return invalid(name + ": " + status.error().message);
      }
    }
  }
  // envoyproxy/ratelimit's variables, so that its manifests run Sluice: above SLUICE_*
  // variables, which container images set as defaults (docs/envoy.md).
  auto envoy = mapEnvoyEnvironment(env, [](std::string_view name) {
    const Flag* flag = findFlag(name);
    return flag != nullptr && flag->in_env_and_config;
  });
  if (!envoy) {
    return envoy.error();
  }
  for (const auto& [name, value] : envoy->flags) {
    if (auto status = findFlag(name)->apply(options, value); !status) {
      return invalid("envoyproxy/ratelimit variables: --" + name + " " + value + ": " +
                     status.error().message);
    }
  }
  options.envoy_environment = std::move(*envoy);
  for (const auto& [flag, value] : given) {
    if (auto status = flag->apply(options, value); !status) {
      return invalid("--" + std::string(flag->name) + ": " + status.error().message);
    }
  }
  if (!options.validate) {
    if (auto status = parseRedisNodes(options); !status) {
      return status.error();
    }
  }
  return options;
}

std::string helpText() {
  std::string text =
      "Usage: sluice [FLAGS]\n"
      "Sluice: an HTTP rate-limiter sidecar (POST /shouldAllowRequest, POST /json, /check,\n"
      "GET /healthz, /readyz, /rules, /metrics).\n\n"
      "Flags (each also settable as SLUICE_<NAME> in the environment, e.g. SLUICE_LISTEN,\n"
      "and as a key of the --config YAML; flags win over the environment, which wins over\n"
      "the file):\n";
  auto usage = [](const Flag& flag) {
    std::string left = "  --" + std::string(flag.name);
    if (!flag.metavar.empty()) {
      left += " " + std::string(flag.metavar);
    }
    return left;
  };
  std::size_t width = 0;
  for (const auto& flag : flags()) {
    width = std::max(width, usage(flag).size() + 2);
  }
  for (const auto& flag : flags()) {
    std::string left = usage(flag);
    left.resize(width, ' ');
    text += left + std::string(flag.help) + "\n";
  }
  text +=
      "\nenvoyproxy/ratelimit's variables (RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, PORT, GRPC_PORT,\n"
      "GRPC_UDS, REDIS_URL, REDIS_TYPE, LOG_LEVEL, ...) are mapped onto these flags, above\n"
      "SLUICE_* variables; the mapping is logged at start-up (see docs/envoy.md).\n"
      "\nSignals: SIGTERM/SIGINT drain in-flight requests and exit 0; SIGHUP reloads the "
      "rules.\n";
  return text;
}

}  // namespace sluice::app
