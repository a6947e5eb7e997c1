#include "http/decision_codec.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace sluice::http {
namespace {

using nlohmann::json;

std::string parseError(std::string_view body) {
  auto parsed = parseDecisionRequest(body, "default");
  EXPECT_FALSE(parsed.ok()) << body;
  if (parsed.ok()) {
    return {};
  }
  EXPECT_EQ(parsed.error().kind, ErrorKind::kInvalidArgument);
  return parsed.error().message;
}

std::string envoyError(std::string_view body) {
  auto parsed = parseEnvoyRequest(body);
  EXPECT_FALSE(parsed.ok()) << body;
  return parsed.ok() ? std::string() : parsed.error().message;
}

TEST(DecisionCodecTest, ParsesTheFullRequest) {
  auto r = parseDecisionRequest(
      R"({"domain":"auth","clientId":"user-123","hits":3,"timestamp":"2023-07-13T07:20:50.52Z",
          "descriptors":[{"entries":[{"key":"auth_type","value":"login"},{"key":"b","value":""}]}]})",
      "default");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->domain, "auth");
  EXPECT_EQ(r->client_id, "user-123");
  EXPECT_EQ(r->hits, 3);
  ASSERT_EQ(r->descriptors.size(), 1u);
  ASSERT_EQ(r->descriptors[0].size(), 2u);
  EXPECT_EQ(r->descriptors[0][0].key, "auth_type");
  EXPECT_EQ(r->descriptors[0][0].value, "login");
  EXPECT_EQ(r->descriptors[0][1].value, "");
  EXPECT_TRUE(r->descriptor_hits.empty());
}

TEST(DecisionCodecTest, RefundAndReportAreBooleansAndExclusive) {
  auto refund = parseDecisionRequest(
      R"({"domain":"llm","hits":180,"refund":true,"descriptors":[[{"key":"user","value":"u"}]]})",
      "default");
  ASSERT_TRUE(refund.ok()) << refund.error().message;
  EXPECT_TRUE(refund->refund);
  EXPECT_EQ(refund->charge, Charge::kAllOrNothing);
  EXPECT_FALSE(refund->envoy_api);
  auto report = parseDecisionRequest(R"({"hits":320,"report":true})", "default");
  ASSERT_TRUE(report.ok()) << report.error().message;
  EXPECT_FALSE(report->refund);
  EXPECT_EQ(report->charge, Charge::kReport);
  EXPECT_EQ(parseError(R"({"refund":"yes"})"), "refund: must be true or false");
  EXPECT_NE(parseError(R"({"refund":true,"report":true})").find("cannot both be true"),
            std::string::npos);
  EXPECT_NE(parseError(R"({"descriptors":[{"entries":[],"is_negative_hits":true}]})")
                .find("is an envoy API field"),
            std::string::npos);
}

TEST(DecisionCodecTest, EnvoysIsNegativeHitsRefundsItsDescriptor) {
  auto r = parseEnvoyRequest(
      R"({"domain":"llm","descriptors":[{"entries":[{"key":"user","value":"u"}]},
          {"entries":[{"key":"user","value":"v"}],"hits_addend":5,"is_negative_hits":true}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->envoy_api);
  ASSERT_EQ(r->descriptor_refunds.size(), 2U);
  EXPECT_FALSE(r->refunds(0));
  EXPECT_TRUE(r->refunds(1));
  EXPECT_NE(envoyError(R"({"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}],
                           "isNegativeHits":1}]})")
                .find("must be true or false"),
            std::string::npos);
}

TEST(DecisionCodecTest, DefaultsDomainAndHits) {
  auto r = parseDecisionRequest(R"({"clientId":"123"})", "fallback");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->domain, "fallback");
  EXPECT_EQ(r->hits, 1);
  EXPECT_TRUE(r->descriptors.empty());
}

TEST(DecisionCodecTest, AcceptsTheBareListShape) {
  auto r = parseDecisionRequest(R"({"descriptors":[[{"key":"a","value":"1"}],
                                                   {"entries":[{"key":"b","value":"2"}]}]})",
                                "d");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->descriptors.size(), 2u);
  EXPECT_EQ(r->descriptors[0][0].key, "a");
  EXPECT_EQ(r->descriptors[1][0].key, "b");
}

