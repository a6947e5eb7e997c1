#include "sluice/common/value_parsers.hpp"

#include <gtest/gtest.h>

namespace sluice {
namespace {

using std::chrono::milliseconds;

TEST(ValueParsersTest, IntegersAreWholeAndWithinBounds) {
  EXPECT_EQ(*parseInteger<int>("42", 1, 100), 42);
  EXPECT_EQ(parseInteger<int>("0", 1, 100).error().message,
            "must be an integer from 1 to 100, got \"0\"");
  EXPECT_FALSE(parseInteger<int>("4x", 1, 100).ok());
  EXPECT_FALSE(parseInteger<int>(" 4", 1, 100).ok());
  EXPECT_FALSE(parseInteger<unsigned>("-1", 0, 10).ok());
  EXPECT_FALSE(parseInteger<std::size_t>("99999999999999999999999", 0, 10).ok());
}

TEST(ValueParsersTest, MillisecondsAreBareIntegers) {
  EXPECT_EQ(*parseMilliseconds("250", milliseconds(1), milliseconds(1000)), milliseconds(250));
  EXPECT_EQ(parseMilliseconds("250ms", milliseconds(1), milliseconds(1000)).error().message,
            "must be an integer from 1 to 1000, got \"250ms\"");
}

TEST(ValueParsersTest, DurationsTakeAUnit) {
  EXPECT_EQ(parseDurationMicros("250ms"), 250'000);
  EXPECT_EQ(parseDurationMicros("2s"), 2'000'000);
  EXPECT_EQ(parseDurationMicros("1d"), 86'400'000'000);
  EXPECT_EQ(parseDurationMicros("7us"), 7);
  EXPECT_FALSE(parseDurationMicros("250").has_value());
  EXPECT_FALSE(parseDurationMicros("1.5s").has_value());
  EXPECT_FALSE(parseDurationMicros("99999999999999999d").has_value());
}

TEST(ValueParsersTest, BooleansInEveryUsualSpelling) {
  for (const char* yes : {"true", "TRUE", "1", "yes", "On"}) {
    EXPECT_TRUE(*parseBool(yes)) << yes;
  }
  for (const char* no : {"false", "0", "no", "OFF"}) {
    EXPECT_FALSE(*parseBool(no)) << no;
  }
  EXPECT_EQ(parseBool("maybe").error().message, "must be true or false, got \"maybe\"");
  EXPECT_FALSE(parseBool("").ok());
}

TEST(ValueParsersTest, WordsFromAFixedList) {
  constexpr std::string_view kWords[] = {"open", "closed"};
  EXPECT_EQ(*parseOneOf("closed", kWords), "closed");
  EXPECT_EQ(parseOneOf("shut", kWords).error().message,
            "must be one of open, closed, got \"shut\"");
}

TEST(ValueParsersTest, ListsSplitOnEveryComma) {
  EXPECT_EQ(splitList("a,b, c"), (std::vector<std::string_view>{"a", "b", " c"}));
  EXPECT_EQ(splitList(""), (std::vector<std::string_view>{""}));
  EXPECT_EQ(splitList("a,"), (std::vector<std::string_view>{"a", ""}));
  EXPECT_EQ(splitList("a+b", '+'), (std::vector<std::string_view>{"a", "b"}));
  EXPECT_EQ(trimSpaces(" \ta b \t"), "a b");
}

TEST(ValueParsersTest, HostAndPort) {
  auto v6 = parseHostPort("[::1]:8081");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8081);
  EXPECT_EQ(parseHostPort("8080").error().message, "must be HOST:PORT, got \"8080\"");
  EXPECT_EQ(parseHostPort("[::1:80").error().message,
            "must be HOST:PORT ([::1]:8080 for IPv6), got \"[::1:80\"");
  EXPECT_EQ(parseHostPort("h:65536").error().message,
            "port must be an integer from 0 to 65535, got \"65536\"");
}

TEST(ValueParsersTest, ListenListsTakeTcpAndUnixAddresses) {
  auto list = parseListenList("127.0.0.1:1,unix:rel.sock", ListenListRules{});
  ASSERT_TRUE(list.ok()) << list.error().message;
  ASSERT_EQ(list->size(), 2u);
  EXPECT_FALSE((*list)[0].unix_socket);
  EXPECT_EQ((*list)[1].path, "rel.sock");
  EXPECT_EQ((*list)[1].text, "unix:rel.sock");
  EXPECT_EQ(parseListenList("a:1,a:1", ListenListRules{}).error().message,
            "\"a:1\" is given twice");
}

TEST(ValueParsersTest, ListenListRulesForGrpc) {
  const ListenListRules grpc{.absolute_unix_paths = true, .duplicates_are_errors = false};
  EXPECT_EQ(parseListenList("unix:rel.sock", grpc).error().message,
            "a unix socket must be unix:/absolute/path, got \"unix:rel.sock\"");
  EXPECT_EQ(parseListenList("8081", grpc).error().message,
            "must be HOST:PORT, got \"8081\" (or unix:/path)");
  auto deduplicated = parseListenList("a:1,unix:/s,a:1", grpc);
  ASSERT_TRUE(deduplicated.ok());
  EXPECT_EQ(deduplicated->size(), 2u);
}

TEST(ValueParsersTest, FileModesAreOctal) {
  EXPECT_EQ(*parseFileMode("660"), 0660u);
  EXPECT_EQ(*parseFileMode("0600"), 0600u);
  EXPECT_FALSE(parseFileMode("0886").ok());
  EXPECT_FALSE(parseFileMode("1777").ok());
  EXPECT_FALSE(parseFileMode("").ok());
}

}  // namespace
}  // namespace sluice
