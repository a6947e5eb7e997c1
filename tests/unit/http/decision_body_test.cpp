#include "http/decision_body.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "http/decision_codec.hpp"
#include "sluice/common/json_writer.hpp"
#include "sluice/store/limit_override.hpp"

namespace sluice::http {
namespace {

// decisionResponse() with leading fields goes through the general writer; leading fields
// that write nothing give the general writer's answer to compare the usual one with.
void noLeadingFields(JsonWriter& /*writer*/, const Decision& /*decision*/) {}

void expectSameAnswer(const DecisionRequest& request, const Decision& decision) {
  const Response usual = decisionResponse(request, decision);
  const Response general = decisionResponse(request, decision, noLeadingFields);
  EXPECT_EQ(usual.status, general.status);
  EXPECT_EQ(usual.body, general.body);
  EXPECT_EQ(usual.header_lines, general.header_lines);
  EXPECT_EQ(usual.headers.size(), general.headers.size());
  EXPECT_EQ(usual.hold, general.hold);
}

/// A small deterministic generator (xorshift), so that every run checks the same decisions.
class Picks {
 public:
  std::uint64_t next() {
    state_ ^= state_ << 13;
    state_ ^= state_ >> 7;
    state_ ^= state_ << 17;
    return state_;
  }
  template <typename T>
  const T& of(const std::vector<T>& items) {
    return items[next() % items.size()];
  }
  bool coin() { return next() % 2 == 0; }