TEST(DecisionCodecTest, NullMeansAbsent) {
  auto r = parseDecisionRequest(R"({"domain":null,"clientId":null,"hits":null})", "d");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->domain, "d");
  EXPECT_EQ(r->hits, 1);
}

TEST(DecisionCodecTest, DescriptorHitsAddendIsKeptPerDescriptor) {
  auto r = parseDecisionRequest(
      R"({"descriptors":[{"entries":[{"key":"a","value":"1"}],"hits_addend":4},[{"key":"b","value":"2"}]]})",
      "d");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->descriptor_hits.size(), 2u);
  EXPECT_EQ(r->descriptor_hits[0], 4);
  EXPECT_FALSE(r->descriptor_hits[1].has_value());
}

TEST(DecisionCodecTest, EveryMalformedShapeNamesTheField) {
  EXPECT_EQ(parseError("").substr(0, 24), "body: invalid JSON: pars");
  EXPECT_EQ(parseError("{").substr(0, 19), "body: invalid JSON:");
  EXPECT_EQ(parseError("[1]"), "body: must be a JSON object");
  EXPECT_EQ(parseError("\"x\""), "body: must be a JSON object");
  EXPECT_EQ(parseError(R"({"domain":5})"), "domain: must be a non-empty string");
  EXPECT_EQ(parseError(R"({"domain":""})"), "domain: must be a non-empty string");
  EXPECT_EQ(parseError(R"({"clientId":7})"), "clientId: must be a string");
  EXPECT_EQ(parseError(R"({"hits":-1})"), "hits: must be an integer from 0 to 1000000000");
  EXPECT_EQ(parseError(R"({"hits":1.5})"), "hits: must be an integer from 0 to 1000000000");
  EXPECT_EQ(parseError(R"({"hits":"2"})"), "hits: must be an integer from 0 to 1000000000");
  EXPECT_EQ(parseError(R"({"hits":true})"), "hits: must be an integer from 0 to 1000000000");
  EXPECT_EQ(parseError(R"({"hits":1000000001})"), "hits: must be an integer from 0 to 1000000000");
  EXPECT_EQ(parseError(R"({"timestamp":5})").substr(0, 10), "timestamp:");
  EXPECT_EQ(parseError(R"({"timestamp":"yesterday"})").substr(0, 10), "timestamp:");
  EXPECT_EQ(parseError(R"({"descriptors":{}})"), "descriptors: must be an array");
  EXPECT_EQ(parseError(R"({"descriptors":[5]})"),
            "descriptors[0]: must be an object {\"entries\": [...]} or an array of entries");
  EXPECT_EQ(parseError(R"({"descriptors":[{"entries":{}}]})"),
            "descriptors[0].entries: must be an array of {\"key\", \"value\"} objects");
  EXPECT_EQ(parseError(R"({"descriptors":[{"entries":["a"]}]})"),
            "descriptors[0].entries[0]: must be an object {\"key\": ..., \"value\": ...}");
  EXPECT_EQ(parseError(R"({"descriptors":[{"entries":[{"value":"x"}]}]})"),
            "descriptors[0].entries[0].key: is required");
  EXPECT_EQ(parseError(R"({"descriptors":[[{"key":"a","value":"1"}],[{"key":"b","value":7}]]})"),
            "descriptors[1][0].value: must be a string");
  EXPECT_EQ(parseError(R"({"descriptors":[{"entries":[{"key":"","value":"x"}]}]})"),
            "descriptors[0].entries[0].key: must be a non-empty string");
  EXPECT_EQ(parseError(R"({"descriptors":[{"entries":[{"key":1,"value":"x"}]}]})"),
            "descriptors[0].entries[0].key: must be a non-empty string");
  EXPECT_EQ(parseError(R"({"descriptors":[{"entries":[{"key":"a","value":"1","x":2}]}]})"),
            "descriptors[0].entries[0]: unknown field \"x\" (expected \"key\" and \"value\")");
  EXPECT_EQ(parseError(R"({"descriptors":[{"entries":[{"key":"a","value":"1"}],"extra":1}]})"),
            "descriptors[0]: unknown field \"extra\"");
  EXPECT_EQ(
      parseError(R"({"descriptors":[{"entries":[{"key":"a","value":"1"}],"hits_addend":-2}]})"),
      "descriptors[0].hits_addend: must be an integer from 0 to 1000000000");
  EXPECT_EQ(parseError(R"({"descriptor":[]})"),
            "body: unknown field \"descriptor\" (expected domain, clientId, descriptors, hits, "
            "refund, report, timestamp)");
}

