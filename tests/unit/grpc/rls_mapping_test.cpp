#include "grpc/rls_mapping.hpp"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace sluice::grpc {
namespace {

using Response = rls::RateLimitResponse;

rls::RateLimitRequest makeRequest(std::string domain, int descriptors) {
  rls::RateLimitRequest request;
  request.set_domain(std::move(domain));
  for (int i = 0; i < descriptors; ++i) {
    auto* entry = request.add_descriptors()->add_entries();
    entry->set_key("key" + std::to_string(i));
    entry->set_value("value");
  }
  return request;
}

LimitStatus limit(std::string name, std::int64_t requests, bool allowed, std::int64_t remaining) {
  LimitStatus status;
  status.name = std::move(name);
  status.explicit_name = true;
  status.limit = requests;
  status.unit = TimeUnit::kMinute;
  status.window_us = unitMicros(TimeUnit::kMinute);
  status.outcome.allowed = allowed;
  status.outcome.remaining = remaining;
  status.outcome.reset_after_us = 1'500'000;
  status.outcome.retry_after_us = allowed ? 0 : 2'000'000;
  return status;
}

std::map<std::string, std::string> headersOf(const Response& response) {
  std::map<std::string, std::string> headers;
  for (const auto& h : response.response_headers_to_add()) {
    headers[h.key()] = h.value();
  }
  return headers;
}

TEST(RlsMappingTest, MapsDomainDescriptorsAndHits) {
  auto request = makeRequest("auth", 2);
  request.set_hits_addend(3);
  request.mutable_descriptors(1)->mutable_hits_addend()->set_value(0);
  auto parsed = toDecisionRequest(request);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->domain, "auth");
  ASSERT_EQ(parsed->descriptors.size(), 2u);
  EXPECT_EQ(parsed->descriptors[1][0].key, "key1");
  EXPECT_EQ(parsed->hits, 3);
  ASSERT_EQ(parsed->descriptor_hits.size(), 2u);
  EXPECT_FALSE(parsed->descriptor_hits[0].has_value());
  EXPECT_EQ(parsed->descriptor_hits[1], 0);
}

TEST(RlsMappingTest, HitsAddendZeroMeansOne) {
  auto parsed = toDecisionRequest(makeRequest("auth", 1));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->hits, 1);
  EXPECT_TRUE(parsed->descriptor_hits.empty());
}

TEST(RlsMappingTest, RejectsEmptyDomainNoDescriptorsAndEmptyKeys) {
  auto empty_domain = toDecisionRequest(makeRequest("", 1));
  ASSERT_FALSE(empty_domain.ok());
  EXPECT_EQ(empty_domain.error().kind, ErrorKind::kInvalidArgument);
  EXPECT_EQ(empty_domain.error().message, "domain: is required (a non-empty string)");
  auto none = toDecisionRequest(makeRequest("auth", 0));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().message, "descriptors: must be a non-empty array");
  auto request = makeRequest("auth", 2);
  request.mutable_descriptors(1)->mutable_entries(0)->set_key("");
  auto empty_key = toDecisionRequest(request);
  ASSERT_FALSE(empty_key.ok());
  EXPECT_EQ(empty_key.error().message, "descriptors[1].entries[0].key: must be a non-empty string");
}

TEST(RlsMappingTest, RejectsMoreThanTheBounds) {
  RequestBounds bounds;
  bounds.max_descriptors = 2;
  auto too_many = toDecisionRequest(makeRequest("auth", 3), bounds);
  ASSERT_FALSE(too_many.ok());
  EXPECT_EQ(too_many.error().message, "descriptors: must have at most 2 descriptors");
}

TEST(RlsMappingTest, OneStatusPerDescriptorWithItsOwnBindingLimit) {
  Decision decision;
  decision.allowed = false;
  decision.descriptors.emplace_back(true, std::vector<LimitStatus>{limit("a", 10, false, 0)});
  decision.descriptors.emplace_back(false);
  decision.descriptors.emplace_back(
      true, std::vector<LimitStatus>{limit("b", 10, true, 7), limit("c", 5, true, 2)});
  Response response;
  toResponse(decision, true, response);
  EXPECT_EQ(response.overall_code(), Response::OVER_LIMIT);
  ASSERT_EQ(response.statuses_size(), 3);
  EXPECT_EQ(response.statuses(0).code(), Response::OVER_LIMIT);
  EXPECT_EQ(response.statuses(0).current_limit().name(), "a");
  EXPECT_EQ(response.statuses(0).duration_until_reset().seconds(), 2);
  EXPECT_EQ(response.statuses(1).code(), Response::OK);
  EXPECT_FALSE(response.statuses(1).has_current_limit());
  EXPECT_EQ(response.statuses(2).code(), Response::OK);
  EXPECT_EQ(response.statuses(2).current_limit().name(), "c");
  EXPECT_EQ(response.statuses(2).limit_remaining(), 2u);
  auto headers = headersOf(response);
  EXPECT_EQ(headers["X-Ratelimit-Limit"], "10");
  EXPECT_EQ(headers["Retry-After"], "2");
  EXPECT_EQ(headers["RateLimit-Policy"], "\"a\";q=10;w=60");
}

TEST(RlsMappingTest, NeverAnswersUnknown) {
  Decision allowed;
  Response response;
  toResponse(allowed, true, response);
  EXPECT_EQ(response.overall_code(), Response::OK);
  EXPECT_EQ(response.response_headers_to_add_size(), 0);
}

