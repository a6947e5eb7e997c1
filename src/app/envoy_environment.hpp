#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/common/flag_registry.hpp"
#include "sluice/common/result.hpp"

/// envoyproxy/ratelimit's environment variables (its README's settings), so that its
/// container manifests run Sluice unchanged: each variable that is set is mapped onto a
/// Sluice flag, or named as one Sluice cannot honour.
namespace sluice::app {

/// What the environment asks for, in Sluice's terms.
struct EnvoyEnvironment {
  /// (flag name without "--", value), applied after SLUICE_* variables (which container
  /// images set as their defaults): defaults < --config file < SLUICE_* variables < envoy
  /// variables < flags.
  std::vector<std::pair<std::string, std::string>> flags;
  /// One entry per mapping, e.g. "PORT=8080 -> --listen 0.0.0.0:8080" (logged once at
  /// start-up, on one line).
  std::vector<std::string> mapped;
  /// One entry per variable set that Sluice does not honour, with the reason (each logged
  /// as a warning at start-up).
  std::vector<std::string> unhonoured;
  /// Variables that are set and understood but change nothing in the chosen mode (e.g.
  /// RUNTIME_ROOT with CONFIG_TYPE=GRPC_XDS_SOTW), logged after the mappings.
  std::vector<std::string> notes;

  bool empty() const { return mapped.empty() && unhonoured.empty() && notes.empty(); }
};

/// Reads an environment variable; nullopt when unset.
using sluice::EnvironmentLookup;

/// Maps every envoyproxy/ratelimit variable that is set. HOST, PORT, LOG_LEVEL and LOG_FORMAT
/// are so common that they are read only when a variable proper to envoyproxy/ratelimit
/// (RUNTIME_ROOT, REDIS_URL, GRPC_PORT, ...) is set too. `has_flag` tells whether this build
/// has a flag (a variable whose flag is missing is reported as unhonoured). Errors
/// (kInvalidArgument) name the variable and its value: a bad number, duration or boolean,
/// an unknown REDIS_TYPE / REDIS_SOCKET_TYPE.
Result<EnvoyEnvironment> mapEnvoyEnvironment(
    const EnvironmentLookup& env, const std::function<bool(std::string_view flag)>& has_flag);

/// Parses a Go duration ("24h", "1h30m", "250ms", "1.5s"). nullopt when malformed.
std::optional<std::chrono::milliseconds> parseGoDuration(std::string_view text);

}  // namespace sluice::app
