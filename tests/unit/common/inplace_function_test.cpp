#include "sluice/common/inplace_function.hpp"

#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <utility>

namespace sluice {
namespace {

using Small = InplaceFunction<int(int), 32>;

TEST(InplaceFunctionTest, SmallCallablesLiveInPlaceLargeOnesOnTheHeap) {
  auto small = [a = 1, b = 2](int x) { return a + b + x; };
  auto large = [big = std::array<char, 64>{}](int x) { return x + big[0]; };
  EXPECT_TRUE(Small::storesInPlace<decltype(small)>());
  EXPECT_FALSE(Small::storesInPlace<decltype(large)>());
  Small f = small;
  Small g = large;
  EXPECT_EQ(f(1), 4);
  EXPECT_EQ(g(5), 5);
}

TEST(InplaceFunctionTest, EmptyFromNullAndAfterMove) {
  Small empty;
  EXPECT_FALSE(empty);
  Small from_null = nullptr;
  EXPECT_FALSE(from_null);
  Small from_null_function = std::function<int(int)>();
  EXPECT_FALSE(from_null_function);
  EXPECT_THROW(empty(1), std::bad_function_call);
  Small f = [](int x) { return x * 2; };
  Small g = std::move(f);
  EXPECT_FALSE(f);  // NOLINT(bugprone-use-after-move): moved from is empty, as specified
  EXPECT_EQ(g(3), 6);
  g = nullptr;
  EXPECT_FALSE(g);
}

TEST(InplaceFunctionTest, OwnsMoveOnlyCapturesAndDestroysThemOnce) {
  auto counter = std::make_shared<int>(0);
  {
    auto owned = std::make_unique<int>(7);
    Small f = [owned = std::move(owned), counter](int x) { return *owned + x; };
    EXPECT_EQ(counter.use_count(), 2);
    Small g = std::move(f);
    EXPECT_EQ(counter.use_count(), 2);
    EXPECT_EQ(g(1), 8);
    // Heap-held callables move by pointer, and are destroyed once too.
    Small h = [counter, big = std::array<char, 64>{}](int x) { return x + big[1]; };
    EXPECT_EQ(counter.use_count(), 3);
    Small k = std::move(h);
    k = std::move(g);
    EXPECT_EQ(counter.use_count(), 2);
    EXPECT_EQ(k(2), 9);
  }
  EXPECT_EQ(counter.use_count(), 1);
}

TEST(InplaceFunctionTest, CallsMutableCallablesThroughAConstReference) {
  Small f = [n = 0](int x) mutable { return n += x; };
  const Small& ref = f;
  EXPECT_EQ(ref(2), 2);
  EXPECT_EQ(ref(3), 5);
}

}  // namespace
}  // namespace sluice
