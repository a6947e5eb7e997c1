#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "http/fast_decision_parser.hpp"
#include "http/reservation_routes.hpp"

// POST /reserve, /commit and /release: where the fast path answers, it answers what the
// complete parser does; everything else, errors included, is the complete parser's.
namespace sluice::http {
namespace {

void expectSameStep(const DecisionRequest& a, const DecisionRequest& b, std::string_view body) {
  EXPECT_EQ(a.domain, b.domain) << body;
  EXPECT_EQ(a.client_id, b.client_id) << body;
  EXPECT_EQ(a.hits, b.hits) << body;
  EXPECT_EQ(a.descriptor_hits, b.descriptor_hits) << body;
  EXPECT_EQ(a.refund, b.refund) << body;
  EXPECT_EQ(a.charge, b.charge) << body;
  EXPECT_EQ(a.reservation.op, b.reservation.op) << body;
  EXPECT_EQ(a.reservation.ttl_us, b.reservation.ttl_us) << body;
  EXPECT_EQ(a.reservation.id, b.reservation.id) << body;
  ASSERT_EQ(a.descriptors.size(), b.descriptors.size()) << body;
  for (std::size_t d = 0; d < a.descriptors.size(); ++d) {
    ASSERT_EQ(a.descriptors[d].size(), b.descriptors[d].size()) << body;
    for (std::size_t e = 0; e < a.descriptors[d].size(); ++e) {
      EXPECT_EQ(a.descriptors[d][e].key, b.descriptors[d][e].key) << body;
      EXPECT_EQ(a.descriptors[d][e].value, b.descriptors[d][e].value) << body;
    }
  }
}

/// Compares the fast path, the complete parser and the public one on `body`; returns
/// whether the fast path answered.
bool checkStep(std::string_view body, HoldOp op) {
  DecisionRequest fast;
  const bool answered = parseReservationRequestFastInto(body, op, "dflt", fast);
  auto complete = parseReservationRequestComplete(body, op, "dflt");
  if (answered) {
    EXPECT_TRUE(complete.ok()) << body << " -> " << complete.error().message;
    if (complete.ok()) {
      expectSameStep(fast, *complete, body);
    }
  }
  auto pub = parseReservationRequest(body, op, "dflt");
  EXPECT_EQ(pub.ok(), complete.ok()) << body;
  if (pub.ok() && complete.ok()) {
    expectSameStep(*pub, *complete, body);
  } else if (!pub.ok() && !complete.ok()) {
    EXPECT_EQ(pub.error().message, complete.error().message) << body;
  }
  return answered;
}

constexpr std::string_view kWho = R"("domain":"llm","descriptors":[[{"key":"user","value":"u1"}]])";

std::string body(std::string_view fields) {
  return "{" + std::string(kWho) + (fields.empty() ? "" : ",") + std::string(fields) + "}";
}

const std::string kId = "r1.1700000000000000.00112233aabbccdd.0123456789abcdef";

TEST(FastReservationParserTest, AnswersTheCommonShapes) {
  EXPECT_TRUE(checkStep(body(R"("amount":500)"), HoldOp::kReserve));
  EXPECT_TRUE(checkStep(body(R"("amount":1,"ttl_ms":30000)"), HoldOp::kReserve));
  EXPECT_TRUE(checkStep(R"( { "ttl_ms" : 5 , "amount" : 1000000000 , "clientId" : "c" } )",
                        HoldOp::kReserve));
  EXPECT_TRUE(
      checkStep(body(R"("reservation_id":")" + kId + R"(","actual":300)"), HoldOp::kCommit));
  EXPECT_TRUE(checkStep(body(R"("actual":0,"reservation_id":")" + kId + R"(")"), HoldOp::kCommit));
  EXPECT_TRUE(checkStep(body(R"("reservation_id":")" + kId + R"(")"), HoldOp::kRelease));
  EXPECT_TRUE(checkStep(R"({"reservation_id":"x","timestamp":"2023-07-13T07:20:50.52Z"})",
                        HoldOp::kRelease));

  DecisionRequest reserve;
  ASSERT_TRUE(parseReservationRequestFastInto(body(R"("amount":500,"ttl_ms":250)"),
                                              HoldOp::kReserve, "dflt", reserve));
  EXPECT_EQ(reserve.hits, 500);
  EXPECT_EQ(reserve.reservation.op, HoldOp::kReserve);
  EXPECT_EQ(reserve.reservation.ttl_us, 250000);
  DecisionRequest release;
  ASSERT_TRUE(parseReservationRequestFastInto(R"({"reservation_id":"abc"})", HoldOp::kRelease,
                                              "dflt", release));
  EXPECT_EQ(release.hits, 0);
  EXPECT_EQ(release.domain, "dflt");
  EXPECT_EQ(release.reservation.id, "abc");
}

TEST(FastReservationParserTest, LeavesEverythingElseToTheCompleteParser) {
  const std::vector<std::pair<HoldOp, std::string>> bodies = {
      {HoldOp::kReserve, body("")},
      {HoldOp::kReserve, body(R"("amount":0)")},
      {HoldOp::kReserve, body(R"("amount":-1)")},
      {HoldOp::kReserve, body(R"("amount":null)")},
      {HoldOp::kReserve, body(R"("amount":"5")")},
      {HoldOp::kReserve, body(R"("amount":1.5)")},
      {HoldOp::kReserve, body(R"("amount":1000000001)")},
      {HoldOp::kReserve, body(R"("amount":5,"amount":6)")},
      {HoldOp::kReserve, body(R"("amount":5,"ttl_ms":0)")},
      {HoldOp::kReserve, body(R"("amount":5,"ttl_ms":null)")},
      {HoldOp::kReserve, body(R"("amount":5,"ttl_ms":549755813888)")},
      {HoldOp::kReserve, body(R"("amount":5,"hits":5)")},
      {HoldOp::kReserve, body(R"("amount":5,"refund":false)")},
      {HoldOp::kReserve, body(R"("amount":5,"report":null)")},
      {HoldOp::kReserve, body(R"("amount":5,"actual":5)")},
      {HoldOp::kReserve, body(R"("amount":5,"reservation_id":"x")")},
      {HoldOp::kCommit, body(R"("actual":5)")},
      {HoldOp::kCommit, body(R"("reservation_id":"x")")},
      {HoldOp::kCommit, body(R"("reservation_id":5,"actual":5)")},
      {HoldOp::kCommit, body(R"("reservation_id":"a\"b","actual":5)")},
      {HoldOp::kCommit, body(R"("reservation_id":"x","actual":-5)")},
      {HoldOp::kCommit, body(R"("reservation_id":"x","actual":5,"amount":5)")},
      {HoldOp::kCommit, body(R"("reservation_id":"x","actual":5,"ttl_ms":5)")},
      {HoldOp::kCommit, body(R"("reservation_id":"x","reservation_id":"y","actual":5)")},
      {HoldOp::kRelease, body("")},
      {HoldOp::kRelease, body(R"("reservation_id":"x","actual":5)")},
      {HoldOp::kRelease, body(R"("reservation_id":null)")},
      {HoldOp::kRelease, R"({"domain":"","reservation_id":"x"})"},
      {HoldOp::kRelease, R"({"reservation_id":"x"} x)"},
      {HoldOp::kRelease, "[]"},
  };
  for (const auto& [op, text] : bodies) {
    EXPECT_FALSE(checkStep(text, op)) << text;
  }
}

// Random mutations of valid bodies of each step: wherever the fast path answers, it agrees.
TEST(FastReservationParserTest, AgreesWithTheCompleteParserOnMutations) {
  const std::vector<std::pair<HoldOp, std::string>> seeds = {
      {HoldOp::kReserve,
       R"({"domain":"d","clientId":"c","amount":20,"ttl_ms":1500,"descriptors":[{"entries":[{"key":"a","value":"1"}]},[{"key":"b","value":""}]],"timestamp":"2024-02-29T23:59:60Z"})"},
      {HoldOp::kCommit,
       R"({"domain":"d","descriptors":[[{"key":"a","value":"1"}]],"reservation_id":"r1.5.0a.0b","actual":30})"},
      {HoldOp::kRelease,
       R"({"clientId":"c","descriptors":[[{"key":"a","value":"1"}]],"reservation_id":"r1.5.0a.0b"})"},
  };
  const std::string alphabet = "{}[]\":,0123456789 abkeyvalu-\\\n.";
  std::mt19937 rng(11);
  for (const auto& [op, seed] : seeds) {
    int answered = 0;
    for (int i = 0; i < 8000; ++i) {
      std::string text = seed;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const std::size_t pos = rng() % text.size();
        switch (rng() % 3) {
          case 0:
            text[pos] = alphabet[rng() % alphabet.size()];
            break;
          case 1:
            text.erase(pos, 1);
            break;
          default:
            text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
        }
      }
      answered += checkStep(text, op) ? 1 : 0;
    }
    EXPECT_GT(answered, 100) << seed;  // the mutations do exercise the fast path
  }
}

}  // namespace
}  // namespace sluice::http
