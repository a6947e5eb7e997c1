#include <gtest/gtest.h>

#include <set>

#include "sluice/rules/rules.hpp"
#include "support/rules_loading.hpp"

namespace sluice {
namespace {

using test::desc;
using test::loadOne;

class MatcherTest : public ::testing::Test {
 protected:
  void load(const std::string& yaml) {
    rules_ = loadOne(yaml);
    ASSERT_TRUE(rules_);
    domain_ = &rules_->domains.begin()->second;
  }
  /// The limit names matched by one descriptor (empty: no match).
  std::vector<std::string> names(const Descriptor& descriptor) {
    const RequestMatch match = matchRequest(*domain_, {descriptor});
    std::vector<std::string> out;
    for (const MatchedLimit& limit : match.descriptors.at(0).limits) {
      out.push_back(limit.limit->name);
    }
    return out;
  }
  std::string key(const Descriptor& descriptor) {
    const RequestMatch match = matchRequest(*domain_, {descriptor});
    if (match.descriptors.at(0).limits.empty()) {
      return "";
    }
    return match.descriptors[0].limits[0].bucket_key;
  }
  using Names = std::vector<std::string>;
  RuleSetPtr rules_;
  const DomainConfig* domain_ = nullptr;
};

constexpr const char* kPrecedence = R"(
domain: d
descriptors:
  - key: k
    rate_limit: {name: key_only, unit: second, requests_per_unit: 1}
  - key: k
    value: "foo*"
    rate_limit: {name: wild_foo, unit: second, requests_per_unit: 1}
  - key: k
    value: "f*"
    rate_limit: {name: wild_f, unit: second, requests_per_unit: 1}
  - key: k
    value: foobar
    rate_limit: {name: exact, unit: second, requests_per_unit: 1}
)";

TEST_F(MatcherTest, ExactValueWinsOverWildcardAndKeyOnly) {
  load(kPrecedence);
  EXPECT_EQ(names(desc({{"k", "foobar"}})), Names{"exact"});
}

TEST_F(MatcherTest, FirstMatchingWildcardInFileOrderWins) {
  load(kPrecedence);
  EXPECT_EQ(names(desc({{"k", "foobaz"}})), Names{"wild_foo"});
  EXPECT_EQ(names(desc({{"k", "fx"}})), Names{"wild_f"});
}

TEST_F(MatcherTest, AWildcardsLiteralTextFindsItBeforeEarlierPatterns) {
  load(kPrecedence);
  // envoyproxy/ratelimit looks "k_foo*" up in its map before trying patterns.
  EXPECT_EQ(names(desc({{"k", "foo*"}})), Names{"wild_foo"});
  EXPECT_EQ(names(desc({{"k", "f*"}})), Names{"wild_f"});
}

TEST_F(MatcherTest, KeyOnlyIsTheDefault) {
  load(kPrecedence);
  EXPECT_EQ(names(desc({{"k", "zzz"}})), Names{"key_only"});
  EXPECT_EQ(names(desc({{"other", "foobar"}})), Names{});
}

TEST_F(MatcherTest, WildcardsMatchAnywhereAndStarMatchesEmpty) {
  load(R"(
domain: d
descriptors:
  - key: a
    value: "bar*b"
    rate_limit: {name: middle, unit: second, requests_per_unit: 1}
  - key: a
    value: "foo*bar*baz"
    rate_limit: {name: two_stars, unit: second, requests_per_unit: 1}
  - key: a
    value: "*end"
    rate_limit: {name: leading, unit: second, requests_per_unit: 1}
  - key: b
    value: "*"
    rate_limit: {name: any, unit: second, requests_per_unit: 1}
)");
  EXPECT_EQ(names(desc({{"a", "barb"}})), Names{"middle"});
  EXPECT_EQ(names(desc({{"a", "bar-x-b"}})), Names{"middle"});
  EXPECT_EQ(names(desc({{"a", "bar-x-bc"}})), Names{});
  EXPECT_EQ(names(desc({{"a", "foobarbaz"}})), Names{"two_stars"});
  EXPECT_EQ(names(desc({{"a", "foo1bar2baz"}})), Names{"two_stars"});
  EXPECT_EQ(names(desc({{"a", "foo1baz"}})), Names{});
  EXPECT_EQ(names(desc({{"a", "the end"}})), Names{"leading"});
  EXPECT_EQ(names(desc({{"b", ""}})), Names{"any"});
  EXPECT_EQ(names(desc({{"b", "anything"}})), Names{"any"});
}

constexpr const char* kNested = R"(
domain: d
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: second, requests_per_unit: 1}
    descriptors:
      - key: path
        rate_limit: {name: per_user_path, unit: second, requests_per_unit: 1}
      - key: path
        value: /free
  - key: client
    value: vip
)";