 private:
  std::uint64_t state_ = 0x9e3779b97f4a7c15ULL;
};

LimitStatus ordinaryLimit(Picks& pick) {
  static const std::vector<std::string> kNames = {"bench.op_fixed_window_allow",
                                                  "auth.auth_type_login",
                                                  "a",
                                                  "quote \" and \\ back",
                                                  "caf\xC3\xA9",
                                                  "bad \xFF utf-8",
                                                  "tab\there",
                                                  std::string(300, 'n')};
  static const std::vector<std::int64_t> kNumbers = {
      -5, 0, 1, 9, 10, 99999999, 100000000, 123456789012LL, 9223372036854775807LL};
  static const std::vector<Micros> kDurations = {
      -1, 0, 1, 999, 1000, 1001, 41'500'000, 3'600'000'000LL, 86'400'000'000'000LL};
  LimitStatus l;
  l.name = pick.of(kNames);
  l.limit = pick.of(kNumbers);
  l.unit = pick.of(
      std::vector<TimeUnit>{TimeUnit::kSecond, TimeUnit::kMinute, TimeUnit::kHour, TimeUnit::kDay});
  l.unit_multiplier = pick.of(std::vector<std::int64_t>{1, 2, 60, 1000000});
  l.window_us = pick.of(kDurations);
  l.algorithm = pick.of(std::vector<Algorithm>{
      Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
      Algorithm::kTokenBucket, Algorithm::kConcurrency});
  l.shadow = pick.coin();
  l.outcome.allowed = pick.coin();
  l.outcome.remaining = pick.of(kNumbers);
  l.outcome.reset_after_us = pick.of(kDurations);
  l.outcome.retry_after_us = pick.of(kDurations);
  return l;
}

Decision ordinaryDecision(Picks& pick) {
  Decision decision;
  decision.allowed = pick.coin();
  const std::size_t descriptors = pick.next() % 4;
  for (std::size_t d = 0; d < descriptors; ++d) {
    DescriptorStatus status;
    status.matched = pick.next() % 4 != 0;
    const std::size_t limits = pick.next() % 3;
    for (std::size_t i = 0; i < limits; ++i) {
      status.limits.push_back(ordinaryLimit(pick));
    }
    decision.descriptors.push_back(std::move(status));
  }
  return decision;
}

TEST(DecisionBodyTest, UsualDecisionsAreAnsweredAsTheGeneralWriterAnswersThem) {
  Picks pick;
  const std::vector<std::string> domains = {"bench", "auth", "", "with space ~ and \x7f"};
  const std::vector<std::string> clients = {"", "c00000001", "u1", std::string(700, 'x')};
  for (int i = 0; i < 3000; ++i) {
    DecisionRequest request;
    request.domain = pick.of(domains);
    request.client_id = pick.of(clients);
    const Decision decision = ordinaryDecision(pick);
    std::string body;
    ASSERT_TRUE(writeUsualDecisionBody(body, request, decision)) << "decision " << i;
    expectSameAnswer(request, decision);
    if (HasFailure()) {
      FAIL() << "decision " << i << ": " << body;
    }
  }
}

TEST(DecisionBodyTest, AppendsToWhatTheBodyHolds) {
  Picks pick;
  DecisionRequest request;
  request.domain = "bench";
  request.client_id = "c1";
  const Decision decision = ordinaryDecision(pick);
  std::string alone;
  ASSERT_TRUE(writeUsualDecisionBody(alone, request, decision));
  std::string after = "prefix";
  ASSERT_TRUE(writeUsualDecisionBody(after, request, decision));
  EXPECT_EQ(after, "prefix" + alone);
}

// Every byte at every place of a domain or client id (the check reads eight bytes at a time
// and pads the rest): the usual writer takes exactly the bytes JSON keeps as they are, and
// then answers as the general writer does.
TEST(DecisionBodyTest, TakesExactlyTheNamesWrittenAsTheyAre) {
  Picks pick;
  Decision decision;
  decision.descriptors.push_back(DescriptorStatus{true, {ordinaryLimit(pick)}});
  for (std::size_t length : {1, 7, 8, 9, 17}) {
    for (std::size_t at = 0; at < length; ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        const char c = static_cast<char>(byte);
        const bool plain = byte >= 0x20 && byte < 0x80 && c != '"' && c != '\\';
        std::string name(length, 'k');
        name[at] = c;
        for (bool in_domain : {true, false}) {
          DecisionRequest request;
          request.domain = in_domain ? name : "bench";
          request.client_id = in_domain ? "u1" : name;
          std::string body;
          ASSERT_EQ(writeUsualDecisionBody(body, request, decision), plain)
              << "byte " << byte << " at " << at << " of " << length;
          if (plain) {
            expectSameAnswer(request, decision);
          }
        }
      }
    }
  }
}

TEST(DecisionBodyTest, AnythingElseIsLeftToTheGeneralWriter) {
  Picks pick;
  std::vector<std::pair<std::string, std::function<void(DecisionRequest&, Decision&)>>> unusual = {
      {"degraded", [](DecisionRequest&, Decision& d) { d.degraded = true; }},
      {"unknown domain", [](DecisionRequest&, Decision& d) { d.domain_known = false; }},
      {"lease", [](DecisionRequest&, Decision& d) { d.lease_id = "lease"; }},
      {"metadata",
       [](DecisionRequest&, Decision& d) { d.descriptors[0].metadata_json = R"({"a":1})"; }},
      {"unlimited",
       [](DecisionRequest&, Decision& d) { d.descriptors[0].limits[0].unlimited = true; }},
      {"override",
       [](DecisionRequest&, Decision& d) {
         auto stored = std::make_shared<StoredOverride>();
         stored->reason = "raised";
         d.descriptors[0].limits[0].override_value = stored;
       }},
      {"leaky bucket",
       [](DecisionRequest&, Decision& d) {
         d.descriptors[0].limits[0].algorithm = Algorithm::kLeakyBucket;
       }},
      {"sketch", [](DecisionRequest&,
                    Decision& d) { d.descriptors[0].limits[0].algorithm = Algorithm::kSketch; }},
      {"never",
       [](DecisionRequest&, Decision& d) { d.descriptors[0].limits[0].outcome.never = true; }},
      {"banned",
       [](DecisionRequest&, Decision& d) { d.descriptors[0].limits[0].outcome.banned = true; }},
      {"domain to escape", [](DecisionRequest& r, Decision&) { r.domain = "do\"main"; }},
      {"client id to escape", [](DecisionRequest& r, Decision&) { r.client_id = "caf\xC3\xA9"; }},
      {"client id with a control byte",
       [](DecisionRequest& r, Decision&) { r.client_id = "a\nb"; }},
      {"domain with a backslash", [](DecisionRequest& r, Decision&) { r.domain = "a\\b"; }},
  };
  for (const auto& [what, change] : unusual) {
    DecisionRequest request;
    request.domain = "auth";
    request.client_id = "u1";
    Decision decision;
    decision.allowed = false;
    decision.descriptors.push_back(DescriptorStatus{true, {ordinaryLimit(pick)}});
    change(request, decision);
    std::string body = "kept";
    EXPECT_FALSE(writeUsualDecisionBody(body, request, decision)) << what;
    EXPECT_EQ(body, "kept") << what;
  }
}

}  // namespace
}  // namespace sluice::http
