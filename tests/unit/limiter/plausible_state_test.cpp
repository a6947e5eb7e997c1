#include <gtest/gtest.h>

#include <string_view>

#include "sluice/limiter/limiter.hpp"

namespace sluice {
namespace {

TEST(PlausibleStateTest, EveryAlgorithmCodeReadsBack) {
  for (Algorithm a :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kSketch}) {
    EXPECT_EQ(algorithmFromCode(algorithmCode(a)), a) << algorithmName(a);
  }
  EXPECT_FALSE(algorithmFromCode("xx"));
  EXPECT_FALSE(algorithmFromCode(""));
}

TEST(PlausibleStateTest, AFreshStateIsPlausibleForEveryKeptAlgorithm) {
  for (Algorithm a :
       {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
        Algorithm::kTokenBucket, Algorithm::kLeakyBucket}) {
    EXPECT_TRUE(plausibleState(a, BucketState{})) << algorithmName(a);
  }
  EXPECT_FALSE(plausibleState(Algorithm::kSketch, BucketState{}));  // keeps no bucket state
}

TEST(PlausibleStateTest, CountsAndTheWarmUpStoreAreNeverNegative) {
  EXPECT_TRUE(plausibleState(Algorithm::kFixedWindow, {1'700'000'000'000'000, 7, 0, {}}));
  EXPECT_FALSE(plausibleState(Algorithm::kFixedWindow, {1'700'000'000'000'000, -1, 0, {}}));
  EXPECT_FALSE(plausibleState(Algorithm::kSlidingWindowCounter, {0, 3, -2, {}}));
  EXPECT_TRUE(plausibleState(Algorithm::kTokenBucket, {1'700'000'000'000'000, 3, 5, {}}));
  EXPECT_FALSE(plausibleState(Algorithm::kTokenBucket, {1'700'000'000'000'000, 3, -5, {}}));
  EXPECT_FALSE(plausibleState(Algorithm::kLeakyBucket, {std::int64_t{1} << 60, 0, 0, {}}));
}

TEST(PlausibleStateTest, ALogIsOldestFirstWithPositiveCostsAndOnlyForTheLogAlgorithm) {
  const BucketState ordered{5, 1, 0, {{1, 2}, {3, 1}, {3, 4}}};
  EXPECT_TRUE(plausibleState(Algorithm::kSlidingWindowLog, ordered));
  EXPECT_FALSE(plausibleState(Algorithm::kFixedWindow, ordered));
  EXPECT_FALSE(plausibleState(Algorithm::kSlidingWindowLog, {5, 1, 0, {{3, 1}, {1, 1}}}));
  EXPECT_FALSE(plausibleState(Algorithm::kSlidingWindowLog, {5, 1, 0, {{1, 0}}}));
  EXPECT_FALSE(plausibleState(Algorithm::kSlidingWindowLog, {5, 2, 0, {}}));
  EXPECT_FALSE(plausibleState(Algorithm::kSlidingWindowLog,
                              {5, 1, 0, {{1, std::int64_t{1} << 53}, {2, std::int64_t{1} << 53}}}));
}

}  // namespace
}  // namespace sluice