TEST_F(MatcherTest, DepthMustMatch) {
  load(kNested);
  EXPECT_EQ(names(desc({{"user", "u1"}})), Names{"per_user"});
  EXPECT_EQ(names(desc({{"user", "u1"}, {"path", "/x"}})), Names{"per_user_path"});
  // Deeper than the rule.
  EXPECT_EQ(names(desc({{"user", "u1"}, {"path", "/x"}, {"extra", "1"}})), Names{});
  // A node without limit at the request's depth.
  EXPECT_EQ(names(desc({{"client", "vip"}})), Names{});
  EXPECT_EQ(names(desc({{"client", "vip"}, {"path", "/x"}})), Names{});
  EXPECT_EQ(names(Descriptor{}), Names{});
}

TEST_F(MatcherTest, ExplicitValueWithoutLimitOverridesKeyOnlyDefault) {
  load(kNested);
  const RequestMatch match = matchRequest(*domain_, {desc({{"user", "u1"}, {"path", "/free"}})});
  EXPECT_TRUE(match.descriptors[0].limits.empty());
  EXPECT_FALSE(match.descriptors[0].matched);
}

TEST_F(MatcherTest, KeyOnlyCountsEachValueSeparately) {
  load(kNested);
  EXPECT_EQ(key(desc({{"user", "u1"}})), "d:user=u1;nper_user;fw");
  EXPECT_NE(key(desc({{"user", "u1"}})), key(desc({{"user", "u2"}})));
  EXPECT_EQ(key(desc({{"user", "u1"}, {"path", "/x"}})), "d:user=u1:path=%2Fx;nper_user_path;fw");
}

