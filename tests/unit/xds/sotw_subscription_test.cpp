#include "xds/sotw_subscription.hpp"

#include <gtest/gtest.h>

#include "ratelimit/config/ratelimit/v3/rls_conf.pb.h"

namespace sluice::xds {
namespace {

namespace discovery = ::envoy::service::discovery::v3;
namespace pb = ::ratelimit::config::ratelimit::v3;

discovery::DiscoveryResponse responseWith(const std::vector<pb::RateLimitConfig>& configs,
                                          const std::string& version, const std::string& nonce) {
  discovery::DiscoveryResponse response;
  response.set_version_info(version);
  response.set_nonce(nonce);
  response.set_type_url(std::string(kRateLimitConfigType));
  for (const auto& config : configs) {
    response.add_resources()->PackFrom(config);
  }
  return response;
}

pb::RateLimitConfig sample() {
  pb::RateLimitConfig config;
  config.set_name("gw/policy");
  config.set_domain("gw");
  auto* d = config.add_descriptors();
  d->set_key("route");
  d->set_value("r1");
  d->set_shadow_mode(true);
  auto* policy = d->mutable_rate_limit();
  policy->set_unit(pb::MINUTE);
  policy->set_requests_per_unit(5);
  policy->set_name("per-route");
  (*d->mutable_metadata()->mutable_fields())["team"].set_string_value("a");
  return config;
}

class SotwSubscriptionTest : public ::testing::Test {
 protected:
  SotwSubscriptionTest() {
    options_.node_id = "envoy-ratelimit";
    options_.node_metadata = {{"cluster", "gw"}};
  }

  SotwSubscription subscription() {
    return SotwSubscription(options_, [this](const std::string& version,
                                             std::vector<RateLimitConfigResource> resources) {
      versions_.push_back(version);
      received_ = std::move(resources);
      return outcome_;
    });
  }

  ClientOptions options_;
  ApplyOutcome outcome_{true, {}};
  std::vector<std::string> versions_;
  std::vector<RateLimitConfigResource> received_;
};

TEST_F(SotwSubscriptionTest, FirstRequestCarriesNodeAndTypeWithoutVersion) {
  auto s = subscription();
  const auto request = s.firstRequest();
  EXPECT_EQ(request.type_url(), kRateLimitConfigType);
  EXPECT_EQ(request.node().id(), "envoy-ratelimit");
  EXPECT_EQ(request.node().metadata().fields().at("cluster").string_value(), "gw");
  EXPECT_EQ(request.version_info(), "");
  EXPECT_EQ(request.response_nonce(), "");
  EXPECT_FALSE(request.has_error_detail());
}

TEST_F(SotwSubscriptionTest, AcksWithVersionAndNonceAndConvertsEveryField) {
  auto s = subscription();
  const auto ack = s.onResponse(responseWith({sample()}, "v1", "n1"));
  EXPECT_EQ(ack.version_info(), "v1");
  EXPECT_EQ(ack.response_nonce(), "n1");
  EXPECT_FALSE(ack.has_error_detail());
  ASSERT_EQ(received_.size(), 1u);
  EXPECT_EQ(received_[0].name, "gw/policy");
  EXPECT_EQ(received_[0].domain, "gw");
  const RateLimitDescriptorConfig& d = received_[0].descriptors.at(0);
  EXPECT_EQ(d.key, "route");
  EXPECT_EQ(d.value, "r1");
  EXPECT_TRUE(d.shadow_mode);
  ASSERT_TRUE(d.rate_limit);
  EXPECT_EQ(d.rate_limit->unit, 2);
  EXPECT_EQ(d.rate_limit->requests_per_unit, 5u);
  EXPECT_EQ(d.rate_limit->name, "per-route");
  EXPECT_EQ(d.metadata_json, R"({"team":"a"})");
  // Reconnecting re-subscribes with the version held.
  EXPECT_EQ(s.firstRequest().version_info(), "v1");
}

TEST_F(SotwSubscriptionTest, NacksWithThePreviousVersionAndTheDetail) {
  auto s = subscription();
  s.onResponse(responseWith({sample()}, "v1", "n1"));
  outcome_ = {false, "RateLimitConfig \"x\" domain: 'domain' must not be empty"};
  const auto nack = s.onResponse(responseWith({sample()}, "v2", "n2"));
  EXPECT_EQ(nack.version_info(), "v1");
  EXPECT_EQ(nack.response_nonce(), "n2");
  ASSERT_TRUE(nack.has_error_detail());
  EXPECT_EQ(nack.error_detail().code(), 3);
  EXPECT_EQ(nack.error_detail().message(), outcome_.error_detail);
  EXPECT_EQ(s.acceptedVersion(), "v1");
}

TEST_F(SotwSubscriptionTest, NacksAnUnknownTypeUrlWithoutApplying) {
  auto s = subscription();
  auto response = responseWith({sample()}, "v1", "n1");
  response.set_type_url("type.googleapis.com/envoy.config.cluster.v3.Cluster");
  const auto nack = s.onResponse(response);
  EXPECT_TRUE(versions_.empty());
  EXPECT_NE(nack.error_detail().message().find("expected 'type.googleapis.com/"),
            std::string::npos);
}

TEST_F(SotwSubscriptionTest, NacksAResourceThatFailsToUnpack) {
  auto s = subscription();
  auto response = responseWith({sample()}, "v1", "n1");
  response.mutable_resources(0)->set_value("\xff\xff\xff");
  const auto nack = s.onResponse(response);
  EXPECT_TRUE(versions_.empty());
  EXPECT_EQ(nack.error_detail().message(),
            "resources[0] does not parse as a RateLimitConfig (3 bytes)");
}

TEST_F(SotwSubscriptionTest, NacksAFieldThisBuildDoesNotKnow) {
  auto s = subscription();
  pb::RateLimitConfig config = sample();
  // Field 9 of RateLimitDescriptor, as a newer proto might add: varint 1.
  config.mutable_descriptors(0)
      ->GetReflection()
      ->MutableUnknownFields(config.mutable_descriptors(0))
      ->AddVarint(9, 1);
  const auto nack = s.onResponse(responseWith({config}, "v1", "n1"));
  EXPECT_TRUE(versions_.empty());
  EXPECT_EQ(nack.error_detail().message(),
            "RateLimitConfig \"gw/policy\" (resources[0]) descriptors[0]: unknown field number 9 "
            "(not in this build's RateLimitConfig; refusing rather than ignoring it)");
}

}  // namespace
}  // namespace sluice::xds
