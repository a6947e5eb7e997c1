// The decimal writers of sluice/common/words.hpp against std::to_chars.
#include "sluice/common/words.hpp"

#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace sluice::words {
namespace {

std::string reference(std::int64_t value) {
  char digits[kMaxDecimalBytes];
  return {digits, std::to_chars(digits, digits + sizeof digits, value).ptr};
}

std::vector<std::int64_t> samples() {
  std::vector<std::int64_t> values{0, -1, std::numeric_limits<std::int64_t>::min(),
                                   std::numeric_limits<std::int64_t>::max()};
  // Every power of ten and its neighbours, both signs (the short and the long way, and the
  // 10^8 boundary between them).
  for (int exponent = 0; exponent <= 18; ++exponent) {
    std::int64_t p = 1;
    for (int i = 0; i < exponent; ++i) {
      p *= 10;
    }
    for (std::int64_t v : {p - 1, p, p + 1}) {
      values.push_back(v);
      values.push_back(-v);
    }
  }
  return values;
}

TEST(WordsTest, WriteDecimalWritesWhatToCharsWrites) {
  for (const std::int64_t value : samples()) {
    char out[kMaxDecimalBytes];
    EXPECT_EQ(std::string(out, writeDecimal(value, out)), reference(value)) << value;
  }
}

TEST(WordsTest, ADecimalHoldsTheDigitsOfItsNumber) {
  for (const std::int64_t value : samples()) {
    const Decimal digits(value);
    EXPECT_EQ(digits.view(), reference(value)) << value;
  }
  // Two at once (a key's two window suffixes in one expression) do not share a buffer.
  EXPECT_EQ(std::string(Decimal(41).view()) + std::string(Decimal(42).view()), "4142");
}

}  // namespace
}  // namespace sluice::words