TEST(DecisionCodecTest, BoundsAreEnforced) {
  std::string long_value(kMaxStringBytes + 1, 'x');
  EXPECT_EQ(parseError(R"({"clientId":")" + long_value + "\"}"),
            "clientId: must be at most 1024 bytes");
  std::string many = R"({"descriptors":[)";
  for (std::size_t i = 0; i <= kMaxDescriptors; ++i) {
    many += (i ? "," : "") + std::string(R"([{"key":"a","value":"b"}])");
  }
  many += "]}";
  EXPECT_EQ(parseError(many), "descriptors: must have at most 64 descriptors");
}

TEST(DecisionCodecTest, Iso8601Validation) {
  EXPECT_TRUE(isIso8601DateTime("2023-07-13T07:20:50.52Z"));
  EXPECT_TRUE(isIso8601DateTime("2023-07-13T07:20:50Z"));
  EXPECT_TRUE(isIso8601DateTime("2023-07-13t07:20:50z"));
  EXPECT_TRUE(isIso8601DateTime("2023-07-13T07:20:50+02:00"));
  EXPECT_TRUE(isIso8601DateTime("2023-07-13T07:20:50.123456-05:30"));
  EXPECT_TRUE(isIso8601DateTime("2024-02-29T00:00:00Z"));
  EXPECT_TRUE(isIso8601DateTime("2023-07-13T07:20:50"));
  EXPECT_FALSE(isIso8601DateTime("2023-02-29T00:00:00Z"));
  EXPECT_FALSE(isIso8601DateTime("1900-02-29T00:00:00Z"));
  EXPECT_FALSE(isIso8601DateTime("2023-13-01T00:00:00Z"));
  EXPECT_FALSE(isIso8601DateTime("2023-07-13T24:00:00Z"));
  EXPECT_FALSE(isIso8601DateTime("2023-07-13T07:60:00Z"));
  EXPECT_FALSE(isIso8601DateTime("2023-07-13 07:20:50Z"));
  EXPECT_FALSE(isIso8601DateTime("2023-07-13T07:20:50.Z"));
  EXPECT_FALSE(isIso8601DateTime("2023-07-13T07:20:50+2:00"));
  EXPECT_FALSE(isIso8601DateTime("2023-07-13T07:20:50ZZ"));
  EXPECT_FALSE(isIso8601DateTime("2023-07-13"));
  EXPECT_FALSE(isIso8601DateTime(""));
}

