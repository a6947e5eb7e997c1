// The JSON writer's numbers: every integer is written as std::to_chars writes it, whether
// it takes the eight-digits-at-a-time path (0 to 10^8 - 1) or the other, one after another
// in one buffer as in an answer.
#include "sluice/common/json_writer.hpp"

#include <gtest/gtest.h>

#include <charconv>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace sluice {
namespace {

std::string printed(std::int64_t value) {
  char text[24];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

std::string written(std::int64_t value) {
  std::string out;
  {
    JsonWriter w(out);
    w.value(value);
  }
  return out;
}

TEST(JsonWriterTest, EveryNumberIsWrittenAsToCharsWritesIt) {
  std::vector<std::int64_t> values = {std::numeric_limits<std::int64_t>::min(),
                                      std::numeric_limits<std::int64_t>::max(), -1, 0};
  for (std::int64_t power = 1; power <= 1'000'000'000'000'000'000; power *= 10) {
    for (const std::int64_t near : {power - 1, power, power + 1, -power}) {
      values.push_back(near);
    }
  }
  for (std::int64_t v = 0; v < 200000; ++v) {
    values.push_back(v);
  }
  std::mt19937_64 random(3);
  for (int i = 0; i < 200000; ++i) {
    values.push_back(static_cast<std::int64_t>(random() >> (random() % 64)));
  }
  for (const std::int64_t v : values) {
    ASSERT_EQ(written(v), printed(v)) << v;
  }
}

TEST(JsonWriterTest, NumbersInAnArrayAreSeparatedAcrossTheBuffersEdge) {
  std::mt19937_64 random(5);
  std::string out;
  std::string expected = "[";
  {
    JsonWriter w(out);
    w.beginArray();
    for (int i = 0; i < 5000; ++i) {
      const auto v = static_cast<std::int64_t>(random() >> (random() % 64));
      w.value(v);
      expected += (i == 0 ? "" : ",") + printed(v);
    }
    w.endArray();
  }
  EXPECT_EQ(out, expected + "]");
}

TEST(JsonWriterTest, AFieldsNumberFollowsItsKey) {
  std::string out;
  {
    JsonWriter w(out);
    w.beginObject();
    w.field("ttl_ms", std::int64_t{60000});
    w.field("amount", std::int64_t{7});
    w.field("remaining", std::int64_t{999'999'700});
    w.endObject();
  }
  EXPECT_EQ(out, R"({"ttl_ms":60000,"amount":7,"remaining":999999700})");
}

}  // namespace
}  // namespace sluice
