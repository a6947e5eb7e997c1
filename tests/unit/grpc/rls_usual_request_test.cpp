// readUsualRequest() against protobuf's parser and toDecisionRequest(): the same decision
// request (or the same error) for every message it reads, and nothing for the ones it
// leaves to them.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "grpc/rls_mapping.hpp"

namespace sluice::grpc {
namespace {

using namespace std::string_view_literals;

/// What protobuf and toDecisionRequest() make of `bytes` (nullopt: protobuf cannot parse it).
std::optional<Result<DecisionRequest>> throughProtobuf(std::string_view bytes,
                                                       const RequestBounds& bounds) {
  rls::RateLimitRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return std::nullopt;
  }
  return toDecisionRequest(request, bounds);
}

void expectSameAsProtobuf(std::string_view bytes, const RequestBounds& bounds = kRequestBounds) {
  SCOPED_TRACE(::testing::PrintToString(std::string(bytes)));
  auto usual = readUsualRequest(bytes, bounds);
  ASSERT_TRUE(usual.has_value()) << "not read as the usual request";
  auto expected = throughProtobuf(bytes, bounds);
  ASSERT_TRUE(expected.has_value());
  ASSERT_EQ(usual->ok(), expected->ok());
  if (!expected->ok()) {
    EXPECT_EQ(usual->error().kind, expected->error().kind);
    EXPECT_EQ(usual->error().message, expected->error().message);
    return;
  }
  const DecisionRequest& got = **usual;
  const DecisionRequest& want = **expected;
  EXPECT_EQ(got.domain, want.domain);
  EXPECT_EQ(got.hits, want.hits);
  EXPECT_EQ(got.envoy_api, want.envoy_api);
  EXPECT_TRUE(got.descriptor_hits.empty());
  EXPECT_TRUE(got.descriptor_limits.empty());
  EXPECT_TRUE(got.descriptor_refunds.empty());
  ASSERT_EQ(got.descriptors.size(), want.descriptors.size());
  for (std::size_t d = 0; d < want.descriptors.size(); ++d) {
    ASSERT_EQ(got.descriptors[d].size(), want.descriptors[d].size());
    for (std::size_t e = 0; e < want.descriptors[d].size(); ++e) {
      EXPECT_EQ(got.descriptors[d][e].key, want.descriptors[d][e].key);
      EXPECT_EQ(got.descriptors[d][e].value, want.descriptors[d][e].value);
    }
  }
}

rls::RateLimitRequest request(std::string domain,
                              std::vector<std::vector<std::pair<std::string, std::string>>> ds,
                              std::uint32_t hits = 0) {
  rls::RateLimitRequest message;
  message.set_domain(std::move(domain));
  for (const auto& d : ds) {
    auto* descriptor = message.add_descriptors();
    for (const auto& [key, value] : d) {
      auto* entry = descriptor->add_entries();
      entry->set_key(key);
      entry->set_value(value);
    }
  }
  message.set_hits_addend(hits);
  return message;
}

TEST(RlsUsualRequestTest, ReadsWhatEnvoySendsAsProtobufDoes) {
  expectSameAsProtobuf(request("edge", {{{"op", "fixed_window_allow"}}}).SerializeAsString());
  expectSameAsProtobuf(
      request("edge", {{{"remote_address", "10.0.0.1"}, {"path", "/a"}}, {{"user", "u1"}}}, 5)
          .SerializeAsString());
  // Envoy's empty value and a hits_addend of 0 (which means 1).
  expectSameAsProtobuf(request("edge", {{{"header_match", ""}}}, 0).SerializeAsString());
}

TEST(RlsUsualRequestTest, ReusesTheThreadsSpareRequestWithoutLeavingItsOldDescriptors) {
  auto big = readUsualRequest(
      request("edge", {{{"a", "1"}, {"b", "2"}}, {{"c", "3"}}, {{"d", "4"}}}).SerializeAsString());
  ASSERT_TRUE(big && big->ok());
  Decision spent;
  spent.request = std::move(**big);
  recycleDecision(std::move(spent));
  expectSameAsProtobuf(request("edge", {{{"x", "9"}}}).SerializeAsString());
}

TEST(RlsUsualRequestTest, FieldsInAnyOrderRepeatedOrEncodedLonger) {
  // hits_addend first, the domain twice (the last one counts), an entry's value before its
  // key, a key given twice, a length in a two-byte varint.
  expectSameAsProtobuf(
      "\x18\x03"          // hits_addend 3
      "\x0a\x01x"         // domain "x"
      "\x12\x0b\x0a\x09"  // a descriptor, its entry:
      "\x12\x01v"         //   value "v"
      "\x0a\x01k"         //   key "k"
      "\x0a\x01K"         //   key "K"
      "\x0a\x02"
      "d2"sv);  // domain "d2"
  expectSameAsProtobuf(
      "\x0a\x84\x00"  // domain, its length in two bytes
      "edge"
      "\x12\x07\x0a\x05\x0a\x01k\x12\x00"sv);
}

TEST(RlsUsualRequestTest, ErrorsAreToDecisionRequestsErrors) {
  expectSameAsProtobuf(request("", {{{"op", "x"}}}).SerializeAsString());    // no domain
  expectSameAsProtobuf(request("edge", {}).SerializeAsString());             // no descriptors
  expectSameAsProtobuf(request("edge", {{{"", "x"}}}).SerializeAsString());  // an empty key
  expectSameAsProtobuf(request("edge", {{}}).SerializeAsString());           // no entries
  expectSameAsProtobuf(request("edge", {{{"op", std::string(5000, 'v')}}}).SerializeAsString());
  RequestBounds bounds;
  bounds.max_hits = 10;
  expectSameAsProtobuf(request("edge", {{{"op", "x"}}}, 11).SerializeAsString(), bounds);
}

TEST(RlsUsualRequestTest, LeavesEveryOtherMessageToProtobuf) {
  auto other = [](std::string_view bytes, const RequestBounds& bounds = kRequestBounds) {
    return !readUsualRequest(bytes, bounds).has_value();
  };
  auto with_limit = request("edge", {{{"op", "x"}}});
  with_limit.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(5);
  EXPECT_TRUE(other(with_limit.SerializeAsString()));
  auto with_hits = request("edge", {{{"op", "x"}}});
  with_hits.mutable_descriptors(0)->mutable_hits_addend()->set_value(2);
  EXPECT_TRUE(other(with_hits.SerializeAsString()));
  EXPECT_TRUE(other(request("\xc3\xa9t\xc3\xa9", {{{"op", "x"}}}).SerializeAsString()));
  EXPECT_TRUE(other(request("edge", {{{"op", "caf\xc3\xa9"}}}).SerializeAsString()));
  EXPECT_TRUE(other(std::string("\x0a\x02\xff\xfe", 4)));  // not UTF-8: protobuf refuses it
  EXPECT_TRUE(other(std::string("\x22\x01x", 3)));         // an unknown field
  EXPECT_TRUE(
      other(std::string("\x0a\x05"
                        "ab",
                        4)));                                      // a length past the end
  EXPECT_TRUE(other(std::string("\x18\x80\x80\x80\x80\x10", 6)));  // hits_addend over 32 bits
  EXPECT_TRUE(other("\x0a\x81\x80\x80\x80\x80\x00x"sv));           // a length in 6 bytes
  EXPECT_TRUE(other("\x8a\x80\x80\x80\x80\x00\x01x"sv));           // a key in 6 bytes
  EXPECT_TRUE(other("\x08\x05"sv));                                // domain's number, a varint
  EXPECT_TRUE(other("\x12\x02\x08\x01"sv));                        // an entry's number, a varint
  RequestBounds bounds;
  bounds.max_descriptors = 1;
  EXPECT_TRUE(other(request("edge", {{{"a", "1"}}, {{"b", "2"}}}).SerializeAsString(), bounds));
}

}  // namespace
}  // namespace sluice::grpc
