// What HTTP clients see when the Redis store cannot be reached, per failure mode.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

const std::string kLogin =
    R"({"domain":"auth","clientId":"u","descriptors":[[{"key":"auth_type","value":"login"}]]})";

SluiceOptions unreachableRedis(const std::string& mode) {
  // Nothing listens on this port: every connection attempt is refused at once.
  return withArgs({"--threads", "1", "--store", "redis", "--redis",
                   "redis://127.0.0.1:" + std::to_string(freeLoopbackPort()) + "/0",
                   "--failure-mode", mode});
}

HttpResponse eventually(HttpClient& client, const std::string& target, const std::string& body,
                        int status) {
  HttpResponse r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    r = body.empty() ? client.get(target) : client.post(target, body);
    if (r.status == status) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(50));
  } while (std::chrono::steady_clock::now() < deadline);
  return r;
}

TEST(StoreUnavailableTest, ClosedModeAnswers503AndIsNotReady) {
  SluiceProcess sluice(unreachableRedis("closed"));
  HttpClient client = sluice.client();
  HttpResponse decision = eventually(client, "/shouldAllowRequest", kLogin, 503);
  EXPECT_EQ(decision.status, 503) << decision.body;
  EXPECT_TRUE(json::parse(decision.body).contains("error"));
  HttpResponse ready = eventually(client, "/readyz", "", 503);
  EXPECT_EQ(ready.status, 503);
  EXPECT_EQ(json::parse(ready.body)["store_healthy"], false);
  EXPECT_EQ(
      client
          .post(
              "/json",
              R"({"domain":"auth","descriptors":[{"entries":[{"key":"auth_type","value":"login"}]}]})")
          .status,
      503);
  // Requests that need no store still work.
  EXPECT_EQ(client.post("/shouldAllowRequest", R"({"domain":"none"})").status, 200);
  EXPECT_EQ(client.get("/healthz").status, 200);
}

TEST(StoreUnavailableTest, OpenModeAllowsAndFlagsTheAnswerAsDegraded) {
  SluiceProcess sluice(unreachableRedis("open"));
  HttpClient client = sluice.client();
  HttpResponse r;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  do {
    r = client.post("/shouldAllowRequest", kLogin);
  } while (r.header("X-Sluice-Degraded").empty() && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("X-Sluice-Degraded"), "true");
  EXPECT_EQ(json::parse(r.body)["degraded"], true);
}

TEST(StoreUnavailableTest, LocalModeFallsBackToTheMemoryStore) {
  SluiceProcess sluice(unreachableRedis("local"));
  HttpClient client = sluice.client();
  std::string body =
      R"({"domain":"auth","clientId":"local","descriptors":[[{"key":"auth_type","value":"login"}]]})";
  int denied = 0;
  for (int i = 0; i < 12; ++i) {
    denied += client.post("/shouldAllowRequest", body).status == 429 ? 1 : 0;
  }
  // 5 per minute are still enforced (from memory) while Redis is down.
  EXPECT_GE(denied, 1);
}

}  // namespace
}  // namespace sluice::test
