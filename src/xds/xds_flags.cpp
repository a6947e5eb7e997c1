#include "sluice/xds/xds_flags.hpp"

#include <charconv>

namespace sluice::xds {

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addXdsFlags(FlagRegistry& registry, XdsSettings& s) {
  namespace set = flag_setters;
  using std::chrono::milliseconds;
  registry.section("Rules over xDS");
  registry.add({.name = "rules-xds",
                .metavar = "HOST:PORT",
                .help = "take the rules from this xDS management server (State of the World "
                        "over ADS, RateLimitConfig resources) instead of files (default off)",
                .set = set::text(s.rules_xds),
                .envoy_variables = "CONFIG_TYPE=GRPC_XDS_SOTW, CONFIG_GRPC_XDS_SERVER_URL"});
  registry.add({.name = "xds-node-id",
                .metavar = "ID",
                .help = "the node id sent to the server (default \"default\")",
                .set = set::text(s.xds_node_id),
                .envoy_variables = "CONFIG_GRPC_XDS_NODE_ID"});
  registry.add({.name = "xds-node-metadata",
                .metavar = "K=V,...",
                .help = "the node's metadata, string values (default none)",
                .set = set::text(s.xds_node_metadata),
                .envoy_variables = "CONFIG_GRPC_XDS_NODE_METADATA"});
  registry.add(
      {.name = "xds-backoff-initial-ms",
       .metavar = "MS",
       .help = "first reconnection delay (default 10000)",
       .set = set::milliseconds(s.xds_backoff_initial, milliseconds(1), milliseconds(3'600'000)),
       .envoy_variables = "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL"});
  registry.add(
      {.name = "xds-backoff-max-ms",
       .metavar = "MS",
       .help = "longest reconnection delay (default 60000)",
       .set = set::milliseconds(s.xds_backoff_max, milliseconds(1), milliseconds(3'600'000)),
       .envoy_variables = "XDS_CLIENT_BACKOFF_MAX_INTERVAL"});
  registry.add(
      {.name = "xds-backoff-random-factor",
       .metavar = "F",
       .help = "each delay is drawn within +-F of itself, 0 to 1 (default 0.5)",
       .set = [&s](std::string_view v) -> Status {
         double f = -1;
         auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), f);
         if (v.empty() || ec != std::errc() || end != v.data() + v.size() || f < 0 || f > 1) {
           return makeError(ErrorKind::kInvalidArgument,
                            "must be a number from 0 to 1, got \"" + std::string(v) + "\"");
         }
         s.xds_backoff_random_factor = f;
         return {};
       },
       .envoy_variables = "XDS_CLIENT_BACKOFF_RANDOM_FACTOR"});
  registry.add({.name = "xds-backoff-jitter",
                .metavar = "BOOL",
                .help = "randomize the delays (default true)",
                .set = set::boolean(s.xds_backoff_jitter),
                .envoy_variables = "XDS_CLIENT_BACKOFF_JITTER"});
  registry.add({.name = "xds-tls",
                .metavar = "BOOL",
                .help = "connect to the server over TLS (default false)",
                .set = set::boolean(s.xds_tls),
                .envoy_variables = "CONFIG_GRPC_XDS_SERVER_USE_TLS"});
  registry.add({.name = "xds-tls-ca",
                .metavar = "FILE",
                .help = "CA bundle the server's certificate must chain to (default: the "
                        "system's)",
                .set = set::text(s.xds_tls_ca),
                .envoy_variables = "CONFIG_GRPC_XDS_SERVER_TLS_CACERT"});
  registry.add({.name = "xds-tls-cert",
                .metavar = "FILE",
                .help = "client certificate, for mutual TLS (default none)",
                .set = set::text(s.xds_tls_cert),
                .envoy_variables = "CONFIG_GRPC_XDS_CLIENT_TLS_CERT"});
  registry.add({.name = "xds-tls-key",
                .metavar = "FILE",
                .help = "the client certificate's key (default none)",
                .set = set::text(s.xds_tls_key),
                .envoy_variables = "CONFIG_GRPC_XDS_CLIENT_TLS_KEY"});
  registry.add({.name = "xds-tls-server-name",
                .metavar = "NAME",
                .help = "the name the server's certificate must carry (default: the host of "
                        "--rules-xds)",
                .set = set::text(s.xds_tls_server_name),
                .envoy_variables = "CONFIG_GRPC_XDS_SERVER_TLS_SAN"});
  registry.add({.name = "xds-max-message-bytes",
                .metavar = "N",
                .help = "largest response accepted (default 16777216)",
                .set = set::integer<std::size_t>(s.xds_max_message_bytes, 1024, 1U << 30),
                .envoy_variables = "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"});
  registry.add({.name = "force-start-without-initial-config",
                .metavar = "BOOL",
                .help = "serve with no rules until the first set arrives; by default /readyz "
                        "is 503 until then (default false)",
                .set = set::boolean(s.force_start_without_rules),
                .envoy_variables = "FORCE_START_WITHOUT_INITIAL_CONFIG"});
}

}  // namespace sluice::xds