TEST(RlsMappingTest, HeadersCanBeSwitchedOff) {
  Decision decision;
  decision.descriptors.emplace_back(true, std::vector<LimitStatus>{limit("a", 10, true, 3)});
  Response response;
  toResponse(decision, false, response);
  EXPECT_EQ(response.response_headers_to_add_size(), 0);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 3u);
}

TEST(RlsMappingTest, UnlimitedHasTheLargestRemainingAndNoLimit) {
  Decision decision;
  LimitStatus unlimited;
  unlimited.unlimited = true;
  decision.descriptors.emplace_back(true, std::vector<LimitStatus>{unlimited});
  Response response;
  toResponse(decision, true, response);
  EXPECT_EQ(response.statuses(0).code(), Response::OK);
  EXPECT_EQ(response.statuses(0).limit_remaining(), 4294967295u);
  EXPECT_FALSE(response.statuses(0).has_current_limit());
}

TEST(RlsMappingTest, UnitsAndSluiceOnlyWindows) {
  LimitStatus l = limit("w", 1, true, 0);
  l.unit = TimeUnit::kWeek;
  EXPECT_EQ(envoyUnit(l), Response::RateLimit::WEEK);
  EXPECT_EQ(static_cast<int>(envoyUnit(l)), 7);
  l.unit = TimeUnit::kSecond;
  l.unit_multiplier = 30;
  EXPECT_EQ(envoyUnit(l), Response::RateLimit::UNKNOWN);
  l.unit_multiplier = 3600;
  EXPECT_EQ(envoyUnit(l), Response::RateLimit::HOUR);
  l.unit = TimeUnit::kDay;
  l.unit_multiplier = 7;
  EXPECT_EQ(envoyUnit(l), Response::RateLimit::WEEK);
}

TEST(RlsMappingTest, ShadowDenialIsOk) {
  Decision decision;
  LimitStatus shadow = limit("s", 1, false, 0);
  shadow.shadow = true;
  decision.descriptors.emplace_back(true, std::vector<LimitStatus>{shadow});
  Response response;
  toResponse(decision, true, response);
  EXPECT_EQ(response.overall_code(), Response::OK);
  EXPECT_EQ(response.statuses(0).code(), Response::OK);
  EXPECT_EQ(response.response_headers_to_add_size(), 0);  // shadow limits never show
}

/// encodeResponse() writes what protobuf's serializer writes for toResponse()'s message.
void expectEncodedAsProtobuf(const Decision& decision) {
  for (bool headers : {true, false}) {
    Response response;
    toResponse(decision, headers, response);
    std::string framed = "left from a previous call";
    ASSERT_TRUE(encodeResponse(decision, headers, framed));
    ASSERT_GE(framed.size(), 5u);
    EXPECT_EQ(framed[0], '\0');
    const auto* p = reinterpret_cast<const unsigned char*>(framed.data());
    const std::size_t size = (std::size_t{p[1]} << 24) | (std::size_t{p[2]} << 16) |
                             (std::size_t{p[3]} << 8) | std::size_t{p[4]};
    EXPECT_EQ(size, framed.size() - 5);
    EXPECT_EQ(framed.substr(5), response.SerializeAsString()) << "headers " << headers;
  }
}

TEST(RlsMappingTest, EncodesTheResponseAsProtobufDoes) {
  Decision over;
  over.allowed = false;
  over.descriptors.emplace_back(true, std::vector<LimitStatus>{limit("a", 10, false, 0)});
  over.descriptors.emplace_back(false);
  over.descriptors.emplace_back(
      true, std::vector<LimitStatus>{limit("b", 10, true, 7), limit("c", 5, true, 2)});
  expectEncodedAsProtobuf(over);
  expectEncodedAsProtobuf(Decision{});

  Decision odd;  // unnamed, a Sluice-only window, values beyond uint32, no time left
  LimitStatus unnamed = limit("", 1, true, 0);
  unnamed.explicit_name = false;
  unnamed.unit = TimeUnit::kSecond;
  unnamed.unit_multiplier = 30;
  unnamed.outcome.reset_after_us = 0;
  LimitStatus huge = limit("huge", std::int64_t{1} << 40, true, std::int64_t{1} << 36);
  huge.unit = TimeUnit::kWeek;
  huge.outcome.reset_after_us = std::int64_t{400} * 24 * 3600 * 1'000'000;
  odd.descriptors.emplace_back(true, std::vector<LimitStatus>{unnamed});
  odd.descriptors.emplace_back(true, std::vector<LimitStatus>{huge});
  LimitStatus unlimited;
  unlimited.unlimited = true;
  odd.descriptors.emplace_back(true, std::vector<LimitStatus>{unlimited});
  LimitStatus shadow = limit("s", 1, false, 0);
  shadow.shadow = true;
  odd.descriptors.emplace_back(true, std::vector<LimitStatus>{shadow});
  expectEncodedAsProtobuf(odd);

  Decision long_name;  // lengths of two varint bytes, the name in the headers too
  long_name.allowed = false;
  long_name.descriptors.emplace_back(
      true, std::vector<LimitStatus>{limit(std::string(300, 'n'), 100000, false, 0)});
  expectEncodedAsProtobuf(long_name);
}

}  // namespace
}  // namespace sluice::grpc
