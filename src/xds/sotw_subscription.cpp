#include "xds/sotw_subscription.hpp"

#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/json_util.h>

#include <utility>

#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"

namespace sluice::xds {
namespace {

namespace pb = ::ratelimit::config::ratelimit::v3;
namespace discovery = ::envoy::service::discovery::v3;

/// A field this build's rls_conf.proto does not know (a newer management server's): refused,
/// because ignoring it would decide differently from what the server meant.
std::string unknownFields(const google::protobuf::Message& message, const std::string& path) {
  const auto& unknown = message.GetReflection()->GetUnknownFields(message);
  if (unknown.empty()) {
    return {};
  }
  return path + ": unknown field number " + std::to_string(unknown.field(0).number()) +
         " (not in this build's RateLimitConfig; refusing rather than ignoring it)";
}

Result<RateLimitDescriptorConfig> convert(const pb::RateLimitDescriptor& in,
                                          const std::string& path) {
  if (auto error = unknownFields(in, path); !error.empty()) {
    return makeError(ErrorKind::kInvalidArgument, error);
  }
  RateLimitDescriptorConfig out;
  out.key = in.key();
  out.value = in.value();
  out.shadow_mode = in.shadow_mode();
  out.detailed_metric = in.detailed_metric();
  out.quota_mode = in.quota_mode();
  if (in.has_rate_limit()) {
    const pb::RateLimitPolicy& policy = in.rate_limit();
    if (auto error = unknownFields(policy, path + ".rate_limit"); !error.empty()) {
      return makeError(ErrorKind::kInvalidArgument, error);
    }
    RateLimitPolicyConfig limit;
    limit.unit = static_cast<int>(policy.unit());
    limit.requests_per_unit = policy.requests_per_unit();
    limit.unlimited = policy.unlimited();
    limit.name = policy.name();
    for (const pb::RateLimitReplace& replace : policy.replaces()) {
      limit.replaces.push_back(replace.name());
    }
    out.rate_limit = std::move(limit);
  }
  if (in.has_metadata()) {
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    std::string json;
    if (auto status = google::protobuf::util::MessageToJsonString(in.metadata(), &json, options);
        !status.ok()) {
      return makeError(ErrorKind::kInvalidArgument,
                       path + ".metadata: " + std::string(status.message()));
    }
    out.metadata_json = std::move(json);
  }
  for (int i = 0; i < in.descriptors_size(); ++i) {
    auto child = convert(in.descriptors(i), path + ".descriptors[" + std::to_string(i) + "]");
    if (!child) {
      return child.error();
    }
    out.descriptors.push_back(std::move(*child));
  }
  return out;
}

}  // namespace

Result<std::vector<RateLimitConfigResource>> unpackResources(
    const discovery::DiscoveryResponse& response) {
  if (response.type_url() != kRateLimitConfigType) {
    return makeError(ErrorKind::kInvalidArgument, "response type_url '" + response.type_url() +
                                                      "': expected '" +
                                                      std::string(kRateLimitConfigType) + "'");
  }
  std::vector<RateLimitConfigResource> out;
  out.reserve(static_cast<std::size_t>(response.resources_size()));
  for (int i = 0; i < response.resources_size(); ++i) {
    const auto& any = response.resources(i);
    const std::string at = "resources[" + std::to_string(i) + "]";
    if (any.type_url() != kRateLimitConfigType) {
      return makeError(ErrorKind::kInvalidArgument, at + " has type_url '" + any.type_url() +
                                                        "': expected '" +
                                                        std::string(kRateLimitConfigType) + "'");
    }
    pb::RateLimitConfig config;
    if (!any.UnpackTo(&config)) {
      return makeError(ErrorKind::kInvalidArgument, at + " does not parse as a RateLimitConfig (" +
                                                        std::to_string(any.value().size()) +
                                                        " bytes)");
    }
    const std::string path = "RateLimitConfig \"" + config.name() + "\" (" + at + ")";
    if (auto error = unknownFields(config, path); !error.empty()) {
      return makeError(ErrorKind::kInvalidArgument, error);
    }
    RateLimitConfigResource resource;
    resource.name = config.name();
    resource.domain = config.domain();
    for (int d = 0; d < config.descriptors_size(); ++d) {
      auto descriptor =
          convert(config.descriptors(d), path + " descriptors[" + std::to_string(d) + "]");
      if (!descriptor) {
        return descriptor.error();
      }
      resource.descriptors.push_back(std::move(*descriptor));
    }
    out.push_back(std::move(resource));
  }
  return out;
}

SotwSubscription::SotwSubscription(const ClientOptions& options, ApplyConfigs apply)
    : apply_(std::move(apply)) {
  node_.set_id(options.node_id);
  node_.set_user_agent_name("sluice");
  node_.set_user_agent_version(SLUICE_VERSION);
  auto& fields = *node_.mutable_metadata()->mutable_fields();
  for (const auto& [key, value] : options.node_metadata) {
    fields[key].set_string_value(value);
  }
}

discovery::DiscoveryRequest SotwSubscription::request() const {
  discovery::DiscoveryRequest request;
  *request.mutable_node() = node_;
  request.set_type_url(std::string(kRateLimitConfigType));
  request.set_version_info(accepted_version_);
  return request;
}

discovery::DiscoveryRequest SotwSubscription::firstRequest() const { return request(); }

discovery::DiscoveryRequest SotwSubscription::onResponse(
    const discovery::DiscoveryResponse& response) {
  std::string error;
  if (auto resources = unpackResources(response); !resources) {
    error = resources.error().message;
  } else {
    ApplyOutcome outcome = apply_(response.version_info(), std::move(*resources));
    if (outcome.accepted) {
      accepted_version_ = response.version_info();
    } else {
      error = std::move(outcome.error_detail);
    }
  }
  discovery::DiscoveryRequest answer = request();
  answer.set_response_nonce(response.nonce());
  last_rejected_ = !error.empty();
  if (last_rejected_) {
    answer.mutable_error_detail()->set_code(3);  // google.rpc.Code INVALID_ARGUMENT
    answer.mutable_error_detail()->set_message(error);
  }
  last_error_ = std::move(error);
  return answer;
}

}  // namespace sluice::xds