TEST_F(MatcherTest, WildcardCountsEachValueSeparatelyWithoutShareThreshold) {
  load(R"(
domain: d
descriptors:
  - key: path
    value: /api/*
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: shared
    value: /api/*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  EXPECT_NE(key(desc({{"path", "/api/a"}})), key(desc({{"path", "/api/b"}})));
  EXPECT_EQ(key(desc({{"shared", "/api/a"}})), key(desc({{"shared", "/api/b"}})));
  EXPECT_EQ(key(desc({{"shared", "/api/a"}})), "d:shared~%2Fapi%2F%2A;i0;fw");
}

TEST_F(MatcherTest, SharedWildcardKeyNeverCollidesWithALiteralValue) {
  load(R"(
domain: d
descriptors:
  - key: k
    value: "foo*"
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: "f*"
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  const std::string shared = key(desc({{"k", "fooX"}}));
  EXPECT_EQ(shared, "d:k~foo%2A;i0;fw");
  // The literal text of the pattern finds the shared node too: the same counter.
  EXPECT_EQ(key(desc({{"k", "foo*"}})), shared);
  // Values counted one by one never take the shared counter's key.
  EXPECT_EQ(key(desc({{"k", "fo*"}})), "d:k=fo%2A;i0;fw");
  EXPECT_NE(key(desc({{"k", "fo*"}})), shared);
}

TEST_F(MatcherTest, BucketKeysNeverCollide) {
  load(R"(
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1}
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: "a:b"
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: "a=b"
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  const std::vector<Descriptor> descriptors{desc({{"a", "b:b=c"}}), desc({{"a", "b"}, {"b", "c"}}),
                                            desc({{"a:b", "c"}}),   desc({{"a=b", "c"}}),
                                            desc({{"a", "b=c"}}),   desc({{"a", "b;i0"}}),
                                            desc({{"a", "%3A"}}),   desc({{"a", ":"}}),
                                            desc({{"a", ""}}),      desc({{"a", "b"}, {"b", ""}}),
                                            desc({{"a", "{x}"}}),   desc({{"a", "b~c"}})};
  std::set<std::string> keys;
  for (const Descriptor& d : descriptors) {
    const std::string k = key(d);
    ASSERT_FALSE(k.empty());
    EXPECT_TRUE(keys.insert(k).second) << k;
    EXPECT_EQ(k.find_first_of("{}"), std::string::npos) << k;
  }
}

TEST_F(MatcherTest, BucketKeyIncludesSlotAndAlgorithm) {
  load(R"(
domain: d
descriptors:
  - key: plan
    rate_limits:
      - {name: burst, unit: second, requests_per_unit: 5, algorithm: token_bucket}
      - {unit: day, requests_per_unit: 1000}
)");
  const RequestMatch match = matchRequest(*domain_, {desc({{"plan", "free"}})});
  ASSERT_EQ(match.descriptors[0].limits.size(), 2u);
  EXPECT_EQ(match.descriptors[0].limits[0].bucket_key, "d:plan=free;nburst;tb");
  EXPECT_EQ(match.descriptors[0].limits[1].bucket_key, "d:plan=free;i1;fw");
}

TEST_F(MatcherTest, BucketKeySurvivesAReloadThatOnlyChangesTheLimit) {
  load(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: "
      "1}\n");
  const std::string before = key(desc({{"k", "v"}}));
  load(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: "
      "9}\n");
  EXPECT_EQ(key(desc({{"k", "v"}})), before);
  load(
      "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 9, "
      "algorithm: sliding_window_log}\n");
  EXPECT_NE(key(desc({{"k", "v"}})), before);
}

TEST_F(MatcherTest, NoDescriptorsUsesTheDomainLevelLimit) {
  load("domain: d\nrate_limit: {unit: minute, requests_per_unit: 100}\n");
  const RequestMatch match = matchRequest(*domain_, {});
  ASSERT_EQ(match.descriptors.size(), 1u);
  ASSERT_EQ(match.descriptors[0].limits.size(), 1u);
  EXPECT_TRUE(match.descriptors[0].matched);
  EXPECT_EQ(match.descriptors[0].node, nullptr);
  EXPECT_EQ(match.descriptors[0].limits[0].node, nullptr);
  EXPECT_EQ(match.descriptors[0].limits[0].bucket_key, "d;i0;fw");
}

TEST_F(MatcherTest, NoDescriptorsAndNoDomainLimitMatchesNothing) {
  load("domain: d\n");
  const RequestMatch match = matchRequest(*domain_, {});
  ASSERT_EQ(match.descriptors.size(), 1u);
  EXPECT_TRUE(match.descriptors[0].limits.empty());
  EXPECT_FALSE(match.descriptors[0].matched);
}

constexpr const char* kReplaces = R"(
domain: d
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: minute, requests_per_unit: 10}
  - key: vip
    rate_limit:
      name: vip
      unit: minute
      requests_per_unit: 1000
      replaces:
        - name: per_user
  - key: bypass
    rate_limit:
      unlimited: true
      replaces: [{name: per_user}]
)";

TEST_F(MatcherTest, ReplacesDropsTheNamedLimitAcrossDescriptors) {
  load(kReplaces);
  const RequestMatch match =
      matchRequest(*domain_, {desc({{"user", "u1"}}), desc({{"vip", "yes"}})});
  ASSERT_EQ(match.descriptors.size(), 2u);
  EXPECT_TRUE(match.descriptors[0].limits.empty());
  EXPECT_TRUE(match.descriptors[0].matched);
  ASSERT_EQ(match.descriptors[1].limits.size(), 1u);
  EXPECT_EQ(match.descriptors[1].limits[0].limit->name, "vip");
}

TEST_F(MatcherTest, WithoutTheReplacingDescriptorTheLimitStays) {
  load(kReplaces);
  const RequestMatch match = matchRequest(*domain_, {desc({{"user", "u1"}})});
  ASSERT_EQ(match.descriptors[0].limits.size(), 1u);
}

TEST_F(MatcherTest, UnlimitedIsKeptFlaggedAndItsReplacesApply) {
  load(kReplaces);
  const RequestMatch match =
      matchRequest(*domain_, {desc({{"user", "u1"}}), desc({{"bypass", "x"}})});
  EXPECT_TRUE(match.descriptors[0].limits.empty());
  ASSERT_EQ(match.descriptors[1].limits.size(), 1u);
  EXPECT_TRUE(match.descriptors[1].limits[0].limit->unlimited);
}

TEST_F(MatcherTest, ShadowModeIsFlaggedOnTheLimit) {
  load(R"(
domain: d
descriptors:
  - key: k
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: j
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  EXPECT_TRUE(
      matchRequest(*domain_, {desc({{"k", "v"}})}).descriptors[0].limits[0].limit->shadow_mode);
  EXPECT_FALSE(
      matchRequest(*domain_, {desc({{"j", "v"}})}).descriptors[0].limits[0].limit->shadow_mode);
}

TEST_F(MatcherTest, ZeroLimitMatchesWithZeroRequests) {
  load(
      "domain: d\ndescriptors:\n  - key: ip\n    value: 50.0.0.5\n    rate_limit: {unit: second, "
      "requests_per_unit: 0}\n");
  const RequestMatch match = matchRequest(*domain_, {desc({{"ip", "50.0.0.5"}})});
  ASSERT_EQ(match.descriptors[0].limits.size(), 1u);
  EXPECT_EQ(match.descriptors[0].limits[0].limit->params.limit, 0);
}

TEST_F(MatcherTest, MatchedNodeIsReported) {
  load(kPrecedence);
  const RequestMatch match = matchRequest(*domain_, {desc({{"k", "foobar"}})});
  ASSERT_NE(match.descriptors[0].node, nullptr);
  EXPECT_EQ(match.descriptors[0].node->value, "foobar");
  EXPECT_EQ(match.descriptors[0].limits[0].node, match.descriptors[0].node);
}

/// Clears what the loader prepares for the matcher (the exact bucket keys) under `level`.
void forgetExactBucketKeys(std::vector<DescriptorNode>& level) {
  for (DescriptorNode& node : level) {
    node.exact_prefix.clear();
    for (RateLimit& limit : node.limits) {
      limit.exact_bucket_key.clear();
    }
    forgetExactBucketKeys(node.children);
  }
}

TEST_F(MatcherTest, BucketKeysPreparedByTheLoaderAreThoseBuiltPerRequest) {
  load(R"(
domain: "d|x"
rate_limit: {unit: second, requests_per_unit: 1}
descriptors:
  - key: plan
    value: "free tier"
    rate_limits:
      - {unit: second, requests_per_unit: 1}
      - {name: "burst;1", unit: minute, requests_per_unit: 5, algorithm: token_bucket}
    descriptors:
      - key: route
        rate_limit: {unit: second, requests_per_unit: 1}
        descriptors:
          - key: method
            value: GET
            rate_limit: {unit: second, requests_per_unit: 1}
      - key: route
        value: "/api/*"
        rate_limit: {unit: second, requests_per_unit: 1}
      - key: route
        value: "/shared/*"
        share_threshold: true
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1}
)");
  const std::vector<std::vector<Descriptor>> requests{
      {},
      {desc({{"plan", "free tier"}})},
      {desc({{"plan", "free tier"}, {"route", "/x"}})},
      {desc({{"plan", "free tier"}, {"route", "/x"}, {"method", "GET"}})},
      {desc({{"plan", "free tier"}, {"route", "/api/v1"}})},
      {desc({{"plan", "free tier"}, {"route", "/api/*"}})},
      {desc({{"plan", "free tier"}, {"route", "/shared/a"}})},
      {desc({{"plan", "free tier"}, {"route", "/shared/*"}})},
      {desc({{"user", "a:b=c"}}), desc({{"plan", "free tier"}})},
  };
  DomainConfig by_hand = *domain_;
  for (RateLimit& limit : by_hand.domain_limits) {
    limit.exact_bucket_key.clear();
  }
  forgetExactBucketKeys(by_hand.descriptors);
  for (const auto& request : requests) {
    const RequestMatch prepared = matchRequest(*domain_, request);
    const RequestMatch built = matchRequest(by_hand, request);
    ASSERT_EQ(prepared.descriptors.size(), built.descriptors.size());
    for (std::size_t d = 0; d < built.descriptors.size(); ++d) {
      ASSERT_EQ(prepared.descriptors[d].limits.size(), built.descriptors[d].limits.size());
      ASSERT_FALSE(built.descriptors[d].limits.empty());
      for (std::size_t l = 0; l < built.descriptors[d].limits.size(); ++l) {
        EXPECT_EQ(prepared.descriptors[d].limits[l].bucket_key,
                  built.descriptors[d].limits[l].bucket_key);
      }
    }
  }
  EXPECT_EQ(key(desc({{"plan", "free tier"}, {"route", "/x"}, {"method", "GET"}})),
            "d%7Cx:plan=free%20tier:route=%2Fx:method=GET;i0;fw");
}

TEST(MatcherHandBuiltTest, UnindexedTreeMatchesWithTheSamePrecedence) {
  DomainConfig domain;
  domain.domain = "d";
  const auto node = [](std::string key, std::optional<std::string> value, std::string name) {
    DescriptorNode n;
    n.key = std::move(key);
    n.wildcard = value && value->find('*') != std::string::npos;
    n.value = std::move(value);
    RateLimit limit;
    limit.name = std::move(name);
    limit.limit_id = "i0";
    n.limits.push_back(limit);
    return n;
  };
  domain.descriptors.push_back(node("k", std::nullopt, "key_only"));
  domain.descriptors.push_back(node("k", "a*", "wild"));
  domain.descriptors.push_back(node("k", "abc", "exact"));
  const auto name = [&](const std::string& value) {
    const RequestMatch m = matchRequest(domain, {test::desc({{"k", value}})});
    return m.descriptors[0].limits.empty() ? std::string() : m.descriptors[0].limits[0].limit->name;
  };
  EXPECT_EQ(name("abc"), "exact");
  EXPECT_EQ(name("abd"), "wild");
  EXPECT_EQ(name("x"), "key_only");
}

}  // namespace
}  // namespace sluice