TEST(DecisionCodecTest, EnvoyRequestShape) {
  auto r = parseEnvoyRequest(
      R"({"domain":"auth","descriptors":[{"entries":[{"key":"auth_type","value":"login"}],"hitsAddend":"2"}],"hits_addend":0})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->domain, "auth");
  EXPECT_EQ(r->hits, 1);  // envoy treats 0 as 1
  ASSERT_EQ(r->descriptor_hits.size(), 1u);
  EXPECT_EQ(r->descriptor_hits[0], 2);
}

TEST(DecisionCodecTest, EnvoyRequestErrors) {
  EXPECT_EQ(envoyError(R"({"descriptors":[{"entries":[{"key":"a","value":"b"}]}]})"),
            "domain: is required (a non-empty string)");
  EXPECT_EQ(envoyError(R"({"domain":"d"})"), "descriptors: must be a non-empty array");
  EXPECT_EQ(envoyError(R"({"domain":"d","descriptors":[]})"),
            "descriptors: must be a non-empty array");
  EXPECT_EQ(envoyError(R"({"domain":"d","descriptors":[[{"key":"a","value":"b"}]]})"),
            "descriptors[0]: must be an object {\"entries\": [...]}");
  EXPECT_EQ(
      envoyError(
          R"({"domain":"d","descriptors":[{"entries":[{"key":"a","value":"b"}],"limit":{}}]})"),
      "descriptors[0].limit.unit: is required (SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR)");
  EXPECT_EQ(
      envoyError(
          R"({"domain":"d","descriptors":[{"entries":[],"limit":{"requestsPerUnit":1,"unit":"FORTNIGHT"}}]})"),
      "descriptors[0].limit.unit: must be SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR");
  EXPECT_EQ(
      envoyError(
          R"({"domain":"d","descriptors":[{"entries":[],"limit":{"requestsPerUnit":-1,"unit":"DAY"}}]})"),
      "descriptors[0].limit.requestsPerUnit: must be an integer from 0 to 4294967295");
  EXPECT_EQ(
      envoyError(
          R"({"domain":"d","descriptors":[{"entries":[],"limit":{"unit":"DAY","burst":3}}]})"),
      "descriptors[0].limit: unknown field \"burst\" (expected requestsPerUnit, unit)");
  EXPECT_EQ(
      envoyError(
          R"({"domain":"d","hits_addend":"x","descriptors":[{"entries":[{"key":"a","value":"b"}]}]})"),
      "hits_addend: must be an integer from 0 to 1000000000");
}

LimitStatus loginLimit(bool allowed, std::int64_t remaining) {
  LimitStatus l;
  l.name = "auth.auth_type_login";
  l.limit = 5;
  l.unit = TimeUnit::kMinute;
  l.window_us = 60 * kMicrosPerSecond;
  l.outcome.allowed = allowed;
  l.outcome.remaining = remaining;
  l.outcome.reset_after_us = 41'500'000;
  l.outcome.retry_after_us = allowed ? 0 : 41'500'000;
  return l;
}

TEST(DecisionCodecTest, DeniedResponseCarriesBodyAndHeaders) {
  DecisionRequest request;
  request.domain = "auth";
  request.client_id = "u1";
  Decision decision;
  decision.allowed = false;
  decision.descriptors.push_back(DescriptorStatus{true, {loginLimit(false, 0)}});
  Response r = decisionResponse(request, decision);
  EXPECT_EQ(r.status, 429);
  json body = json::parse(r.body);
  EXPECT_EQ(body["allowed"], false);
  EXPECT_EQ(body["clientId"], "u1");
  EXPECT_EQ(body["descriptors"][0]["limits"][0]["retry_after_ms"], 41500);
  EXPECT_EQ(body["descriptors"][0]["limits"][0]["unit"], "minute");
  EXPECT_EQ(r.header("Retry-After"), "42");
  EXPECT_EQ(r.header("x-ratelimit-limit"), "5");
}

TEST(DecisionCodecTest, EnvoyRequestsAsEnvoyAcceptsThem) {
  // An entry without value is "" (proto3 JSON leaves empty strings out); a descriptor
  // without entries is empty; a descriptor may carry its own limit.
  auto r = parseEnvoyRequest(
      R"({"domain":"d","descriptors":[{"entries":[{"key":"a"},{"key":"b","value":null}]},{},
          {"entries":[]},{"entries":[{"key":"k","value":"v"}],
          "limit":{"requestsPerUnit":10,"unit":"DAY"}},{"entries":[{"key":"k","value":"v"}],
          "limit":{"requests_per_unit":"7","unit":7}}]})");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->descriptors.size(), 5u);
  EXPECT_EQ(r->descriptors[0][0].value, "");
  EXPECT_EQ(r->descriptors[0][1].value, "");
  EXPECT_TRUE(r->descriptors[1].empty());
  EXPECT_TRUE(r->descriptors[2].empty());
  ASSERT_EQ(r->descriptor_limits.size(), 5u);
  EXPECT_FALSE(r->descriptor_limits[0].has_value());
  ASSERT_TRUE(r->descriptor_limits[3].has_value());
  EXPECT_EQ(r->descriptor_limits[3]->requests_per_unit, 10);
  EXPECT_EQ(r->descriptor_limits[3]->unit, TimeUnit::kDay);
  EXPECT_EQ(r->descriptor_limits[4]->requests_per_unit, 7);
  EXPECT_EQ(r->descriptor_limits[4]->unit, TimeUnit::kWeek);  // envoy's WEEK = 7
}

