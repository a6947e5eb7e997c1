#include "http/fast_decision_parser.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "http/decision_codec.hpp"

namespace sluice::http {
namespace {

void expectSameRequest(const DecisionRequest& a, const DecisionRequest& b, std::string_view body) {
  EXPECT_EQ(a.domain, b.domain) << body;
  EXPECT_EQ(a.client_id, b.client_id) << body;
  EXPECT_EQ(a.hits, b.hits) << body;
  EXPECT_EQ(a.descriptor_hits, b.descriptor_hits) << body;
  ASSERT_EQ(a.descriptors.size(), b.descriptors.size()) << body;
  for (std::size_t d = 0; d < a.descriptors.size(); ++d) {
    ASSERT_EQ(a.descriptors[d].size(), b.descriptors[d].size()) << body;
    for (std::size_t e = 0; e < a.descriptors[d].size(); ++e) {
      EXPECT_EQ(a.descriptors[d][e].key, b.descriptors[d][e].key) << body;
      EXPECT_EQ(a.descriptors[d][e].value, b.descriptors[d][e].value) << body;
    }
  }
}

/// Where the fast path answers, the complete parser must accept the body and agree.
/// Returns whether the fast path answered.
bool checkAgainstComplete(std::string_view body) {
  auto fast = parseDecisionRequestFast(body, "dflt");
  auto complete = parseDecisionRequestComplete(body, "dflt");
  if (fast) {
    EXPECT_TRUE(complete.ok()) << body << " -> " << complete.error().message;
    if (complete.ok()) {
      expectSameRequest(*fast, *complete, body);
    }
  }
  return fast.has_value();
}

TEST(FastDecisionParserTest, AnswersTheCommonShapes) {
  const std::vector<std::string> bodies = {
      R"({"domain":"bench","clientId":"c1","descriptors":[{"entries":[{"key":"op","value":"x"}]}]})",
      R"({"domain":"auth","clientId":"user-123","hits":3,"timestamp":"2023-07-13T07:20:50.52Z",
          "descriptors":[{"entries":[{"key":"auth_type","value":"login"},{"key":"b","value":""}]}]})",
      R"( { "descriptors" : [ [ {"value":"1","key":"a"} ] , {"hitsAddend":2,"entries":[{"key":"b","value":"2"}]} ] } )",
      R"({"clientId":"","hits":0,"descriptors":[]})",
      R"({})",
      R"({"descriptors":[{"entries":[{"key":"a","value":"1"}],"hits_addend":0},[{"key":"b","value":"2"}]]})",
      "{\"domain\":\"d\",\"hits\":1000000000}\r\n",
  };
  for (const auto& body : bodies) {
    EXPECT_TRUE(checkAgainstComplete(body)) << body;
  }
  auto r = parseDecisionRequestFast(bodies[5], "dflt");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->domain, "dflt");
  ASSERT_EQ(r->descriptor_hits.size(), 2u);
  EXPECT_EQ(r->descriptor_hits[0], 0);
  EXPECT_FALSE(r->descriptor_hits[1].has_value());
}

TEST(FastDecisionParserTest, LeavesEverythingElseToTheCompleteParser) {
  const std::vector<std::string> bodies = {
      "",
      "[]",
      R"({"domain":"a\"b"})",            // an escape
      "{\"domain\":\"caf\xC3\xA9\"}",    // non-ASCII
      R"({"domain":"a","domain":"b"})",  // a duplicate field
      R"({"domain":null})",              // null means "not given"
      R"({"domain":""})",                // an error
      R"({"hits":-1})",
      R"({"hits":1.0})",
      R"({"hits":1e2})",
      R"({"hits":01})",
      R"({"hits":1000000001})",
      R"({"hits":"3"})",
      R"({"other":1})",
      R"({"descriptors":[{"entries":[]}]})",
      R"({"descriptors":[[{"key":"","value":"x"}]]})",
      R"({"descriptors":[[{"key":"a"}]]})",
      R"({"descriptors":[[{"key":"a","value":"1","key":"b"}]]})",
      R"({"descriptors":[{"entries":[{"key":"a","value":"1"}],"hits_addend":1,"hitsAddend":2}]})",
      R"({"descriptors":[{"entries":[{"key":"a","value":"1"}],"limit":{}}]})",
      R"({"descriptors":[[{"key":"a","value":"1"},]]})",
      R"({"timestamp":"yesterday"})",
      R"({} x)",
      std::string(R"({"domain":"a"})"
                  "\0",
                  15),  // a NUL after the document
      "{\"domain\":\"a\tb\"}",
  };
  for (const auto& body : bodies) {
    EXPECT_FALSE(checkAgainstComplete(body)) << body;
    // And the public parser still answers as the complete one does.
    auto a = parseDecisionRequest(body, "dflt");
    auto b = parseDecisionRequestComplete(body, "dflt");
    ASSERT_EQ(a.ok(), b.ok()) << body;
    if (!a.ok()) {
      EXPECT_EQ(a.error().message, b.error().message);
    }
  }
}

