#pragma once

#include <string>

#include "envoy/service/discovery/v3/discovery.pb.h"
#include "sluice/xds/rules_client.hpp"

namespace sluice::xds {

/// One ADS subscription to RateLimitConfig, State of the World: what to send first on a stream
/// and how to answer each response. No I/O: the client feeds it what the stream reads.
class SotwSubscription {
 public:
  SotwSubscription(const ClientOptions& options, ApplyConfigs apply);

  /// The first request of a stream: node, type URL, and the version last accepted (empty
  /// before the first), no nonce.
  envoy::service::discovery::v3::DiscoveryRequest firstRequest() const;

  /// Converts and applies one response; returns the ACK or NACK to send.
  envoy::service::discovery::v3::DiscoveryRequest onResponse(
      const envoy::service::discovery::v3::DiscoveryResponse& response);

  const std::string& acceptedVersion() const { return accepted_version_; }
  /// The last answer was a NACK; `lastError()` says why.
  bool lastRejected() const { return last_rejected_; }
  const std::string& lastError() const { return last_error_; }

 private:
  envoy::service::discovery::v3::DiscoveryRequest request() const;

  envoy::config::core::v3::Node node_;
  ApplyConfigs apply_;
  std::string accepted_version_;
  bool last_rejected_ = false;
  std::string last_error_;
};

/// Converts one response's resources; an error (type URL, unpacking, an unknown field) names
/// the resource by index and name.
Result<std::vector<RateLimitConfigResource>> unpackResources(
    const envoy::service::discovery::v3::DiscoveryResponse& response);

}  // namespace sluice::xds