TEST(DecisionCodecTest, SluiceRequestsAcceptMissingValuesAndEmptyDescriptorsButNoLimits) {
  auto r = parseDecisionRequest(R"({"descriptors":[[{"key":"a"}],{},{"entries":[]},[]]})", "d");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->descriptors.size(), 4u);
  EXPECT_EQ(r->descriptors[0][0].value, "");
  EXPECT_TRUE(r->descriptors[1].empty());
  EXPECT_TRUE(r->descriptor_limits.empty());
  EXPECT_EQ(
      parseError(R"({"descriptors":[{"entries":[],"limit":{"requestsPerUnit":1,"unit":"DAY"}}]})"),
      "descriptors[0].limit: request-side limits are an envoy API feature (POST /json, gRPC)");
}

TEST(DecisionCodecTest, EnvoyResponseShape) {
  Decision decision;
  decision.allowed = false;
  decision.descriptors.push_back(DescriptorStatus{true, {loginLimit(false, 0)}});
  decision.descriptors.back().limits[0].explicit_name = true;
  decision.descriptors.push_back(DescriptorStatus{false, {}});
  Response r = envoyResponse(decision);
  EXPECT_EQ(r.status, 429);
  json body = json::parse(r.body);
  EXPECT_EQ(body["overallCode"], "OVER_LIMIT");
  ASSERT_EQ(body["statuses"].size(), 2u);
  EXPECT_EQ(body["statuses"][0]["code"], "OVER_LIMIT");
  EXPECT_EQ(body["statuses"][0]["currentLimit"]["requestsPerUnit"], 5);
  EXPECT_EQ(body["statuses"][0]["currentLimit"]["unit"], "MINUTE");
  EXPECT_EQ(body["statuses"][0]["currentLimit"]["name"], "auth.auth_type_login");
  EXPECT_EQ(body["statuses"][0]["limitRemaining"], 0);
  EXPECT_EQ(body["statuses"][0]["durationUntilReset"], "42s");
  EXPECT_EQ(body["statuses"][1], json({{"code", "OK"}}));
}

TEST(DecisionCodecTest, EnvoyLeavesOutGeneratedNamesAndAnswersUnlimitedWithAllOfUint32) {
  Decision decision;
  decision.descriptors.push_back(DescriptorStatus{true, {loginLimit(true, 4)}});
  LimitStatus unlimited;
  unlimited.name = "free";
  unlimited.unlimited = true;
  decision.descriptors.push_back(DescriptorStatus{true, {unlimited}});
  json body = json::parse(envoyResponse(decision).body);
  EXPECT_FALSE(body["statuses"][0]["currentLimit"].contains("name"));
  EXPECT_EQ(body["statuses"][1], json({{"code", "OK"}, {"limitRemaining", 4294967295LL}}));
}

