#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "http/forward_auth_config.hpp"
#include "http/server.hpp"
#include "sluice/common/flag_registry.hpp"

namespace sluice::http {

/// The HTTP listener's settings as the flags give them (the "HTTP" and "Forward auth" flags
/// of --help); the app turns them into ServerOptions.
struct HttpSettings {
  /// --listen: TCP addresses and unix sockets, all served alike (default 127.0.0.1:8080).
  std::vector<ListenAddress> listen{ListenAddress{}};
  unsigned listen_mode = 0660;  ///< --listen-mode: permissions of the unix socket files
  unsigned threads = 0;         ///< 0: one per core
  std::size_t max_body_bytes = 1 << 20;
  std::chrono::milliseconds drain_timeout{30'000};
  std::chrono::milliseconds request_timeout{10'000};
  std::chrono::milliseconds idle_timeout{60'000};
  ForwardAuthConfig forward_auth;  ///< `forward_auth:` of the server YAML, then the flags
};

/// Adds the HTTP listener's flags and the forward-auth ones, bound to `settings`.
void addHttpFlags(FlagRegistry& registry, HttpSettings& settings);

/// A comma-separated list of listen addresses: "HOST:PORT" or "unix:PATH" (an absolute or
/// relative path, without commas), e.g. "127.0.0.1:8080,unix:/run/sluice/sluice.sock".
/// Errors name the element; an address given twice is an error.
Result<std::vector<ListenAddress>> parseListenAddresses(std::string_view text);

}  // namespace sluice::http
