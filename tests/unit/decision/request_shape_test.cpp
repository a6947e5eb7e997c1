// The one check of a DecisionRequest's shape that every transport's parser ends with.
#include "sluice/decision/request_shape.hpp"

#include <gtest/gtest.h>

#include <string>

namespace sluice {
namespace {

DecisionRequest valid() {
  DecisionRequest request;
  request.domain = "auth";
  request.descriptors = {{{"user", "ann"}}, {{"path", "/login"}, {"method", "POST"}}};
  return request;
}

std::string problem(const DecisionRequest& request, RequestApi api = RequestApi::kSluice,
                    const RequestBounds& bounds = kRequestBounds) {
  Status status = checkDecisionRequest(request, api, bounds);
  if (status) {
    return "";
  }
  EXPECT_EQ(status.error().kind, ErrorKind::kInvalidArgument);
  return status.error().message;
}

TEST(RequestShapeTest, AcceptsARequestWithinTheBounds) {
  EXPECT_EQ(problem(valid()), "");
  EXPECT_EQ(problem(valid(), RequestApi::kEnvoy), "");
}

TEST(RequestShapeTest, EnvoyRequiresADomainAndADescriptor) {
  DecisionRequest request = valid();
  request.domain.clear();
  EXPECT_EQ(problem(request), "");
  EXPECT_EQ(problem(request, RequestApi::kEnvoy), "domain: is required (a non-empty string)");
  request = valid();
  request.descriptors.clear();
  EXPECT_EQ(problem(request), "");
  EXPECT_EQ(problem(request, RequestApi::kEnvoy), "descriptors: must be a non-empty array");
}

TEST(RequestShapeTest, NamesTheFieldOverTheBounds) {
  RequestBounds bounds;
  bounds.max_descriptors = 1;
  EXPECT_EQ(problem(valid(), RequestApi::kSluice, bounds),
            "descriptors: must have at most 1 descriptors");
  bounds = RequestBounds{};
  bounds.max_entries = 1;
  EXPECT_EQ(problem(valid(), RequestApi::kSluice, bounds),
            "descriptors[1].entries: must have at most 1 entries");
  DecisionRequest request = valid();
  request.descriptors[1][1].value = std::string(kMaxStringBytes + 1, 'x');
  EXPECT_EQ(problem(request), "descriptors[1].entries[1].value: must be at most 1024 bytes");
  request = valid();
  request.client_id = std::string(kMaxStringBytes + 1, 'c');
  EXPECT_EQ(problem(request), "clientId: must be at most 1024 bytes");
  request = valid();
  request.descriptors[0][0].key.clear();
  EXPECT_EQ(problem(request), "descriptors[0].entries[0].key: must be a non-empty string");
}

TEST(RequestShapeTest, HitsAreNamedAsTheApiNamesThem) {
  DecisionRequest request = valid();
  request.hits = kMaxHits + 1;
  EXPECT_EQ(problem(request), "hits: must be an integer from 0 to 1000000000");
  EXPECT_EQ(problem(request, RequestApi::kEnvoy),
            "hits_addend: must be an integer from 0 to 1000000000");
  request = valid();
  request.descriptor_hits = {std::nullopt, kMaxHits + 1};
  EXPECT_EQ(problem(request),
            "descriptors[1].hits_addend: must be an integer from 0 to 1000000000");
  request.descriptor_hits = {std::nullopt, kMaxHits};
  EXPECT_EQ(problem(request), "");
}

}  // namespace
}  // namespace sluice