TEST(DecisionCodecTest, RuleMetadataIsReturned) {
  DecisionRequest request;
  request.domain = "auth";
  request.hits = 2;
  request.descriptor_hits = {std::nullopt, 3};
  request.descriptor_limits = {std::nullopt, LimitOverride{10, TimeUnit::kDay}};
  Decision decision;
  decision.descriptors.push_back(DescriptorStatus{true, {loginLimit(true, 4)}, R"({"owner":"a"})"});
  decision.descriptors.push_back(DescriptorStatus{false, {}, ""});
  request.descriptors = {{{"auth_type", "login"}}, {{"k", ""}, {"x", "y"}}};
  decision.request = request;
  decision.metadata_json = R"({"owner":"a"})";
  json envoy = json::parse(envoyResponse(decision).body);
  // envoyproxy/ratelimit's response dynamic metadata.
  EXPECT_EQ(envoy["dynamicMetadata"],
            json::parse(R"({"domain":"auth","descriptors":[{"entries":["auth_type=login"]},
                {"entries":["k=","x=y"],"limit":"requests_per_unit:10 unit:DAY","hitsAddend":3}],
                "hitsAddend":2,"metadata":{"owner":"a"}})"));
  json own = json::parse(decisionResponse(DecisionRequest{}, decision).body);
  EXPECT_EQ(own["descriptors"][0]["metadata"]["owner"], "a");
  EXPECT_FALSE(own["descriptors"][1].contains("metadata"));
  decision.descriptors[0].metadata_json.clear();
  EXPECT_FALSE(json::parse(envoyResponse(decision).body).contains("dynamicMetadata"));
}

TEST(DecisionCodecTest, ShapedLeakyBucketHoldsTheAnswer) {
  Decision decision;
  LimitStatus l = loginLimit(true, 3);
  l.algorithm = Algorithm::kLeakyBucket;
  l.shape = true;
  l.outcome.delay_us = 250'000;
  decision.descriptors.push_back(DescriptorStatus{true, {l}});
  Response r = decisionResponse(DecisionRequest{}, decision);
  EXPECT_EQ(r.hold, std::chrono::microseconds(250'000));
  EXPECT_EQ(json::parse(r.body)["descriptors"][0]["limits"][0]["delay_ms"], 250);
}

}  // namespace
}  // namespace sluice::http

