// `candidate:` beside `rate_limit:` (docs/what-if.md): read as a rate limit of its own key
// slot, refused with a located error when it is not one.
#include <gtest/gtest.h>

#include <string>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::errorsOf;
using test::loadOne;

const char* const kRules = R"(domain: shop
descriptors:
  - key: path
    value: /checkout
    rate_limit:
      name: checkout
      unit: hour
      requests_per_unit: 10
    candidate:
      name: checkout_next
      unit: hour
      requests_per_unit: 3
      algorithm: token_bucket
  - key: path
    value: /new
    candidate:
      unit: minute
      requests_per_unit: 1
)";

TEST(CandidateRulesTest, ACandidateIsALimitOfItsOwnSlotBesideTheLiveOne) {
  const RuleSetPtr rules = loadOne(kRules);
  ASSERT_TRUE(rules);
  const DescriptorNode& checkout = rules->findDomain("shop")->descriptors[0];
  ASSERT_EQ(checkout.limits.size(), 2u);
  EXPECT_FALSE(checkout.limits[0].candidate);
  EXPECT_EQ(checkout.limits[0].limit_id, "ncheckout");
  EXPECT_TRUE(checkout.limits[1].candidate);
  EXPECT_EQ(checkout.limits[1].name, "checkout_next");
  EXPECT_EQ(checkout.limits[1].limit_id, "cncheckout_next");
  EXPECT_EQ(checkout.limits[1].params.algorithm, Algorithm::kTokenBucket);
  EXPECT_EQ(checkout.limits[1].params.limit, 3);

  // A node with a candidate only; its generated name says what it is.
  const DescriptorNode& fresh = rules->findDomain("shop")->descriptors[1];
  ASSERT_EQ(fresh.limits.size(), 1u);
  EXPECT_TRUE(fresh.limits[0].candidate);
  EXPECT_EQ(fresh.limits[0].name, "shop.path_/new.candidate");
  EXPECT_EQ(fresh.limits[0].limit_id, "ci0");
}

TEST(CandidateRulesTest, TheMatchGivesTheCandidateABucketApartFromTheLiveLimit) {
  const RuleSetPtr rules = loadOne(kRules);
  ASSERT_TRUE(rules);
  const RequestMatch match =
      matchRequest(*rules->findDomain("shop"), {Descriptor{{"path", "/checkout"}}});
  ASSERT_EQ(match.descriptors.size(), 1u);
  ASSERT_EQ(match.descriptors[0].limits.size(), 2u);
  EXPECT_NE(match.descriptors[0].limits[0].bucket_key, match.descriptors[0].limits[1].bucket_key);
}

TEST(CandidateRulesTest, ACandidateThatIsNotARateLimitIsRefusedWithItsLocation) {
  auto errors = errorsOf("domain: d\ndescriptors:\n  - key: k\n    candidate: 5\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].location.line, 4);
  EXPECT_NE(errors[0].message.find("'candidate' must be a mapping"), std::string::npos)
      << errors[0].message;

  errors = errorsOf(
      "domain: d\ndescriptors:\n  - key: k\n    candidate:\n      unit: hour\n"
      "      requests_per_unit: -1\n");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].location.line, 6);

  errors = errorsOf(
      "domain: d\ndescriptors:\n  - key: k\n    candidate:\n      unit: hour\n"
      "      requests_per_unit: 1\n      name: c\n      replaces: [{name: x}]\n");
  ASSERT_FALSE(errors.empty());
  bool said = false;
  for (const auto& e : errors) {
    said = said || e.message.find("cannot 'replaces'") != std::string::npos;
  }
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace sluice