TEST(FastDecisionParserTest, EnforcesTheBounds) {
  std::string many = R"({"descriptors":[)";
  for (std::size_t i = 0; i <= kMaxDescriptors; ++i) {
    many += (i ? "," : "") + std::string(R"([{"key":"k","value":"v"}])");
  }
  many += "]}";
  EXPECT_FALSE(checkAgainstComplete(many));
  std::string long_value = R"({"clientId":")" + std::string(kMaxStringBytes + 1, 'x') + R"("})";
  EXPECT_FALSE(checkAgainstComplete(long_value));
  std::string at_bound = R"({"clientId":")" + std::string(kMaxStringBytes, 'x') + R"("})";
  EXPECT_TRUE(checkAgainstComplete(at_bound));
}

// Random mutations of valid bodies: wherever the fast path answers, it agrees.
TEST(FastDecisionParserTest, AgreesWithTheCompleteParserOnMutations) {
  const std::string seed =
      R"({"domain":"d","clientId":"c","hits":2,"descriptors":[{"entries":[{"key":"a","value":"1"}],"hits_addend":3},[{"key":"b","value":""}]],"timestamp":"2024-02-29T23:59:60Z"})";
  const std::string alphabet = "{}[]\":,0123456789 abkeyvalu-\\\n.";
  std::mt19937 rng(7);
  int answered = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string body = seed;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      std::size_t pos = rng() % body.size();
      switch (rng() % 3) {
        case 0:
          body[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.erase(pos, 1);
          break;
        default:
          body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    answered += checkAgainstComplete(body) ? 1 : 0;
  }
  EXPECT_GT(answered, 100);  // the mutations do exercise the fast path
}

// Strings are scanned eight bytes at a time while eight are left, then byte by byte: an
// escape, a control, a non-ASCII byte or a quote at every position of a long client id (each
// lane of a word, and the bytes near the body's end) gives the complete parser's answer.
TEST(FastDecisionParserTest, EveryByteAtEveryPositionOfAStringAgreesWithTheCompleteParser) {
  const std::string bytes = std::string("\\\"\x01\x1f\x7f\x80\xc3\xff\t a", 12);
  int answered = 0;
  for (std::size_t at = 0; at < 20; ++at) {
    for (char c : bytes) {
      std::string id(20, 'c');
      id[at] = c;
      answered += checkAgainstComplete(R"({"descriptors":[],"clientId":")" + id + R"("})") ? 1 : 0;
      answered += checkAgainstComplete(R"({"clientId":")" + id + "\"") ? 1 : 0;
      answered += checkAgainstComplete(R"({"domain":")" + id.substr(0, at + 1) + R"("})") ? 1 : 0;
    }
  }
  EXPECT_GT(answered, 100);
}

// POST /json (parseEnvoyRequestFast): the same contract against parseEnvoyRequestComplete.

void expectSameEnvoyRequest(const DecisionRequest& a, const DecisionRequest& b,
                            std::string_view body) {
  expectSameRequest(a, b, body);
  EXPECT_EQ(a.descriptor_limits.size(), b.descriptor_limits.size()) << body;
}

bool checkEnvoyAgainstComplete(std::string_view body) {
  auto fast = parseEnvoyRequestFast(body);
  auto complete = parseEnvoyRequestComplete(body);
  if (fast) {
    EXPECT_TRUE(complete.ok()) << body << " -> " << complete.error().message;
    if (complete.ok()) {
      expectSameEnvoyRequest(*fast, *complete, body);
    }
    EXPECT_TRUE(fast->descriptor_limits.empty()) << body;
  }
  // The public parser answers as the complete one does, whichever path it takes.
  auto pub = parseEnvoyRequest(body);
  EXPECT_EQ(pub.ok(), complete.ok()) << body;
  if (pub.ok() && complete.ok()) {
    expectSameEnvoyRequest(*pub, *complete, body);
  } else if (!pub.ok() && !complete.ok()) {
    EXPECT_EQ(pub.error().message, complete.error().message) << body;
  }
  return fast.has_value();
}