namespace sluice::http {
namespace {

// The answers are written without a JSON tree; they must be exactly what nlohmann writes
// for the same document (compact, key order kept), escapes and metadata included.
TEST(DecisionCodecTest, AnswersAreCanonicalCompactJson) {
  DecisionRequest request;
  request.domain = "do\"main\n";
  request.client_id = "caf\xC3\xA9\x01";
  Decision decision;
  decision.allowed = false;
  decision.degraded = true;
  LimitStatus leaky = loginLimit(true, 3);
  leaky.name = "leaky \\ one";
  leaky.algorithm = Algorithm::kLeakyBucket;
  leaky.shape = true;
  leaky.outcome.delay_us = 1500;
  LimitStatus unlimited;
  unlimited.name = "free";
  unlimited.unlimited = true;
  LimitStatus never = loginLimit(false, 0);
  never.outcome.never = true;
  decision.descriptors.push_back(
      DescriptorStatus{true, {loginLimit(false, 0), leaky, unlimited}, R"({"a":[1,"x"]})"});
  decision.descriptors.push_back(DescriptorStatus{false, {}});
  decision.descriptors.push_back(DescriptorStatus{true, {never}, "not json"});
  DecisionRequest long_request = request;  // strings longer than the writer's buffer
  long_request.client_id = std::string(700, 'x') + "\"" + std::string(300, 'y');
  decision.request = request;
  decision.request.descriptors = {{{"a", "b\"c"}}, {}, {{"x", ""}}};
  decision.metadata_json = R"({"a":[1,"x"]})";
  for (const Response& r : {decisionResponse(request, decision), envoyResponse(decision),
                            decisionResponse(long_request, decision)}) {
    ASSERT_FALSE(r.body.empty());
    EXPECT_EQ(r.body.back(), '\n');
    EXPECT_EQ(nlohmann::ordered_json::parse(r.body).dump() + "\n", r.body);
  }
  json body = json::parse(decisionResponse(request, decision).body);
  EXPECT_EQ(body["domain"], "do\"main\n");
  EXPECT_EQ(body["descriptors"][0]["metadata"]["a"][1], "x");
  EXPECT_EQ(body["descriptors"][2]["metadata"], "not json");
  EXPECT_EQ(body["descriptors"][0]["limits"][1]["delay_ms"], 2);
  EXPECT_EQ(body["descriptors"][0]["limits"][2]["unlimited"], true);
  json envoy = json::parse(envoyResponse(decision).body);
  EXPECT_EQ(envoy["dynamicMetadata"]["descriptors"][0]["entries"][0], "a=b\"c");
  EXPECT_EQ(envoy["dynamicMetadata"]["metadata"]["a"][1], "x");

  request.domain = "unknown";
  Decision unknown;
  unknown.domain_known = false;
  unknown.descriptors.resize(1);
  std::string text = decisionResponse(request, unknown).body;
  EXPECT_EQ(
      text,
      R"({"allowed":true,"domain":"unknown","clientId":"café\u0001","reason":"unknown domain","descriptors":[{"matched":false,"limits":[]}]})"
      "\n");
}

// A limit's fixed parts are prepared once per thread and limit (decision_codec.cpp): answers
// for limits that take turns, or for a limit whose rule changed under the same name, are
// written exactly as for a first answer.
TEST(DecisionCodecTest, LimitsTakingTurnsAreWrittenExactly) {
  auto bodyFor = [](const LimitStatus& limit) {
    DecisionRequest request;
    request.domain = "auth";
    Decision decision;
    decision.descriptors.push_back(DescriptorStatus{true, {limit}});
    return decisionResponse(request, decision).body;
  };
  auto expected = [](std::string_view name_json, std::string_view rest) {
    return R"({"allowed":true,"domain":"auth","descriptors":[{"matched":true,"limits":[{"name":)" +
           std::string(name_json) + R"(,"allowed":true,)" + std::string(rest) +
           R"(,"remaining":3,"reset_after_ms":41500,"retry_after_ms":0,"shadow":false}]}]})"
           "\n";
  };
  const std::string login = expected(
      R"("auth.auth_type_login")",
      R"("limit":5,"unit":"minute","unit_multiplier":1,"window_s":60,"algorithm":"fixed_window")");
  LimitStatus quoted = loginLimit(true, 3);
  quoted.name = "a \"quoted\" \\ name";
  const std::string quoted_body = expected(
      R"("a \"quoted\" \\ name")",
      R"("limit":5,"unit":"minute","unit_multiplier":1,"window_s":60,"algorithm":"fixed_window")");
  LimitStatus changed = loginLimit(true, 3);  // same name, another rule (a reload)
  changed.limit = 7;
  changed.unit = TimeUnit::kHour;
  changed.unit_multiplier = 2;
  changed.window_us = 7200 * kMicrosPerSecond;
  changed.algorithm = Algorithm::kTokenBucket;
  const std::string changed_body = expected(
      R"("auth.auth_type_login")",
      R"("limit":7,"unit":"hour","unit_multiplier":2,"window_s":7200,"algorithm":"token_bucket")");
  // More limits than the thread keeps prepared, taking turns.
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 12; ++i) {
      LimitStatus many = loginLimit(true, 3);
      many.name = "limit-" + std::to_string(i);
      many.limit = i;
      EXPECT_EQ(
          bodyFor(many),
          expected(
              "\"limit-" + std::to_string(i) + "\"",
              R"("limit":)" + std::to_string(i) +
                  R"(,"unit":"minute","unit_multiplier":1,"window_s":60,"algorithm":"fixed_window")"));
    }
  }
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(bodyFor(loginLimit(true, 3)), login);
    EXPECT_EQ(bodyFor(loginLimit(true, 3)), login);
    EXPECT_EQ(bodyFor(quoted), quoted_body);
    EXPECT_EQ(bodyFor(changed), changed_body);
  }
}

TEST(DecisionCodecTest, InvalidUtf8IsReplaced) {
  DecisionRequest request;
  request.domain =
      "a\xFF"
      "b\xC3";
  Decision decision;
  std::string text = decisionResponse(request, decision).body;
  EXPECT_NE(text.find("\"a\xEF\xBF\xBD"
                      "b\xEF\xBF\xBD\""),
            std::string::npos)
      << text;
  EXPECT_TRUE(json::accept(text));
}

}  // namespace
}  // namespace sluice::http
