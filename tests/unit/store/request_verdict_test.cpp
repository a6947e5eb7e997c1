// The quota-mode rule's one owner (request_verdict.hpp), which the memory store and the
// eventual engine both call.
#include "sluice/store/request_verdict.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace sluice {
namespace {

StoreLimit limit(int group, bool shadow = false) {
  StoreLimit l;
  l.key = "k";
  l.quota_group = group;
  l.shadow = shadow;
  return l;
}

bool verdict(const std::vector<StoreLimit>& limits, const std::vector<bool>& allowed,
             std::vector<int> open = {}) {
  RequestVerdict v(open);
  for (std::size_t i = 0; i < limits.size(); ++i) {
    v.add(limits[i], allowed[i]);
  }
  return v.allowed();
}

TEST(RequestVerdictTest, OrdinaryLimitsMustAllAllow) {
  EXPECT_TRUE(verdict({}, {}));
  EXPECT_TRUE(verdict({limit(-1), limit(-1)}, {true, true}));
  EXPECT_FALSE(verdict({limit(-1), limit(-1)}, {true, false}));
}

TEST(RequestVerdictTest, ShadowLimitsNeverDeny) {
  EXPECT_TRUE(verdict({limit(-1, true), limit(-1)}, {false, true}));
  // A group whose only denial is a shadow limit's has no denying limit: it passes.
  EXPECT_TRUE(verdict({limit(0, true), limit(1)}, {false, false}));
  EXPECT_TRUE(verdict({limit(0, true)}, {false}));
}

TEST(RequestVerdictTest, OneQuotaGroupWithoutDenialSuffices) {
  EXPECT_TRUE(verdict({limit(0), limit(1)}, {false, true}));
  EXPECT_FALSE(verdict({limit(0), limit(1)}, {false, false}));
  EXPECT_FALSE(verdict({limit(0), limit(0), limit(1)}, {true, false, false}));
  EXPECT_FALSE(verdict({limit(0), limit(-1)}, {true, false}));
}

TEST(RequestVerdictTest, OpenGroupsMayStillPass) {
  EXPECT_TRUE(verdict({limit(0)}, {false}, {1}));
  EXPECT_FALSE(verdict({limit(0)}, {false}, {0}));
  RequestVerdict v;
  v.add(limit(2), false);
  EXPECT_TRUE(v.groupFailed(2));
  EXPECT_FALSE(v.groupFailed(3));
}

TEST(RequestVerdictTest, RequestAllowedFoldsEachOutcome) {
  StoreRequest request;
  request.limits = {limit(0), limit(1)};
  std::vector<Outcome> outcomes(2);
  outcomes[0].allowed = false;
  outcomes[1].allowed = true;
  EXPECT_TRUE(requestAllowed(request, outcomes));
  outcomes[1].allowed = false;
  EXPECT_FALSE(requestAllowed(request, outcomes));
}

}  // namespace
}  // namespace sluice
