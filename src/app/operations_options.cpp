#include "app/operations_options.hpp"

namespace sluice::app {
namespace {

constexpr std::size_t kMaxStreamLength = std::size_t{1} << 40;
constexpr std::int64_t kMaxTopWindowMs = 24LL * 3600 * 1000;
constexpr std::size_t kMaxTopCapacity = 10'000;
constexpr std::size_t kMaxOverrides = 1'000'000;

Status setLogFormat(OperationsOptions& options, std::string_view value) {
  auto format = parseLogFormat(value);
  if (!format) {
    return format.error();
  }
  options.log_format = *format;
  return {};
}

Status setEvents(OperationsOptions& options, std::string_view value) {
  if (value != "redis-stream" && value != "off") {
    return makeError(ErrorKind::kInvalidArgument,
                     "must be redis-stream or off, got \"" + std::string(value) + "\"");
  }
  options.events = value == "redis-stream";
  return {};
}

/// "off", "HOST:PORT", a bare PORT, which stays on loopback, or "unix:PATH".
Status setAdminListen(OperationsOptions& options, std::string_view value) {
  if (value == "off") {
    options.admin = false;
    return {};
  }
  if (value.starts_with("unix:")) {
    auto targets = parseListenList(value, ListenListRules{});
    if (!targets) {
      return targets.error();
    }
    if (targets->size() != 1 || !targets->front().unix_socket) {
      return makeError(ErrorKind::kInvalidArgument,
                       "must be one address: HOST:PORT, PORT or unix:PATH");
    }
    options.admin_socket = targets->front().path;
    options.admin = true;
    return {};
  }
  options.admin_socket.clear();
  const std::string text = value.find(':') == std::string_view::npos
                               ? "127.0.0.1:" + std::string(value)
                               : std::string(value);
  auto address = parseHostPort(text);
  if (!address) {
    return address.error();
  }
  options.admin_host = std::move(address->host);
  options.admin_port = address->port;
  options.admin = true;
  return {};
}

}  // namespace

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addOperationsFlags(FlagRegistry& registry, OperationsOptions& o) {
  namespace set = flag_setters;
  registry.section("Operations (docs/operations.md)");
  registry.add({.name = "log-format",
                .metavar = "FORMAT",
                .help = "plain | json: one JSON object per log line (default plain)",
                .set = [&o](std::string_view v) { return setLogFormat(o, v); },
                .envoy_variables = "LOG_FORMAT"});
  registry.add({.name = "access-log",
                .metavar = "PATH",
                .help = "one line per decision to PATH, - for stdout (default off)",
                .set = [&o](std::string_view v) -> Status {
                  o.access_log = v == "off" ? std::string() : std::string(v);
                  return {};
                }});
  registry.add({.name = "access-log-format",
                .metavar = "FORMAT",
                .help = "plain | json: json is the line `sluice simulate` replays (default: "
                        "--log-format)",
                .set = [&o](std::string_view v) -> Status {
                  auto format = parseLogFormat(v);
                  if (!format) {
                    return format.error();
                  }
                  o.access_log_format = *format;
                  return {};
                }});
  registry.add({.name = "events",
                .metavar = "KIND",
                .help = "redis-stream: append each denial to a Redis Stream (default off)",
                .set = [&o](std::string_view v) { return setEvents(o, v); }});
  registry.add({.name = "events-redis",
                .metavar = "URL",
                .help = "Redis of the events stream (default: --redis)",
                .set = set::text(o.events_redis)});
  registry.add({.name = "events-stream",
                .metavar = "NAME",
                .help = "stream key of the events (default sluice:denials)",
                .set = set::text(o.events_stream)});
  registry.add({.name = "events-maxlen",
                .metavar = "N",
                .help = "XADD MAXLEN ~ N caps the stream (default 100000)",
                .set = set::integer<std::size_t>(o.events_maxlen, 1, kMaxStreamLength)});
  registry.add({.name = "admin-listen",
                .metavar = "ADDRESS",
                .help = "admin listener: DELETE /limits, /limits/overrides, GET /limits/top plus "
                        "the read-only views; HOST:PORT, a bare PORT (binds 127.0.0.1) or "
                        "unix:PATH (default off)",
                .set = [&o](std::string_view v) { return setAdminListen(o, v); }});
  registry.add({.name = "admin-socket-mode",
                .metavar = "MODE",
                .help = "octal permissions of --admin-listen unix:PATH (default 0600)",
                .set = set::fileMode(o.admin_socket_mode)});
  registry.add({.name = "admin-token-file",
                .metavar = "PATH",
                .help = "the admin listener asks every request for Authorization: Bearer <the "
                        "token in PATH>, re-read when the file changes (default: no token)",
                .set = set::text(o.admin_token_file)});
  registry.add({.name = "overrides-file",
                .metavar = "PATH",
                .help = "--store memory: where runtime overrides are kept, written atomically "
                        "and read at start (default: in memory only)",
                .set = set::text(o.overrides_file)});
  registry.add({.name = "max-overrides",
                .metavar = "N",
                .help = "runtime overrides a store keeps at most (default 10000)",
                .set = set::integer<std::size_t>(o.max_overrides, 1, kMaxOverrides)});
  registry.add({.name = "top-window-ms",
                .metavar = "MS",
                .help = "GET /limits/top: window of the most-denied counts; the answer covers "
                        "the previous and the current window (default 60000)",
                .set = set::integer<std::int64_t>(o.top_window_ms, 1000, kMaxTopWindowMs)});
  registry.add({.name = "top-capacity",
                .metavar = "N",
                .help = "GET /limits/top: clients counted per rule, window and I/O thread; "
                        "counts are within denials/N (default 100)",
                .set = set::integer<std::size_t>(o.top_capacity, 1, kMaxTopCapacity)});
}

Status applyOperationsOption(OperationsOptions& options, std::string_view name,
                             std::string_view value) {
  FlagRegistry registry;
  addOperationsFlags(registry, options);
  const Flag* flag = registry.find(name);
  if (flag == nullptr) {
    return makeError(ErrorKind::kInvalidArgument,
                     "unknown operations option \"" + std::string(name) + "\"");
  }
  return flag->set(value);
}

}  // namespace sluice::app
