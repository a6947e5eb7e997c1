#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/common/flag_registry.hpp"
#include "sluice/common/logging.hpp"
#include "sluice/common/result.hpp"

namespace sluice::app {

/// The operators' flags (docs/operations.md): log format, access log, denied-request events, admin
/// listener. Each is also SLUICE_<NAME> and a key of the --config YAML, like every flag.
struct OperationsOptions {
  LogFormat log_format = LogFormat::kPlain;  ///< --log-format plain|json
  std::string access_log;                    ///< --access-log PATH|- ("" off, the default)
  /// --access-log-format plain|json; nullopt: as --log-format.
  std::optional<LogFormat> access_log_format;
  bool events = false;                           ///< --events redis-stream|off (default off)
  std::string events_redis;                      ///< --events-redis URL ("" : the store's --redis)
  std::string events_stream = "sluice:denials";  ///< --events-stream NAME
  std::size_t events_maxlen = 100'000;           ///< --events-maxlen N (XADD MAXLEN ~ N)
  bool admin = false;  ///< --admin-listen HOST:PORT|PORT|unix:PATH|off (default off)
  std::string admin_host = "127.0.0.1";
  std::uint16_t admin_port = 0;
  std::string admin_socket;             ///< --admin-listen unix:PATH ("" : TCP)
  unsigned admin_socket_mode = 0600;    ///< --admin-socket-mode: permissions of that socket
  std::string admin_token_file;         ///< --admin-token-file PATH ("" : no token asked)
  std::string overrides_file;           ///< --overrides-file PATH (memory store; "" : in memory)
  std::size_t max_overrides = 10'000;   ///< --max-overrides N
  std::int64_t top_window_ms = 60'000;  ///< --top-window-ms MS (GET /limits/top)
  std::size_t top_capacity = 100;       ///< --top-capacity N (Space-Saving counters)
};

/// Adds the operators' flags ("Operations" in --help), bound to `options`.
void addOperationsFlags(FlagRegistry& registry, OperationsOptions& options);

/// Applies one of those flags by its name without dashes ("log-format", "admin-listen",
/// ...). A bare PORT for --admin-listen binds 127.0.0.1. Errors (kInvalidArgument) say what
/// is wrong.
Status applyOperationsOption(OperationsOptions& options, std::string_view name,
                             std::string_view value);

}  // namespace sluice::app
