#include "sluice/simulate/access_record.hpp"

#include <gtest/gtest.h>

#include "simulate/json_cursor.hpp"

namespace sluice::simulate {
namespace {

TEST(AccessRecordTest, TimeRoundTripsWithMicroseconds) {
  const Micros t = 1'795'665'014'123'456;  // 2026-11-26T03:50:14.123456Z
  std::string text;
  appendRfc3339Micros(text, t);
  EXPECT_EQ(text, "2026-11-26T03:50:14.123456Z");
  Micros back = 0;
  ASSERT_TRUE(parseRfc3339(text, back));
  EXPECT_EQ(back, t);
}

TEST(AccessRecordTest, TimeAcceptsOffsetsAndShortFractions) {
  Micros t = 0;
  ASSERT_TRUE(parseRfc3339("2026-11-26T04:50:14.5+01:00", t));
  EXPECT_EQ(t, 1'795'665'014'500'000);
  ASSERT_TRUE(parseRfc3339("2026-11-26T03:50:14Z", t));
  EXPECT_EQ(t, 1'795'665'014'000'000);
  ASSERT_TRUE(parseRfc3339("2026-11-26 03:50:14.123456789Z", t));
  EXPECT_EQ(t, 1'795'665'014'123'456);
  EXPECT_FALSE(parseRfc3339("2026-11-26T03:50:14", t));  // no zone
  EXPECT_FALSE(parseRfc3339("26/Nov/2026:03:50:14 +0000", t));
  EXPECT_FALSE(parseRfc3339("2026-13-26T03:50:14Z", t));
}

TEST(AccessRecordTest, LineRoundTripsTheRequest) {
  DecisionRequest request;
  request.domain = "auth";
  request.client_id = "jo\"e";
  request.descriptors = {{{"user", "mallory"}, {"path", "/login\n"}},
                         {{"remote_address", "10.0.0.1"}}};
  request.hits = 2;
  request.descriptor_hits = {std::nullopt, 3};
  request.descriptor_limits = {std::nullopt, LimitOverride{5, TimeUnit::kMinute}};
  std::string line;
  appendAccessJson(line, 1'795'665'014'123'456, request, "login", "denied", false, 41, "abc");
  LoggedRequest parsed;
  std::string error;
  ASSERT_TRUE(parseAccessLine(line, parsed, error)) << error << "\n" << line;
  EXPECT_EQ(parsed.time_us, 1'795'665'014'123'456);
  EXPECT_EQ(parsed.request.domain, "auth");
  EXPECT_EQ(parsed.request.client_id, "jo\"e");
  ASSERT_EQ(parsed.request.descriptors.size(), 2u);
  EXPECT_EQ(parsed.request.descriptors[0][1].key, "path");
  EXPECT_EQ(parsed.request.descriptors[0][1].value, "/login\n");
  EXPECT_EQ(parsed.request.descriptors[1][0].value, "10.0.0.1");
  EXPECT_EQ(parsed.request.hits, 2);
  ASSERT_EQ(parsed.request.descriptor_hits.size(), 2u);
  EXPECT_FALSE(parsed.request.descriptor_hits[0]);
  EXPECT_EQ(*parsed.request.descriptor_hits[1], 3);
  ASSERT_EQ(parsed.request.descriptor_limits.size(), 2u);
  EXPECT_EQ(parsed.request.descriptor_limits[1]->requests_per_unit, 5);
  EXPECT_EQ(parsed.request.descriptor_limits[1]->unit, TimeUnit::kMinute);
  EXPECT_EQ(parsed.decision, "denied");
  EXPECT_EQ(parsed.rule, "login");
  EXPECT_EQ(parsed.rules_hash, "abc");
}

TEST(AccessRecordTest, LineKeepsHowTheRequestWasCharged) {
  DecisionRequest request;
  request.domain = "llm";
  request.descriptors = {{{"user", "a"}}, {{"user", "b"}}};
  request.charge = Charge::kEvery;
  request.descriptor_refunds = {false, true};
  std::string line;
  appendAccessJson(line, 1'795'665'014'000'000, request, "", "allowed", false, 5, "h");
  LoggedRequest parsed;
  std::string error;
  ASSERT_TRUE(parseAccessLine(line, parsed, error)) << error << "\n" << line;
  EXPECT_EQ(parsed.request.charge, Charge::kEvery);
  EXPECT_FALSE(parsed.request.refund);
  EXPECT_EQ(parsed.request.descriptor_refunds, (std::vector<bool>{false, true}));

  request.charge = Charge::kReport;
  request.descriptor_refunds.clear();
  request.refund = true;
  line.clear();
  appendAccessJson(line, 1'795'665'014'000'000, request, "", "allowed", false, 5, "h");
  ASSERT_TRUE(parseAccessLine(line, parsed, error)) << error << "\n" << line;
  EXPECT_EQ(parsed.request.charge, Charge::kReport);
  EXPECT_TRUE(parsed.request.refund);
  EXPECT_TRUE(parsed.request.descriptor_refunds.empty());

  // A line without them is charged all or nothing, whatever the line before said.
  ASSERT_TRUE(parseAccessLine(R"({"time":"2026-11-26T03:50:14Z","domain":"llm"})", parsed, error));
  EXPECT_EQ(parsed.request.charge, Charge::kAllOrNothing);
  EXPECT_FALSE(parsed.request.refund);
  EXPECT_FALSE(parseAccessLine(R"({"time":"2026-11-26T03:50:14Z","domain":"llm","charge":"twice"})",
                               parsed, error));
  EXPECT_NE(error.find("charge"), std::string::npos) << error;
}

TEST(AccessRecordTest, ParsingReusesTheSlotAndForgetsTheLastLine) {
  LoggedRequest parsed;
  std::string error;
  ASSERT_TRUE(parseAccessLine(
      R"({"time":"2026-11-26T03:50:14Z","domain":"a","descriptors":[{"k":"v"},{"x":"y"}],"hits":4})",
      parsed, error));
  ASSERT_TRUE(parseAccessLine(
      R"({"time":"2026-11-26T03:50:14Z","domain":"b","extra":[1,{"z":null}]})", parsed, error))
      << error;
  EXPECT_EQ(parsed.request.domain, "b");
  EXPECT_TRUE(parsed.request.descriptors.empty());
  EXPECT_EQ(parsed.request.hits, 1);
  EXPECT_TRUE(parsed.decision.empty());
}

/// A line as written, then the same line with a space after each member (which the reader
/// takes through its general parser): into one reused slot each, the same request.
void expectReadAlike(const DecisionRequest& request, LoggedRequest& written,
                     LoggedRequest& spaced) {
  std::string line;
  appendAccessJson(line, 1'795'665'014'000'007, request, "r", "allowed", true, 7, "h1");
  std::string spaced_line;
  for (const char c : line) {
    spaced_line += c;
    spaced_line += c == ',' ? " " : "";
  }
  std::string error;
  ASSERT_TRUE(parseAccessLine(line, written, error)) << error << "\n" << line;
  ASSERT_TRUE(parseAccessLine(spaced_line, spaced, error)) << error << "\n" << spaced_line;
  for (const LoggedRequest* read : {&written, &spaced}) {
    EXPECT_EQ(read->time_us, 1'795'665'014'000'007);
    EXPECT_EQ(read->request.domain, request.domain);
    EXPECT_EQ(read->request.client_id, request.client_id);
    ASSERT_EQ(read->request.descriptors.size(), request.descriptors.size()) << line;
    for (std::size_t d = 0; d < request.descriptors.size(); ++d) {
      ASSERT_EQ(read->request.descriptors[d].size(), request.descriptors[d].size()) << line;
      for (std::size_t e = 0; e < request.descriptors[d].size(); ++e) {
        EXPECT_EQ(read->request.descriptors[d][e].key, request.descriptors[d][e].key);
        EXPECT_EQ(read->request.descriptors[d][e].value, request.descriptors[d][e].value);
      }
    }
    EXPECT_EQ(read->request.hits, request.hits);
    EXPECT_EQ(read->request.descriptor_hits, request.descriptor_hits);
    EXPECT_EQ(read->request.charge, request.charge);
    EXPECT_EQ(read->request.refund, request.refund);
    EXPECT_EQ(read->rule, "r");
    EXPECT_EQ(read->decision, "allowed");
    EXPECT_EQ(read->rules_hash, "h1");
  }
}

TEST(AccessRecordTest, AWrittenLineReadsAsTheGeneralParserReadsIt) {
  LoggedRequest written;
  LoggedRequest spaced;
  DecisionRequest request;
  request.domain = "auth";
  request.client_id = "joe";
  request.descriptors = {{{"user", "mallory"}, {"path", "/login"}, {"k", ""}}, {{"ip", "::1"}}};
  request.hits = 0;
  expectReadAlike(request, written, spaced);
  // Fewer descriptors and entries than the slot's last line; an empty one; more hits.
  request.client_id.clear();
  request.descriptors = {{}, {{"user", "a-rather-longer-value-than-sixteen-bytes"}}};
  request.hits = 7;
  expectReadAlike(request, written, spaced);
  request.descriptors.clear();
  expectReadAlike(request, written, spaced);
  // Escapes, per-descriptor hits, a refund and another charge: the general parser's lines.
  request.domain = "a\"b";
  request.descriptors = {{{"user", "m\u00e9l"}}, {{"user", "x"}}};
  request.descriptor_hits = {std::nullopt, 2};
  request.refund = true;
  request.charge = Charge::kEvery;
  expectReadAlike(request, written, spaced);
}

TEST(AccessRecordTest, AStringRunEndsAtTheFirstQuoteOrBackslashWhereverItIs) {
  // Runs of every length up to a few of the scanner's steps, ended by a quote, a backslash or
  // the end of the text, with bytes on both sides of the two in between.
  for (std::size_t length = 0; length < 50; ++length) {
    for (const char stop : {'"', '\\', '\0'}) {
      std::string text(length, 'a');
      for (std::size_t i = 0; i < length; ++i) {
        text[i] = static_cast<char>("!#[]{}az09\x7f\x80\xff"[i % 13]);
      }
      if (stop != '\0') {
        text += stop;
        text += "tail\"\\";
      }
      const std::size_t run = plainRun(text.data(), text.data() + text.size());
      EXPECT_EQ(run, length) << "length " << length << ", stop " << static_cast<int>(stop);
    }
  }
}

TEST(AccessRecordTest, MalformedLinesSayWhatAndWhere) {
  LoggedRequest parsed;
  std::string error;
  EXPECT_FALSE(
      parseAccessLine("2026-01-02T03:04:05.678+00:00 access domain=\"auth\"", parsed, error));
  EXPECT_NE(error.find("not a JSON object"), std::string::npos) << error;
  EXPECT_FALSE(parseAccessLine(R"({"time":"2026-11-26T03:50:14Z","domain":"a",)", parsed, error));
  EXPECT_EQ(error.rfind("column ", 0), 0u) << error;
  EXPECT_FALSE(parseAccessLine(R"({"domain":"a"})", parsed, error));
  EXPECT_NE(error.find("no \"time\""), std::string::npos) << error;
  EXPECT_FALSE(parseAccessLine(R"({"time":"yesterday","domain":"a"})", parsed, error));
  EXPECT_EQ(error, "column 9: \"time\" is not an RFC 3339 time: \"yesterday\"");
  EXPECT_FALSE(
      parseAccessLine(R"({"time":"2026-11-26T03:50:14Z","domain":"a","hits":-1})", parsed, error));
  EXPECT_FALSE(parseAccessLine(R"({"time":"2026-11-26T03:50:14Z","domain":"a"} x)", parsed, error));
  EXPECT_NE(error.find("text after"), std::string::npos) << error;
}

}  // namespace
}  // namespace sluice::simulate
