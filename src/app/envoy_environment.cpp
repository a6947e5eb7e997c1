#include "app/envoy_environment.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "sluice/common/value_parsers.hpp"

namespace sluice::app {
namespace {

Error invalid(std::string_view name, std::string_view value, std::string_view what) {
  return makeError(ErrorKind::kInvalidArgument,
                   std::string(name) + "=\"" + std::string(value) +
                       "\" (envoyproxy/ratelimit variable): " + std::string(what));
}

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

/// Go's strconv.ParseBool, which envconfig uses.
std::optional<bool> parseGoBool(std::string_view text) {
  std::string v = lower(text);
  if (v == "1" || v == "t" || v == "true") {
    return true;
  }
  if (v == "0" || v == "f" || v == "false") {
    return false;
  }
  return std::nullopt;
}

/// Percent-encodes what may not appear raw in the user info of a redis:// URL.
std::string encodeUserInfo(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xF];
    }
  }
  return out;
}

/// The variables Sluice has nothing for: set to anything but their harmless value, they are
/// named at start-up. `harmless` empty: any value is named.
struct Unhonoured {
  std::string_view name;
  std::string_view harmless;  ///< a value with which Sluice behaves as envoy would
  std::string_view reason;
};

constexpr Unhonoured kUnhonoured[] = {
    {"DEBUG_HOST", "", "Sluice has no debug listener (its /rules, /metrics are on --listen)"},
    {"DEBUG_PORT", "", "Sluice has no debug listener (its /rules, /metrics are on --listen)"},
    {"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", "3s",
     "Sluice retries the xDS stream with XDS_CLIENT_BACKOFF_* only"},
    {"CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "", "no extra headers on the xDS stream"},
    {"USE_STATSD", "false", "no statsd: metrics are Prometheus text on GET /metrics of --listen"},
    {"STATSD_HOST", "", "no statsd: metrics are Prometheus text on GET /metrics of --listen"},
    {"STATSD_PORT", "", "no statsd: metrics are Prometheus text on GET /metrics of --listen"},
    {"USE_DOG_STATSD", "false", "no statsd: metrics are Prometheus text on GET /metrics"},
    {"USE_DOG_STATSD_MOGRIFIERS", "", "no statsd: metrics are Prometheus text on GET /metrics"},
    {"EXTRA_TAGS", "", "metric labels are fixed (see docs/operations.md)"},
    {"STATS_FLUSH_INTERVAL", "", "Prometheus metrics are read live, there is no flush"},
    {"DISABLE_STATS", "false", "metrics are always on (GET /metrics)"},
    {"PROMETHEUS_PATH", "/metrics", "the metrics path is /metrics"},
    {"PROMETHEUS_MAPPER_YAML", "", "metric names are Sluice's own (see docs/operations.md)"},
    {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", "false", "latencies are in seconds"},
    {"RUNTIME_IGNOREDOTFILES", "true", "Sluice always ignores dot files in the rules directory"},
    {"EXPIRATION_JITTER_MAX_SECONDS", "", "key expiry is exact (no jitter)"},
    {"LOCAL_CACHE_SIZE_IN_BYTES", "",
     "the local over-limit cache is always on and bounded by keys, not bytes"},
    {"NEAR_LIMIT_RATIO", "0.8", "near_limit_total counts at 80% of a limit, fixed"},
    {"LIMIT_LIMIT_HEADER", "",
     "header names are fixed: X-Ratelimit-*, RateLimit-Policy, RateLimit (see README)"},
    {"LIMIT_REMAINING_HEADER", "",
     "header names are fixed: X-Ratelimit-*, RateLimit-Policy, RateLimit (see README)"},
    {"LIMIT_RESET_HEADER", "",
     "header names are fixed: X-Ratelimit-*, RateLimit-Policy, RateLimit (see README)"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "",
     "Sluice is healthy once its rules loaded (possibly none) and its store answers"},
    {"SHADOW_MODE", "false", "there is no global shadow mode: set shadow_mode on the rules"},
    {"QUOTA_MODE", "false", "there is no global quota mode: set quota_mode on the rules"},
    {"RESPONSE_DYNAMIC_METADATA", "true",
     "dynamic_metadata is always sent when the matched rules have metadata"},
    {"TRACING_ENABLED", "false", "tracing is not supported"},
    {"TRACING_SERVICE_NAME", "", "tracing is not supported"},
    {"TRACING_SERVICE_NAMESPACE", "", "tracing is not supported"},
    {"TRACING_SERVICE_INSTANCE_ID", "", "tracing is not supported"},
    {"TRACING_EXPORTER_PROTOCOL", "", "tracing is not supported"},
    {"TRACING_SAMPLING_RATE", "", "tracing is not supported"},
    {"BACKEND_TYPE", "redis", "only Redis (and Sluice's memory store) are supported, no memcache"},
    {"MEMCACHE_HOST_PORT", "", "memcache is not supported"},
    {"MEMCACHE_SRV", "", "memcache is not supported"},
    {"MEMCACHE_SRV_REFRESH", "", "memcache is not supported"},
    {"MEMCACHE_MAX_IDLE_CONNS", "", "memcache is not supported"},
    {"MEMCACHE_TLS", "false", "memcache is not supported"},
    {"MEMCACHE_TLS_CLIENT_CERT", "", "memcache is not supported"},
    {"MEMCACHE_TLS_CLIENT_KEY", "", "memcache is not supported"},
    {"MEMCACHE_TLS_CACERT", "", "memcache is not supported"},
    {"MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "memcache is not supported"},
    {"REDIS_TLS", "false", "TLS to Redis is not supported"},
    {"REDIS_TLS_CLIENT_CERT", "", "TLS to Redis is not supported"},
    {"REDIS_TLS_CLIENT_KEY", "", "TLS to Redis is not supported"},
    {"REDIS_TLS_CACERT", "", "TLS to Redis is not supported"},
    {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", "false", "TLS to Redis is not supported"},
    {"REDIS_SENTINEL_AUTH", "", "Redis Sentinel is not supported"},
    {"REDIS_PERSECOND", "false", "one Redis serves every limit (no separate per-second Redis)"},
    {"REDIS_PERSECOND_URL", "", "one Redis serves every limit (no separate per-second Redis)"},
    {"REDIS_PERSECOND_SOCKET_TYPE", "", "one Redis serves every limit (no per-second Redis)"},
    {"REDIS_PERSECOND_TYPE", "", "one Redis serves every limit (no per-second Redis)"},
    {"REDIS_PERSECOND_POOL_SIZE", "", "one Redis serves every limit (no per-second Redis)"},
    {"REDIS_PERSECOND_AUTH", "", "one Redis serves every limit (no per-second Redis)"},
    {"REDIS_PERSECOND_TLS", "false", "one Redis serves every limit (no per-second Redis)"},
    {"REDIS_PERSECOND_PIPELINE_WINDOW", "", "one Redis serves every limit (no per-second Redis)"},
    {"REDIS_PERSECOND_PIPELINE_LIMIT", "", "one Redis serves every limit (no per-second Redis)"},
    {"REDIS_POOL_SIZE", "",
     "Sluice pipelines one connection per I/O thread (--threads), there is no pool"},
    {"REDIS_POOL_ON_EMPTY_BEHAVIOR", "", "Sluice pipelines one connection per I/O thread"},
    {"REDIS_PIPELINE_WINDOW", "", "Sluice always pipelines, without a window"},
    {"REDIS_PIPELINE_LIMIT", "", "Sluice always pipelines, without a limit"},
    {"REDIS_CLUSTER_PIPELINE_PARALLELISM", "", "Sluice pipelines per cluster node"},
    {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", "",
     "Sluice's store health comes from its connections and periodic pings"},
    {"REDIS_STARTUP_INITIAL_INTERVAL", "", "Sluice reconnects with its own bounded backoff"},
    {"REDIS_STARTUP_MAX_INTERVAL", "", "Sluice reconnects with its own bounded backoff"},
    {"REDIS_STARTUP_MAX_ELAPSED_TIME", "", "Sluice reconnects with its own bounded backoff"},
};

/// Names so common that they may be set for something else: read only when a variable
/// proper to envoyproxy/ratelimit is set too.
constexpr std::string_view kGenericNames[] = {"HOST", "PORT", "LOG_LEVEL", "LOG_FORMAT"};

class Mapper {
 public:
  Mapper(const EnvironmentLookup& env, const std::function<bool(std::string_view)>& has_flag)
      : env_(env), has_flag_(has_flag) {
    for (const Unhonoured& u : kUnhonoured) {
      envoy_specific_ = envoy_specific_ || env_(u.name).has_value();
    }
    for (std::string_view name : {"RUNTIME_ROOT",
                                  "RUNTIME_SUBDIRECTORY",
                                  "RUNTIME_APPDIRECTORY",
                                  "RUNTIME_WATCH_ROOT",
                                  "GRPC_HOST",
                                  "GRPC_PORT",
                                  "GRPC_UDS",
                                  "GRPC_MAX_CONNECTION_AGE",
                                  "GRPC_MAX_CONNECTION_AGE_GRACE",
                                  "REDIS_TYPE",
                                  "REDIS_SOCKET_TYPE",
                                  "REDIS_URL",
                                  "REDIS_AUTH",
                                  "REDIS_TIMEOUT",
                                  "CACHE_KEY_PREFIX",
                                  "LIMIT_RESPONSE_HEADERS_ENABLED",
                                  "MERGE_DOMAIN_CONFIG",
                                  "CONFIG_TYPE",
                                  "CONFIG_GRPC_XDS_SERVER_URL",
                                  "CONFIG_GRPC_XDS_NODE_ID",
                                  "CONFIG_GRPC_XDS_NODE_METADATA",
                                  "CONFIG_GRPC_XDS_SERVER_USE_TLS",
                                  "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
                                  "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
                                  "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
                                  "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
                                  "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
                                  "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
                                  "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
                                  "XDS_CLIENT_BACKOFF_JITTER",
                                  "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
                                  "FORCE_START_WITHOUT_INITIAL_CONFIG",
                                  "USE_PROMETHEUS",
                                  "PROMETHEUS_ADDR",
                                  "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
                                  "GRPC_SERVER_USE_TLS",
                                  "GRPC_SERVER_TLS_CERT",
                                  "GRPC_SERVER_TLS_KEY",
                                  "GRPC_CLIENT_TLS_CACERT",
                                  "GRPC_CLIENT_TLS_SAN"}) {
      envoy_specific_ = envoy_specific_ || env_(name).has_value();
    }
  }

  std::optional<std::string> get(std::string_view name) const {
    if (!envoy_specific_ && std::find(std::begin(kGenericNames), std::end(kGenericNames), name) !=
                                std::end(kGenericNames)) {
      return std::nullopt;
    }
    return env_(name);
  }

  /// Sets `--flag value`, explained as `source -> --flag shown` (shown: value by default).
  void flag(std::string source, std::string_view flag, std::string value,
            std::optional<std::string> shown = std::nullopt) {
    if (!has_flag_(flag)) {
      out_.unhonoured.push_back(source + ": this build has no --" + std::string(flag));
      return;
    }
    out_.mapped.push_back(source + " -> --" + std::string(flag) + " " + shown.value_or(value));
    out_.flags.emplace_back(std::string(flag), std::move(value));
  }

  /// Names `name=value` with the reason; a password (a name ending in _AUTH) is masked.
  void unhonoured(std::string_view name, std::string_view value, std::string_view reason) {
    const bool secret = name.ends_with("_AUTH");
    out_.unhonoured.push_back(std::string(name) + "=" + (secret ? "***" : std::string(value)) +
                              ": " + std::string(reason));
  }

  /// A variable that is set and read, but changes nothing here (logged with the mappings).
  void note(std::string text) { out_.notes.push_back(std::move(text)); }

  EnvoyEnvironment take() { return std::move(out_); }

 private:
  const EnvironmentLookup& env_;
  const std::function<bool(std::string_view)>& has_flag_;
  bool envoy_specific_ = false;  ///< a variable proper to envoyproxy/ratelimit is set
  EnvoyEnvironment out_;
};

std::string joinPath(std::string a, std::string_view b) {
  if (b.empty()) {
    return a;
  }
  if (!a.empty() && a.back() != '/') {
    a += '/';
  }
  while (!b.empty() && b.front() == '/') {
    b.remove_prefix(1);
  }
  return a + std::string(b);
}

/// CONFIG_TYPE=GRPC_XDS_SOTW: the rules come from an xDS management server, with
/// envoyproxy/ratelimit's defaults (server localhost:18000, node "default").
Status mapXds(Mapper& m) {
  auto url = m.get("CONFIG_GRPC_XDS_SERVER_URL");
  m.flag("CONFIG_TYPE=GRPC_XDS_SOTW" + (url ? " + CONFIG_GRPC_XDS_SERVER_URL=" + *url : ""),
         "rules-xds", url.value_or("localhost:18000"));
  for (auto [name, flag] :
       {std::pair{"CONFIG_GRPC_XDS_NODE_ID", "xds-node-id"},
        std::pair{"CONFIG_GRPC_XDS_NODE_METADATA", "xds-node-metadata"},
        std::pair{"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "xds-tls-cert"},
        std::pair{"CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "xds-tls-key"},
        std::pair{"CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "xds-tls-ca"},
        std::pair{"CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds-tls-server-name"},
        std::pair{"XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "xds-max-message-bytes"}}) {
    if (auto value = m.get(name); value && !value->empty()) {
      m.flag(std::string(name) + "=" + *value, flag, *value);
    }
  }
  for (auto [name, flag] : {std::pair{"CONFIG_GRPC_XDS_SERVER_USE_TLS", "xds-tls"},
                            std::pair{"XDS_CLIENT_BACKOFF_JITTER", "xds-backoff-jitter"}}) {
    if (auto value = m.get(name)) {
      auto on = parseGoBool(*value);
      if (!on) {
        return invalid(name, *value, "must be true or false");
      }
      m.flag(std::string(name) + "=" + *value, flag, *on ? "true" : "false");
    }
  }
  for (auto [name, flag] :
       {std::pair{"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "xds-backoff-initial-ms"},
        std::pair{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", "xds-backoff-max-ms"}}) {
    if (auto value = m.get(name)) {
      auto duration = parseGoDuration(*value);
      if (!duration || duration->count() < 1) {
        return invalid(name, *value, "must be a positive Go duration such as 10s");
      }
      m.flag(std::string(name) + "=" + *value, flag, std::to_string(duration->count()));
    }
  }
  if (auto value = m.get("XDS_CLIENT_BACKOFF_RANDOM_FACTOR")) {
    m.flag("XDS_CLIENT_BACKOFF_RANDOM_FACTOR=" + *value, "xds-backoff-random-factor", *value);
  }
  for (std::string_view name :
       {"RUNTIME_ROOT", "RUNTIME_SUBDIRECTORY", "RUNTIME_APPDIRECTORY", "RUNTIME_WATCH_ROOT"}) {
    if (auto value = m.get(name)) {
      // envoyproxy/ratelimit does not read them either in this mode: said, not warned.
      m.note(std::string(name) + "=" + *value +
             " not used: CONFIG_TYPE=GRPC_XDS_SOTW takes the rules from xDS, not files");
    }
  }
  return {};
}

bool xdsRules(const Mapper& m) {
  auto type = m.get("CONFIG_TYPE");
  return type && lower(*type) == "grpc_xds_sotw";
}

Status mapRules(Mapper& m) {
  if (auto type = m.get("CONFIG_TYPE")) {
    const std::string kind = lower(*type);
    if (kind == "grpc_xds_sotw") {
      return mapXds(m);
    }
    if (kind != "file") {
      return invalid("CONFIG_TYPE", *type, "must be FILE or GRPC_XDS_SOTW");
    }
  }
  for (std::string_view name :
       {"CONFIG_GRPC_XDS_SERVER_URL", "CONFIG_GRPC_XDS_NODE_ID", "CONFIG_GRPC_XDS_NODE_METADATA",
        "CONFIG_GRPC_XDS_SERVER_USE_TLS", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
        "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
        "CONFIG_GRPC_XDS_SERVER_TLS_SAN", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
        "XDS_CLIENT_BACKOFF_MAX_INTERVAL", "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
        "XDS_CLIENT_BACKOFF_JITTER", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"}) {
    if (auto value = m.get(name)) {
      m.note(std::string(name) + "=" + *value + " not used: CONFIG_TYPE is FILE");
    }
  }
  auto root = m.get("RUNTIME_ROOT");
  auto sub = m.get("RUNTIME_SUBDIRECTORY");
  auto app = m.get("RUNTIME_APPDIRECTORY");
  if (!root && !sub && !app) {
    return {};
  }
  // envoyproxy/ratelimit loads RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY/*.yaml.
  std::string path = root.value_or("/srv/runtime_data/current");
  path = joinPath(path, sub.value_or(""));
  path = joinPath(path, app.value_or("config"));
  std::string source;
  for (auto [name, value] :
       {std::pair{"RUNTIME_ROOT", root}, std::pair{"RUNTIME_SUBDIRECTORY", sub},
        std::pair{"RUNTIME_APPDIRECTORY", app}}) {
    if (value) {
      source += (source.empty() ? "" : " + ") + std::string(name) + "=" + *value;
    }
  }
  m.flag(source, "rules", path);
  if (auto watch = m.get("RUNTIME_WATCH_ROOT")) {
    // Sluice polls the rules directory's files by path, which follows both a swapped
    // RUNTIME_ROOT symlink and edits in place: either setting works.
    if (!parseGoBool(*watch)) {
      return invalid("RUNTIME_WATCH_ROOT", *watch, "must be true or false");
    }
  }
  return {};
}

Status mapListeners(Mapper& m) {
  auto host = m.get("HOST");
  auto port = m.get("PORT");
  if (host || port) {
    std::string h = host.value_or("0.0.0.0");
    if (h.find(':') != std::string::npos && h.front() != '[') {
      h = "[" + h + "]";
    }
    std::string source = (host ? "HOST=" + *host : std::string()) + (host && port ? " + " : "") +
                         (port ? "PORT=" + *port : std::string());
    m.flag(source, "listen", h + ":" + port.value_or("8080"));
  }
  // envoyproxy/ratelimit serves gRPC on GRPC_UDS when it is set, else on GRPC_HOST:GRPC_PORT
  // (0.0.0.0:8081 by default; it always has a gRPC listener).
  auto uds = m.get("GRPC_UDS");
  auto grpc_host = m.get("GRPC_HOST");
  auto grpc_port = m.get("GRPC_PORT");
  if (uds && !uds->empty()) {
    m.flag("GRPC_UDS=" + *uds, "grpc-listen", "unix:" + *uds);
    if (grpc_host || grpc_port) {
      m.unhonoured(grpc_host ? "GRPC_HOST" : "GRPC_PORT", grpc_host ? *grpc_host : *grpc_port,
                   "GRPC_UDS is set, so gRPC listens on the unix socket only (as envoy does)");
    }
  } else if (grpc_host || grpc_port) {
    std::string h = grpc_host.value_or("0.0.0.0");
    if (h.find(':') != std::string::npos && h.front() != '[') {
      h = "[" + h + "]";
    }
    std::string source = (grpc_host ? "GRPC_HOST=" + *grpc_host : std::string()) +
                         (grpc_host && grpc_port ? " + " : "") +
                         (grpc_port ? "GRPC_PORT=" + *grpc_port : std::string());
    m.flag(source, "grpc-listen", h + ":" + grpc_port.value_or("8081"));
  }
  for (auto [name, flag] :
       {std::pair{"GRPC_MAX_CONNECTION_AGE", "grpc-max-connection-age-ms"},
        std::pair{"GRPC_MAX_CONNECTION_AGE_GRACE", "grpc-max-connection-age-grace-ms"}}) {
    if (auto value = m.get(name)) {
      auto duration = parseGoDuration(*value);
      if (!duration || duration->count() < 1) {
        return invalid(name, *value, "must be a positive Go duration such as 24h or 90s");
      }
      m.flag(std::string(name) + "=" + *value, flag, std::to_string(duration->count()));
    }
  }
  return {};
}

Status mapRedis(Mapper& m) {
  auto type = m.get("REDIS_TYPE");
  auto socket_type = m.get("REDIS_SOCKET_TYPE");
  auto url = m.get("REDIS_URL");
  auto auth = m.get("REDIS_AUTH");
  if (auto prefix = m.get("CACHE_KEY_PREFIX"); prefix && !prefix->empty()) {
    m.flag("CACHE_KEY_PREFIX=" + *prefix, "redis-prefix", *prefix);
  }
  if (auto timeout = m.get("REDIS_TIMEOUT")) {
    auto duration = parseGoDuration(*timeout);
    if (!duration || duration->count() < 1) {
      return invalid("REDIS_TIMEOUT", *timeout, "must be a positive Go duration such as 10s");
    }
    m.flag("REDIS_TIMEOUT=" + *timeout, "redis-timeout-ms", std::to_string(duration->count()));
  }
  if (!type && !socket_type && !url && !auth) {
    return {};
  }
  std::string kind = lower(type.value_or("single"));
  if (kind == "sentinel") {
    m.unhonoured("REDIS_TYPE", *type, "Redis Sentinel is not supported (single or cluster)");
    return {};
  }
  if (kind != "single" && kind != "cluster") {
    return invalid("REDIS_TYPE", *type, "must be SINGLE, CLUSTER or SENTINEL");
  }
  std::string socket = lower(socket_type.value_or("unix"));
  if (socket != "unix" && socket != "tcp") {
    return invalid("REDIS_SOCKET_TYPE", socket_type.value_or(""), "must be tcp or unix");
  }
  // envoyproxy/ratelimit's defaults: a unix socket at /var/run/nutcracker/ratelimit.sock.
  std::string address = url.value_or("/var/run/nutcracker/ratelimit.sock");
  std::string user_info;
  if (auth && !auth->empty()) {
    // "user:password" or a bare password, as envoyproxy/ratelimit reads REDIS_AUTH.
    auto colon = auth->find(':');
    user_info = colon == std::string::npos ? encodeUserInfo(*auth)
                                           : encodeUserInfo(auth->substr(0, colon)) + ":" +
                                                 encodeUserInfo(auth->substr(colon + 1));
    user_info += "@";
  }
  std::string sluice_url;
  if (socket == "unix") {
    if (kind == "cluster") {
      return invalid("REDIS_SOCKET_TYPE", socket_type.value_or("unix"),
                     "a Redis Cluster is reached over tcp");
    }
    sluice_url = "unix://" + user_info + address;
  } else {
    for (std::string_view node : splitList(address)) {
      if (node.empty()) {
        return invalid("REDIS_URL", address, "expected host:port[,host:port...]");
      }
      sluice_url +=
          (sluice_url.empty() ? "" : ",") + std::string("redis://") + user_info + std::string(node);
    }
  }
  std::string source;
  for (auto [name, value] :
       {std::pair{"REDIS_TYPE", type}, std::pair{"REDIS_SOCKET_TYPE", socket_type},
        std::pair{"REDIS_URL", url}}) {
    if (value) {
      source += (source.empty() ? "" : " + ") + std::string(name) + "=" + *value;
    }
  }
  if (auth) {
    source += (source.empty() ? "" : " + ") + std::string("REDIS_AUTH=***");
  }
  m.flag(source, "store", kind == "cluster" ? "redis_cluster" : "redis");
  // The URL may carry a password: logged masked.
  std::string shown = sluice_url;
  if (!user_info.empty()) {
    for (std::size_t at = shown.find(user_info); at != std::string::npos;
         at = shown.find(user_info, at + 4)) {
      shown.replace(at, user_info.size(), "***@");
    }
  }
  m.flag(source, "redis", sluice_url, shown);
  return {};
}

/// LOG_LEVEL and LOG_FORMAT.
Status mapLogging(Mapper& m) {
  if (auto level = m.get("LOG_LEVEL")) {
    std::string v = lower(*level);
    if (v == "warning") {
      v = "warn";
    } else if (v == "fatal" || v == "panic") {
      v = "critical";
    }
    if (v != "trace" && v != "debug" && v != "info" && v != "warn" && v != "error" &&
        v != "critical") {
      return invalid("LOG_LEVEL", *level, "must be trace, debug, info, warn, error or fatal");
    }
    m.flag("LOG_LEVEL=" + *level, "log-level", v);
  }
  if (auto format = m.get("LOG_FORMAT")) {
    std::string v = lower(*format);
    if (v != "text" && v != "json") {
      return invalid("LOG_FORMAT", *format, "must be text or json");
    }
    m.flag("LOG_FORMAT=" + *format, "log-format", v == "json" ? "json" : "plain");
  }
  return {};
}

/// The on/off switches: response headers, envoy's counting, starting without rules,
/// Prometheus, merged domains.
Status mapSwitches(Mapper& m) {
  if (auto headers = m.get("LIMIT_RESPONSE_HEADERS_ENABLED")) {
    auto on = parseGoBool(*headers);
    if (!on) {
      return invalid("LIMIT_RESPONSE_HEADERS_ENABLED", *headers, "must be true or false");
    }
    m.flag("LIMIT_RESPONSE_HEADERS_ENABLED=" + *headers, "grpc-response-headers",
           *on ? "true" : "false");
  }
  if (auto stop = m.get("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT")) {
    auto on = parseGoBool(*stop);
    if (!on) {
      return invalid("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", *stop, "must be true or false");
    }
    m.flag("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=" + *stop, "envoy-charge",
           *on ? "all-or-nothing" : "every");
  }
  if (auto force = m.get("FORCE_START_WITHOUT_INITIAL_CONFIG")) {
    auto on = parseGoBool(*force);
    if (!on) {
      return invalid("FORCE_START_WITHOUT_INITIAL_CONFIG", *force, "must be true or false");
    }
    if (xdsRules(m)) {
      m.flag("FORCE_START_WITHOUT_INITIAL_CONFIG=" + *force, "force-start-without-initial-config",
             *on ? "true" : "false");
    } else if (*on) {
      m.unhonoured("FORCE_START_WITHOUT_INITIAL_CONFIG", *force,
                   "with rules files Sluice starts only with valid rules (an empty rules "
                   "directory is valid)");
    }
  }
  if (auto use = m.get("USE_PROMETHEUS")) {
    auto on = parseGoBool(*use);
    if (!on) {
      return invalid("USE_PROMETHEUS", *use, "must be true or false");
    }
    auto addr = m.get("PROMETHEUS_ADDR");
    if (*on) {
      // envoyproxy/ratelimit's default address is :9090.
      std::string address = addr.value_or(":9090");
      m.flag("USE_PROMETHEUS=" + *use + (addr ? " + PROMETHEUS_ADDR=" + *addr : ""),
             "metrics-listen", address);
    }
  }
  if (auto merge = m.get("MERGE_DOMAIN_CONFIG")) {
    auto on = parseGoBool(*merge);
    if (!on) {
      return invalid("MERGE_DOMAIN_CONFIG", *merge, "must be true or false");
    }
    m.flag("MERGE_DOMAIN_CONFIG=" + *merge, "merge-domain-config", *on ? "true" : "false");
  }
  return {};
}

/// GRPC_SERVER_USE_TLS and its files.
Status mapGrpcTls(Mapper& m) {
  // TLS on the gRPC listener, mutual with GRPC_CLIENT_TLS_CACERT; envoy reads the files only
  // when GRPC_SERVER_USE_TLS is true.
  bool grpc_tls = false;
  if (auto use = m.get("GRPC_SERVER_USE_TLS")) {
    auto on = parseGoBool(*use);
    if (!on) {
      return invalid("GRPC_SERVER_USE_TLS", *use, "must be true or false");
    }
    grpc_tls = *on;
    if (grpc_tls && (!m.get("GRPC_SERVER_TLS_CERT") || !m.get("GRPC_SERVER_TLS_KEY"))) {
      return invalid("GRPC_SERVER_USE_TLS", *use,
                     "needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
    }
  }
  for (auto [name, flag] : {std::pair{"GRPC_SERVER_TLS_CERT", "grpc-tls-cert"},
                            std::pair{"GRPC_SERVER_TLS_KEY", "grpc-tls-key"},
                            std::pair{"GRPC_CLIENT_TLS_CACERT", "grpc-tls-client-ca"},
                            std::pair{"GRPC_CLIENT_TLS_SAN", "grpc-tls-client-san"}}) {
    if (auto value = m.get(name); value && !value->empty()) {
      if (grpc_tls) {
        m.flag(std::string(name) + "=" + *value, flag, *value);
      } else {
        m.unhonoured(name, *value, "GRPC_SERVER_USE_TLS is not true (envoy ignores it too)");
      }
    }
  }
  return {};
}

/// What Sluice reads but does not honour: said once at start, unless harmless.
void mapUnhonoured(Mapper& m) {
  for (const Unhonoured& u : kUnhonoured) {
    auto value = m.get(u.name);
    if (!value) {
      continue;
    }
    bool harmless = false;
    if (!u.harmless.empty()) {
      auto as_bool = parseGoBool(*value);
      auto harmless_bool = parseGoBool(u.harmless);
      harmless = as_bool && harmless_bool ? *as_bool == *harmless_bool
                                          : lower(*value) == lower(u.harmless);
    }
    if (!harmless) {
      m.unhonoured(u.name, *value, u.reason);
    }
  }
}

Status mapMisc(Mapper& m) {
  for (auto map : {mapLogging, mapSwitches, mapGrpcTls}) {
    if (Status status = map(m); !status) {
      return status;
    }
  }
  mapUnhonoured(m);
  return {};
}

}  // namespace

std::optional<std::chrono::milliseconds> parseGoDuration(std::string_view text) {
  if (text == "0") {
    return std::chrono::milliseconds(0);
  }
  if (text.empty()) {
    return std::nullopt;
  }
  double total_ms = 0;
  while (!text.empty()) {
    std::size_t i = 0;
    while (i < text.size() &&
           (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) {
      ++i;
    }
    if (i == 0) {
      return std::nullopt;
    }
    double number = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + i, number);
    if (ec != std::errc() || end != text.data() + i) {
      return std::nullopt;
    }
    text.remove_prefix(i);
    std::size_t j = 0;
    while (j < text.size() && !std::isdigit(static_cast<unsigned char>(text[j])) &&
           text[j] != '.') {
      ++j;
    }
    std::string_view unit = text.substr(0, j);
    text.remove_prefix(j);
    double scale = 0;
    if (unit == "ns") {
      scale = 1e-6;
    } else if (unit == "us" || unit == "\u00b5s" || unit == "\u03bcs") {
      scale = 1e-3;
    } else if (unit == "ms") {
      scale = 1;
    } else if (unit == "s") {
      scale = 1e3;
    } else if (unit == "m") {
      scale = 60e3;
    } else if (unit == "h") {
      scale = 3600e3;
    } else {
      return std::nullopt;
    }
    total_ms += number * scale;
  }
  if (total_ms > 1e15) {
    return std::nullopt;
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(total_ms)));
}

Result<EnvoyEnvironment> mapEnvoyEnvironment(
    const EnvironmentLookup& env, const std::function<bool(std::string_view flag)>& has_flag) {
  Mapper m(env, has_flag);
  for (auto step : {mapRules, mapListeners, mapRedis, mapMisc}) {
    if (auto status = step(m); !status) {
      return status.error();
    }
  }
  return m.take();
}

}  // namespace sluice::app
