// Hex digits eight at a time (common/hex.hpp): readHex16 and writeHex16 agree with a digit
// by digit reading and printf's formatting, and refuse every text that is not exactly 16
// lower-case hex digits.
#include "sluice/common/hex.hpp"

#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <random>
#include <string>

namespace sluice {
namespace {

/// Digit by digit, as the words above must read.
bool referenceRead(std::string_view text, std::uint64_t& value) {
  if (text.size() != 16) {
    return false;
  }
  std::uint64_t v = 0;
  for (const char c : text) {
    const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (digit < 0) {
      return false;
    }
    v = v << 4 | static_cast<std::uint64_t>(digit);
  }
  value = v;
  return true;
}

std::string printed(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, value);
  return text;
}

TEST(HexTest, WritesWhatPrintfWritesAndReadsItBack) {
  std::mt19937_64 random(7);
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t value = i < 64 ? std::uint64_t{1} << i : random();
    char text[16];
    writeHex16(value, text);
    ASSERT_EQ(std::string(text, 16), printed(value));
    std::uint64_t back = 0;
    ASSERT_TRUE(readHex16(std::string_view(text, 16), back));
    ASSERT_EQ(back, value);
  }
  for (const std::uint64_t value : {std::uint64_t{0}, ~std::uint64_t{0}}) {
    char text[16];
    writeHex16(value, text);
    EXPECT_EQ(std::string(text, 16), printed(value));
  }
}

TEST(HexTest, EveryByteInEveryPlaceIsReadAsADigitReadingReadsIt) {
  const std::string digits = "0123456789abcdef";
  for (std::size_t place = 0; place < 16; ++place) {
    for (int byte = 0; byte < 256; ++byte) {
      std::string text = digits;
      text[place] = static_cast<char>(byte);
      std::uint64_t value = 42;
      std::uint64_t expected = 42;
      const bool read = readHex16(text, value);
      ASSERT_EQ(read, referenceRead(text, expected)) << place << " " << byte;
      ASSERT_EQ(value, expected) << place << " " << byte;  // untouched when refused
    }
  }
}

TEST(HexTest, RandomTextIsReadAsADigitReadingReadsIt) {
  std::mt19937_64 random(11);
  for (int i = 0; i < 200000; ++i) {
    char text[16];
    writeHex16(random(), text);
    for (int changes = static_cast<int>(random() % 3); changes > 0; --changes) {
      text[random() % 16] = static_cast<char>(random());
    }
    std::uint64_t value = 0;
    std::uint64_t expected = 0;
    ASSERT_EQ(readHex16(std::string_view(text, 16), value),
              referenceRead(std::string_view(text, 16), expected));
    ASSERT_EQ(value, expected);
  }
}

TEST(HexTest, OnlySixteenDigitsAreRead) {
  std::uint64_t value = 0;
  EXPECT_FALSE(readHex16("", value));
  EXPECT_FALSE(readHex16("0123456789abcde", value));
  EXPECT_FALSE(readHex16("0123456789abcdef0", value));
  EXPECT_FALSE(readHex16("0123456789ABCDEF", value));
  EXPECT_TRUE(readHex16("0123456789abcdef", value));
  EXPECT_EQ(value, 0x0123456789abcdefULL);
}

}  // namespace
}  // namespace sluice