TEST(FastEnvoyParserTest, AnswersTheCommonShapes) {
  const std::vector<std::string> bodies = {
      R"({"domain":"edge","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]})",
      R"({"domain":"edge","descriptors":[{"entries":[{"key":"a","value":"1"},{"key":"b","value":""}]}],"hitsAddend":3})",
      R"( { "hits_addend" : 0 , "descriptors" : [ {"hits_addend":2,"entries":[{"value":"1","key":"a"}]} ,
            {"entries":[{"key":"b","value":"2"}]} ] , "domain" : "d" } )",
      "{\"domain\":\"d\",\"descriptors\":[{\"entries\":[{\"key\":\"k\",\"value\":\"v\"}]}]}\r\n",
  };
  for (const auto& body : bodies) {
    EXPECT_TRUE(checkEnvoyAgainstComplete(body)) << body;
  }
  auto r = parseEnvoyRequestFast(bodies[2]);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->hits, 1);  // 0 means 1, as envoy does
  ASSERT_EQ(r->descriptor_hits.size(), 2u);
  EXPECT_EQ(r->descriptor_hits[0], 2);
  EXPECT_FALSE(r->descriptor_hits[1].has_value());
  auto h = parseEnvoyRequestFast(bodies[1]);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->hits, 3);
  EXPECT_TRUE(h->client_id.empty());
}

TEST(FastEnvoyParserTest, LeavesEverythingElseToTheCompleteParser) {
  const std::string one = R"([{"entries":[{"key":"a","value":"1"}]}])";
  const std::vector<std::string> bodies = {
      "",
      "[]",
      "{}",                                          // domain and descriptors required
      R"({"domain":"d"})",                           // descriptors required
      R"({"domain":"d","descriptors":[]})",          // must be non-empty
      R"({"descriptors":)" + one + "}",              // domain required
      R"({"domain":"","descriptors":)" + one + "}",  // an error
      R"({"domain":null,"descriptors":)" + one + "}",
      R"({"domain":"a\"b","descriptors":)" + one + "}",  // an escape
      "{\"domain\":\"caf\xC3\xA9\",\"descriptors\":" + one + "}",
      R"({"domain":"a","domain":"b","descriptors":)" + one + "}",
      R"({"domain":"d","clientId":"c","descriptors":)" + one + "}",  // not an envoy field
      R"({"domain":"d","hits":2,"descriptors":)" + one + "}",
      R"({"domain":"d","hits_addend":"3","descriptors":)" + one + "}",  // proto3's string
      R"({"domain":"d","hits_addend":1,"hitsAddend":2,"descriptors":)" + one + "}",
      R"({"domain":"d","hits_addend":-1,"descriptors":)" + one + "}",
      R"({"domain":"d","hits_addend":1.5,"descriptors":)" + one + "}",
      R"({"domain":"d","hits_addend":1000000001,"descriptors":)" + one + "}",
      R"({"domain":"d","descriptors":[[{"key":"a","value":"1"}]]})",  // a bare list
      R"({"domain":"d","descriptors":[{"entries":[]}]})",
      R"({"domain":"d","descriptors":[{}]})",
      R"({"domain":"d","descriptors":[{"entries":[{"key":"a"}]}]})",  // value left out
      R"({"domain":"d","descriptors":[{"entries":[{"key":"","value":"1"}]}]})",
      R"({"domain":"d","descriptors":[{"entries":[{"key":"a","value":"1"}],"limit":{"requestsPerUnit":5,"unit":"SECOND"}}]})",
      R"({"domain":"d","descriptors":[{"entries":[{"key":"a","value":"1"}],"hits_addend":"2"}]})",
      R"({"domain":"d","descriptors":[{"entries":[{"key":"a","value":"1"}],"other":1}]})",
      R"({"domain":"d","descriptors":)" + one + "} x",
  };
  for (const auto& body : bodies) {
    EXPECT_FALSE(checkEnvoyAgainstComplete(body)) << body;
  }
}

TEST(FastEnvoyParserTest, AgreesWithTheCompleteParserOnMutations) {
  const std::string seed =
      R"({"domain":"d","hits_addend":2,"descriptors":[{"entries":[{"key":"a","value":"1"}],"hits_addend":3},{"entries":[{"key":"b","value":""}]}]})";
  const std::string alphabet = "{}[]\":,0123456789 abkeyvalu-\\\n.";
  std::mt19937 rng(11);
  int answered = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string body = seed;
    int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      std::size_t pos = rng() % body.size();
      switch (rng() % 3) {
        case 0:
          body[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          body.erase(pos, 1);
          break;
        default:
          body.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    answered += checkEnvoyAgainstComplete(body) ? 1 : 0;
  }
  EXPECT_GT(answered, 100);
}

}  // namespace
}  // namespace sluice::http
