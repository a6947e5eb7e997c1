// Store health and start-up as users see them (docs/redis.md): /readyz while the store connects,
// after it connected, and when it never does; a slow Redis at start-up is waited for, not
// answered by the failure mode.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "support/fault_proxy.hpp"
#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using std::chrono::milliseconds;

const std::string kLogin =
    R"({"domain":"auth","clientId":"h","descriptors":[[{"key":"auth_type","value":"login"}]]})";

/// GET /readyz until its body's `store` is `state` and its status `want` (or 10 s passed);
/// each I/O thread's store leaves start-up on its own timer.
json readyUntil(HttpClient& client, const std::string& state, int want, int* status) {
  json body;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  do {
    HttpResponse r = client.get("/readyz");
    *status = r.status;
    body = json::parse(r.body);
    if (body["store"] == state && *status == want) {
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  } while (Clock::now() < deadline);
  return body;
}

double metric(HttpClient& client, const std::string& sample) {
  const std::string text = client.get("/metrics").body;
  const std::size_t pos = text.find("\n" + sample + " ");
  return pos == std::string::npos ? 0 : std::stod(text.substr(pos + sample.size() + 2));
}

class StoreHealthTest : public ::testing::TestWithParam<std::string> {};

TEST_P(StoreHealthTest, NotReadyWhileConnectingThenTheFailureModeDecidesReadiness) {
  const std::string mode = GetParam();
  // Nothing listens: every attempt is refused; start-up ends after the connect wait.
  SluiceOptions options =
      withArgs({"--threads", "2", "--store", "redis", "--redis",
                "redis://127.0.0.1:" + std::to_string(freeLoopbackPort()) + "/0", "--failure-mode",
                mode, "--store-connect-wait-ms", "1500"});
  SluiceProcess sluice(options);
  HttpClient client = sluice.client();
  HttpResponse early = client.get("/readyz");
  json early_body = json::parse(early.body);
  if (early_body["store"] == "connecting") {  // not yet 1.5 s after start
    EXPECT_EQ(early.status, 503) << early.body;
    EXPECT_EQ(early_body["store_healthy"], false);
  }
  int status = 0;
  json body = readyUntil(client, "failing", mode == "closed" ? 503 : 200, &status);
  EXPECT_EQ(body["store"], "failing") << sluice.log();
  EXPECT_EQ(body["store_healthy"], false);
  EXPECT_EQ(status, mode == "closed" ? 503 : 200) << body.dump();
  EXPECT_EQ(metric(client, "sluice_store_health{state=\"failing\",store=\"redis\"}") +
                metric(client, "sluice_store_health{store=\"redis\",state=\"failing\"}"),
            1);
  // One line for the whole process, whatever the number of I/O threads.
  const std::string log = sluice.log();
  EXPECT_EQ(log.find("store redis health: connecting -> failing"),
            log.rfind("store redis health: connecting -> failing"))
      << log;
  EXPECT_NE(log.find("store redis health: connecting -> failing"), std::string::npos) << log;
}

INSTANTIATE_TEST_SUITE_P(Modes, StoreHealthTest, ::testing::Values("open", "closed", "local"));

TEST(StoreHealthStartTest, ASlowRedisAtStartUpIsWaitedForNotAnsweredByTheFailureMode) {
  RedisServer redis;
  // Every reply 400 ms late: the first connection takes > 400 ms to be made.
  FaultProxy proxy(redis.port());
  proxy.setLatency(milliseconds(400));
  SluiceOptions options = withArgs({"--threads", "2", "--store", "redis", "--redis", proxy.url(),
                                    "--failure-mode", "open", "--redis-timeout-ms", "2000"});
  SluiceProcess sluice(options);
  HttpClient client = sluice.client();
  // Sent at once (SluiceProcess returns as soon as /healthz answers): it waits.
  HttpResponse r = client.post("/shouldAllowRequest", kLogin);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("X-Sluice-Degraded"), "") << sluice.log();
  EXPECT_EQ(r.header("X-Ratelimit-Remaining"), "4");
  int status = 0;
  json body = readyUntil(client, "healthy", 200, &status);
  EXPECT_EQ(status, 200) << body.dump();
  EXPECT_EQ(body["store_healthy"], true);
  EXPECT_EQ(metric(client, "sluice_store_failure_mode_activations_total{mode=\"open\"}"), 0)
      << sluice.log();
  EXPECT_EQ(sluice.log().find("failure mode 'open'"), std::string::npos) << sluice.log();
}

}  // namespace
}  // namespace sluice::test
