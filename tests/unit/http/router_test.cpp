#include "sluice/http/router.hpp"

#include <gtest/gtest.h>

namespace sluice::http {
namespace {

Handler named(std::string name) {
  return [name](const Request&, Respond respond) {
    Response r;
    r.body = name;
    respond(std::move(r));
  };
}

std::string call(const Router::Match& m) {
  std::string body;
  m.route->handler(Request{}, [&](Response r) { body = r.body; });
  return body;
}

TEST(RouterTest, ExactRouteMatchesMethodAndPath) {
  Router router;
  router.add("POST", "/shouldAllowRequest", named("decide"));
  router.add("GET", "/healthz", named("health"));
  auto m = router.route("POST", "/shouldAllowRequest");
  ASSERT_NE(m.route, nullptr);
  EXPECT_EQ(call(m), "decide");
  EXPECT_EQ(m.route_index, 0u);
  EXPECT_EQ(call(router.route("GET", "/healthz")), "health");
}

TEST(RouterTest, UnknownPathIs404) {
  Router router;
  router.add("GET", "/healthz", named("health"));
  auto m = router.route("GET", "/healthz/x");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.status, 404);
  EXPECT_EQ(m.route_index, router.routes().size());
}

TEST(RouterTest, WrongMethodIs405WithEveryAllowedMethod) {
  Router router;
  router.add("GET", "/limits", named("get"));
  router.add("DELETE", "/limits", named("delete"));
  auto m = router.route("POST", "/limits");
  EXPECT_EQ(m.route, nullptr);
  EXPECT_EQ(m.status, 405);
  EXPECT_EQ(m.allow, "GET, DELETE");
  EXPECT_LT(m.route_index, router.routes().size());
}

TEST(RouterTest, PrefixRoutesAndAnyMethod) {
  Router router;
  router.add("*", "/check*", named("check"));
  router.add("GET", "/check/special", named("special"));
  EXPECT_EQ(call(router.route("PUT", "/check")), "check");
  EXPECT_EQ(call(router.route("GET", "/check/orders/1")), "check");
  EXPECT_EQ(call(router.route("GET", "/check/special")), "special");
  EXPECT_EQ(router.route("GET", "/other").status, 404);
}

TEST(RouterTest, LongestPrefixWins) {
  Router router;
  router.add("GET", "/a*", named("short"));
  router.add("GET", "/a/b*", named("long"));
  EXPECT_EQ(call(router.route("GET", "/a/b/c")), "long");
  EXPECT_EQ(call(router.route("GET", "/a/x")), "short");
}

TEST(RouterTest, HeaderLookupIsCaseInsensitive) {
  Request r;
  r.headers = {{"Content-Type", "application/json"}, {"X-A", "1"}, {"x-a", "2"}};
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.header("X-A"), "1");
  EXPECT_EQ(r.header("missing"), "");
}

}  // namespace
}  // namespace sluice::http
