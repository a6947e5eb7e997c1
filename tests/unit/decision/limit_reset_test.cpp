// DELETE /limits behind the decision layer: which buckets a request stands for, and the
// reset of every decision thread's store.
#include "sluice/decision/limit_reset.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/memory_store.hpp"

namespace sluice {
namespace {

constexpr const char* kRules = R"(domain: auth
descriptors:
  - key: auth_type
    value: login
    rate_limit:
      unit: minute
      requests_per_unit: 1
  - key: auth_type
    value: free
    rate_limit:
      unlimited: true
)";

/// Two decision threads whose tasks wait in a queue until the test runs them.
class LimitResetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadResult loaded = loadRulesFromStrings({{"auth.yaml", kRules}});
    ASSERT_TRUE(loaded.errors.empty());
    rules_ = loaded.rules;
    for (int i = 0; i < 2; ++i) {
      stores_.push_back(makeMemoryStore(MemoryStoreOptions{}, clock_, metrics_));
      targets_.push_back(
          ResetTarget{[this](std::function<void()> task) { queued_.push_back(std::move(task)); },
                      stores_.back().get()});
    }
    reset_ = makeLimitReset([this] { return rules_; }, targets_);
  }

  bool allowed(std::size_t thread) {
    DecisionServiceParts parts;
    parts.rules = [this] { return rules_; };
    parts.store = stores_[thread];
    auto service = makeDecisionService(std::move(parts));
    DecisionRequest request;
    request.domain = "auth";
    request.client_id = "ann";
    request.descriptors = {{{"auth_type", "login"}}};
    std::optional<Result<Decision>> out;
    service->decide(std::move(request), [&](Result<Decision> d) { out = std::move(d); });
    return out && *out && (*out)->allowed;
  }

  void runQueued() {
    auto tasks = std::move(queued_);
    queued_.clear();
    for (auto& task : tasks) {
      task();
    }
  }

  ManualClock clock_;
  Metrics metrics_;
  RuleSetPtr rules_;
  std::vector<StorePtr> stores_;
  std::vector<ResetTarget> targets_;
  std::vector<std::function<void()>> queued_;
  std::unique_ptr<LimitReset> reset_;
};

TEST_F(LimitResetTest, ResetsEveryThreadsStoreAndAnswersOnceWithTheSum) {
  ASSERT_TRUE(allowed(0));
  ASSERT_FALSE(allowed(0));
  ASSERT_TRUE(allowed(1));
  DecisionRequest request;
  request.domain = "auth";
  request.client_id = "ann";
  request.descriptors = {{{"auth_type", "login"}}};
  std::vector<Result<std::size_t>> answers;
  ASSERT_TRUE(reset_->reset(request, [&](Result<std::size_t> r) { answers.push_back(r); }));
  EXPECT_TRUE(answers.empty());  // nothing runs before the threads do
  runQueued();
  ASSERT_EQ(answers.size(), 1u);
  ASSERT_TRUE(answers[0]);
  EXPECT_EQ(*answers[0], 2u);
  EXPECT_TRUE(allowed(0));
}

TEST_F(LimitResetTest, RefusesBeforeDeletingAnything) {
  DecisionRequest request;
  request.domain = "other";
  bool called = false;
  auto done = [&](Result<std::size_t>) { called = true; };
  EXPECT_EQ(reset_->reset(request, done).error().kind, ErrorKind::kNotFound);
  request.domain = "auth";
  request.descriptors = {{{"auth_type", "free"}}};
  EXPECT_EQ(reset_->reset(request, done).error().kind, ErrorKind::kInvalidArgument);
  rules_ = nullptr;
  EXPECT_EQ(reset_->reset(request, done).error().kind, ErrorKind::kUnavailable);
  EXPECT_TRUE(queued_.empty());
  EXPECT_FALSE(called);
}

TEST_F(LimitResetTest, PrefixesAreTheKeysTheDecisionServiceCharges) {
  DecisionRequest request;
  request.domain = "auth";
  request.client_id = "a|b";
  request.descriptors = {{{"auth_type", "login"}}};
  auto prefixes = resetKeyPrefixes(*rules_, request);
  ASSERT_TRUE(prefixes);
  RequestMatch match = matchRequest(*rules_->findDomain("auth"), request.descriptors);
  EXPECT_EQ(*prefixes, std::vector<std::string>{
                           BucketKey::storeKey("a|b", match.descriptors[0].limits[0].bucket_key)});
}

}  // namespace
}  // namespace sluice
