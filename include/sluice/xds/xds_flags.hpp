#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "sluice/common/flag_registry.hpp"

namespace sluice::xds {

/// The rules' xDS source (the "Rules over xDS" flags of --help; docs/envoy.md, "Rules over
/// xDS"). `rules_xds` empty: the rules come from files.
struct XdsSettings {
  std::string rules_xds;  ///< --rules-xds HOST:PORT
  std::string xds_node_id = "default";
  std::string xds_node_metadata;  ///< "k1=v1,k2=v2"
  std::chrono::milliseconds xds_backoff_initial{10'000};
  std::chrono::milliseconds xds_backoff_max{60'000};
  double xds_backoff_random_factor = 0.5;
  bool xds_backoff_jitter = true;
  bool xds_tls = false;
  std::string xds_tls_ca;
  std::string xds_tls_cert;
  std::string xds_tls_key;
  std::string xds_tls_server_name;
  std::size_t xds_max_message_bytes = 16U * 1024U * 1024U;
  /// Serve (with no rules) before the first set arrives; otherwise not ready until then.
  bool force_start_without_rules = false;
};

/// Adds --rules-xds and the --xds-* flags, bound to `settings`.
void addXdsFlags(FlagRegistry& registry, XdsSettings& settings);

}  // namespace sluice::xds
