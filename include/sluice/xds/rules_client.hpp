#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/rules/rate_limit_config.hpp"

/// The rules' second source: an xDS management server, State of the World over the aggregated
/// discovery service (docs/envoy.md, "Rules over xDS"). This module speaks the protocol; what
/// a set of resources becomes is the rules module's (loadRateLimitConfigs), and where it goes
/// is the app's (the callback).
namespace sluice::xds {

/// The resource type Sluice subscribes to.
inline constexpr std::string_view kRateLimitConfigType =
    "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";

/// Reconnection backoff, envoyproxy/ratelimit's XDS_CLIENT_BACKOFF_* settings: attempt n
/// (0-based) waits initial x 2^n, at most `max`; with `jitter` the wait is drawn uniformly from
/// [wait x (1 - random_factor), wait x (1 + random_factor)], still at most `max`.
struct BackoffOptions {
  std::chrono::milliseconds initial{10'000};
  std::chrono::milliseconds max{60'000};
  double random_factor = 0.5;
  bool jitter = true;
};

/// The delays between connection attempts. Pure: the randomness is passed in.
class Backoff {
 public:
  /// `random01` returns a number in [0, 1); called once per delay when jitter is on.
  Backoff(BackoffOptions options, std::function<double()> random01);
  /// The delay before the next attempt; each call is one more failure.
  std::chrono::milliseconds next();
  /// After a successful stream: the next delay is `initial` again.
  void reset() { attempt_ = 0; }

 private:
  BackoffOptions options_;
  std::function<double()> random01_;
  int attempt_ = 0;
};

/// TLS towards the management server (envoyproxy/ratelimit's CONFIG_GRPC_XDS_SERVER_USE_TLS
/// and CONFIG_GRPC_XDS_*_TLS_*): the server's certificate is checked against `ca_file` (the
/// system's roots when empty) and its name against `server_name` (else the host of `server`);
/// `cert_file` + `key_file` are the client's certificate for mutual TLS.
struct TlsOptions {
  bool enabled = false;
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  std::string server_name;
};

struct ClientOptions {
  std::string server;  ///< HOST:PORT of the management server
  std::string node_id = "default";
  /// Node metadata, string values (CONFIG_GRPC_XDS_NODE_METADATA "k1=v1,k2=v2").
  std::vector<std::pair<std::string, std::string>> node_metadata;
  BackoffOptions backoff;
  TlsOptions tls;
  /// Largest DiscoveryResponse accepted; a larger one breaks the stream (gRPC
  /// RESOURCE_EXHAUSTED), which is then retried with backoff.
  std::size_t max_message_bytes = 16U * 1024U * 1024U;
};

/// What the app did with one response's resources.
struct ApplyOutcome {
  bool accepted = false;
  std::string error_detail;  ///< why not, for the NACK (every validator message, one per line)
};

/// Called with each response's version_info and resources (already unpacked); runs on the
/// client's thread, one call at a time.
using ApplyConfigs =
    std::function<ApplyOutcome(const std::string& version, std::vector<RateLimitConfigResource>)>;

/// Waits between attempts; injected so that a test runs the client on a ManualClock.
class Sleeper {
 public:
  virtual ~Sleeper() = default;
  /// Waits `delay`; returns false when woken by wake() (the client is stopping).
  virtual bool sleepFor(std::chrono::milliseconds delay) = 0;
  /// Ends the current and every later sleepFor() at once.
  virtual void wake() = 0;
};
std::unique_ptr<Sleeper> makeRealSleeper();

/// The ADS client: one stream at a time, kept open; every response is converted, handed to
/// `apply`, and ACKed (version_info + response_nonce) or NACKed (the previous version, the
/// nonce, error_detail). A response that cannot be read as RateLimitConfig resources (another
/// type URL, a resource that fails to unpack, a field this build does not know) is NACKed
/// without calling `apply`. A broken stream is reopened after a Backoff delay, with the version
/// last accepted.
///
/// Metrics: gauge `rules_xds_connected` (1 while a stream is open), counter
/// `rules_xds_updates_total{result="accepted|rejected"}`, gauge
/// `rules_xds_last_update_timestamp_seconds` (wall clock of the last accepted update; 0 before),
/// counter `rules_xds_stream_failures_total`.
///
/// Thread safety: start() and stop() from one thread; the client runs on a thread of its own.
class RulesClient {
 public:
  virtual ~RulesClient() = default;
  /// Checks the options (TLS files readable) and starts connecting. An error names the option.
  virtual Status start() = 0;
  /// Cancels the stream and joins the client's thread. Idempotent.
  virtual void stop() = 0;
};

/// `clock` stamps the metrics; `sleeper` waits between attempts (null: the real one);
/// `random01` draws the jitter (null: a seeded generator). All must outlive the client.
std::unique_ptr<RulesClient> makeRulesClient(ClientOptions options, ApplyConfigs apply,
                                             Metrics& metrics, const Clock& clock,
                                             std::unique_ptr<Sleeper> sleeper = nullptr,
                                             std::function<double()> random01 = nullptr);

/// Parses CONFIG_GRPC_XDS_NODE_METADATA: "k1=v1,k2=v2" (envoyproxy/ratelimit ignores an entry
/// without '='; so does Sluice).
std::vector<std::pair<std::string, std::string>> parseNodeMetadata(std::string_view text);

}  // namespace sluice::xds
