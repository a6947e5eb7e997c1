// In-flight limits (`algorithm: concurrency`) through the real binary: leases taken by
// admitted decisions, released (POST /release) and renewed (POST /renew), the bad inputs of
// those calls, concurrent clients that never hold more than max_in_flight, and leases that
// come back by themselves, on the memory store, Redis and Redis Cluster.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "support/free_port.hpp"
#include "support/http_client.hpp"
#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"
#include "support/wait.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr int kMaxInFlight = 4;

const char* const kRules = R"(domain: work
descriptors:
  - key: job
    rate_limit:
      algorithm: concurrency
      max_in_flight: 4
      lease: 30s
  - key: short
    rate_limit:
      algorithm: concurrency
      max_in_flight: 1
      lease: 1500ms
  - key: tokens
    rate_limit: {unit: minute, requests_per_unit: 1000}
)";

std::string decision(const std::string& key, const std::string& client = "c1") {
  return json{{"domain", "work"},
              {"clientId", client},
              {"descriptors", json::array({json::array({{{"key", key}, {"value", "x"}}})})}}
      .dump();
}

std::string leaseBody(const std::string& id) { return json{{"lease", id}}.dump(); }

enum class Backend { kMemory, kRedis, kCluster };

std::string backendName(const ::testing::TestParamInfo<Backend>& info) {
  switch (info.param) {
    case Backend::kMemory:
      return "Memory";
    case Backend::kRedis:
      return "Redis";
    case Backend::kCluster:
      return "RedisCluster";
  }
  return "Unknown";
}

class LeasesTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kRedis) {
      redis_ = std::make_unique<RedisServer>();
    } else if (GetParam() == Backend::kCluster) {
      cluster_ = std::make_unique<RedisCluster>(3, 0);
    }
    sluice_ = start();
  }

  std::unique_ptr<SluiceProcess> start() {
    SluiceOptions options = withRules({{"work.yaml", kRules}});
    options.admin = true;
    if (redis_) {
      options.args.insert(options.args.end(), {"--store", "redis", "--redis", redis_->url(),
                                               "--redis-timeout-ms", "1000"});
    } else if (cluster_) {
      options.args.insert(options.args.end(), {"--store", "redis_cluster", "--redis",
                                               cluster_->url(0), "--redis-timeout-ms", "1000"});
    }
    auto sluice = std::make_unique<SluiceProcess>(options);
    admin_port_ = sluice->adminPort();
    EXPECT_TRUE(waitFor([&] { return sluice->client().get("/readyz").status == 200; }, 10s))
        << sluice->log();
    return sluice;
  }

  /// Takes a lease: the lease id of an admitted answer ("" when denied).
  std::string take(SluiceProcess& sluice, const std::string& key = "job",
                   const std::string& client = "c1") {
    const HttpResponse r = sluice.client().post("/shouldAllowRequest", decision(key, client));
    if (r.status != 200) {
      EXPECT_EQ(r.status, 429) << r.body;
      return "";
    }
    const json body = json::parse(r.body);
    EXPECT_TRUE(body.contains("lease")) << r.body;
    const std::string id = body["lease"]["id"].get<std::string>();
    EXPECT_EQ(r.header("X-Sluice-Lease"), id);
    return id;
  }

  std::int64_t available(const std::string& key = "job", const std::string& client = "c1") {
    json request = json::parse(decision(key, client));
    request["hits"] = 0;
    const HttpResponse r = sluice_->client().post("/shouldAllowRequest", request.dump());
    return json::parse(r.body)["descriptors"][0]["limits"][0]["remaining"].get<std::int64_t>();
  }

  std::unique_ptr<RedisServer> redis_;
  std::unique_ptr<RedisCluster> cluster_;
  std::unique_ptr<SluiceProcess> sluice_;
  std::uint16_t admin_port_ = 0;
};

TEST_P(LeasesTest, AnAdmittedRequestHoldsALeaseUntilReleased) {
  std::vector<std::string> ids;
  for (int i = 0; i < kMaxInFlight; ++i) {
    ids.push_back(take(*sluice_));
    ASSERT_FALSE(ids.back().empty());
  }
  const HttpResponse denied = sluice_->client().post("/shouldAllowRequest", decision("job"));
  EXPECT_EQ(denied.status, 429);
  EXPECT_FALSE(denied.hasHeader("X-Sluice-Lease"));
  EXPECT_EQ(json::parse(denied.body).count("lease"), 0U);

  const HttpResponse released = sluice_->client().post("/release", leaseBody(ids[1]));
  ASSERT_EQ(released.status, 200) << released.body;
  const json answer = json::parse(released.body);
  EXPECT_EQ(answer["released"], true);
  EXPECT_EQ(answer["limits"][0]["name"], "work.job");
  EXPECT_EQ(answer["limits"][0]["available"], 1);
  EXPECT_FALSE(take(*sluice_).empty());
  EXPECT_TRUE(take(*sluice_).empty());
}

TEST_P(LeasesTest, BadLeaseCallsAreClearErrorsAndTouchNothing) {
  const std::string id = take(*sluice_);
  const std::string other = take(*sluice_, "job", "c2");
  ASSERT_EQ(available(), kMaxInFlight - 1);

  HttpResponse r = sluice_->client().post("/release", leaseBody("l1.garbage!"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("lease: not a lease id"), std::string::npos) << r.body;
  r = sluice_->client().post("/release", R"({"lease": 7})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("lease: must be a string"), std::string::npos) << r.body;
  r = sluice_->client().post("/renew", R"({"id": "x"})");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("id: unknown field"), std::string::npos) << r.body;

  // Another client's lease, as a forger would change it: the same number, another client.
  ASSERT_EQ(sluice_->client().post("/release", leaseBody(other)).status, 200);
  r = sluice_->client().post("/release", leaseBody(other));
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_NE(r.body.find("lease: not held (already released, expired, or never granted), so it "
                        "cannot be released"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(available(), kMaxInFlight - 1);
  EXPECT_EQ(available("job", "c2"), kMaxInFlight);

  ASSERT_EQ(sluice_->client().post("/release", leaseBody(id)).status, 200);
  r = sluice_->client().post("/release", leaseBody(id));
  EXPECT_EQ(r.status, 404) << r.body;
  r = sluice_->client().post("/renew", leaseBody(id));
  EXPECT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(available(), kMaxInFlight);
}

TEST_P(LeasesTest, RenewKeepsALeaseAndAnExpiredOneCannotBeRenewed) {
  const auto taken = std::chrono::steady_clock::now();
  const std::string id = take(*sluice_, "short");
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(waitFor([&] { return std::chrono::steady_clock::now() - taken > 1s; }, 2s));
  const HttpResponse renewed = sluice_->client().post("/renew", leaseBody(id));
  ASSERT_EQ(renewed.status, 200) << renewed.body;
  EXPECT_GT(json::parse(renewed.body)["expires_in_ms"].get<int>(), 1400);
  // Past the first expiry (1.5 s after it was taken), the renewed lease still holds.
  ASSERT_TRUE(waitFor([&] { return std::chrono::steady_clock::now() - taken > 1700ms; }, 2s));
  EXPECT_EQ(available("short"), 0);
  // It comes back by itself at its new expiry; renewing it then is an error.
  ASSERT_TRUE(waitFor([&] { return available("short") == 1; }, 3s));
  const HttpResponse late = sluice_->client().post("/renew", leaseBody(id));
  EXPECT_EQ(late.status, 404) << late.body;
  EXPECT_NE(late.body.find("cannot be renewed"), std::string::npos) << late.body;
  EXPECT_EQ(available("short"), 1);
}

TEST_P(LeasesTest, ConcurrentClientsNeverHoldMoreThanMaxInFlight) {
  constexpr int kClients = 32;
  constexpr int kRoundsPerClient = 12;
  std::atomic<int> in_flight{0};
  std::atomic<int> most{0};
  std::atomic<int> admitted{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&] {
      HttpClient client = sluice_->client();
      for (int round = 0; round < kRoundsPerClient; ++round) {
        const HttpResponse r = client.post("/shouldAllowRequest", decision("job"));
        if (r.status == 429) {
          continue;
        }
        if (r.status != 200) {
          failures.fetch_add(1);
          continue;
        }
        const int now = in_flight.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        admitted.fetch_add(1);
        std::this_thread::sleep_for(2ms);  // the work the lease stands for
        in_flight.fetch_sub(1);
        const std::string id = json::parse(r.body)["lease"]["id"].get<std::string>();
        if (client.post("/release", leaseBody(id)).status != 200) {
          failures.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : clients) {
    t.join();
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_LE(most.load(), kMaxInFlight);
  EXPECT_GT(admitted.load(), 2 * kMaxInFlight) << "leases are given back and taken again";
  EXPECT_EQ(available(), kMaxInFlight) << "every lease was released";
}

TEST_P(LeasesTest, MetricsFollowGrantedReleasedAndExpiredLeases) {
  const std::string id = take(*sluice_);
  take(*sluice_);
  take(*sluice_, "short");
  ASSERT_EQ(sluice_->client().post("/release", leaseBody(id)).status, 200);
  const auto metric = [&](const std::string& series) {
    const std::string text = sluice_->client().get("/metrics").body;
    const std::size_t at = text.find(series + " ");
    return at == std::string::npos ? std::string() : text.substr(at + series.size() + 1, 1);
  };
  EXPECT_EQ(metric(R"(sluice_leases_granted_total{domain="work",rule="work.job"})"), "2");
  EXPECT_EQ(metric(R"(sluice_leases_released_total{domain="work",rule="work.job",by="release"})"),
            "1");
  EXPECT_EQ(metric(R"(sluice_leases_outstanding{domain="work",rule="work.job"})"), "1");
  EXPECT_TRUE(waitFor(
      [&] {
        return metric(R"(sluice_leases_expired_total{domain="work",rule="work.short"})") == "1";
      },
      5s));
  EXPECT_EQ(metric(R"(sluice_leases_outstanding{domain="work",rule="work.short"})"), "0");
}

TEST_P(LeasesTest, TheAdminResetClearsLeases) {
  std::vector<std::string> ids;
  for (int i = 0; i < kMaxInFlight; ++i) {
    ids.push_back(take(*sluice_));
  }
  ASSERT_EQ(available(), 0);
  const HttpResponse reset =
      HttpClient("127.0.0.1", admin_port_)
          .request("DELETE", "/limits", R"({"domain":"work","clientId":"c1"})");
  ASSERT_EQ(reset.status, 200) << reset.body;
  EXPECT_EQ(available(), kMaxInFlight);
  EXPECT_EQ(sluice_->client().post("/release", leaseBody(ids[0])).status, 404);
  // The operators' view follows: the reset leases are no longer outstanding.
  const std::string metrics = sluice_->client().get("/metrics").body;
  EXPECT_NE(metrics.find(R"(sluice_leases_outstanding{domain="work",rule="work.job"} 0)"),
            std::string::npos)
      << metrics;
  EXPECT_NE(
      metrics.find(R"(sluice_leases_released_total{domain="work",rule="work.job",by="reset"} )" +
                   std::to_string(kMaxInFlight)),
      std::string::npos)
      << metrics;
}

// A concurrency limit's bucket holds its leases: a runtime override of it is refused, and the
// leases are left as they are.
TEST_P(LeasesTest, AnOverrideOfAConcurrencyLimitIsRefused) {
  const std::string id = take(*sluice_);
  const HttpResponse refused = HttpClient("127.0.0.1", admin_port_)
                                   .request("PUT", "/limits/overrides",
                                            R"({"domain":"work","rule":"work.job","clientId":"c1",)"
                                            R"("rate_limit":{"max_in_flight":9},"reason":"r"})");
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_NE(refused.body.find("is a concurrency limit"), std::string::npos) << refused.body;
  EXPECT_EQ(available(), kMaxInFlight - 1);
  EXPECT_EQ(sluice_->client().post("/release", leaseBody(id)).status, 200);
}

// POST /release serves leases and reservations alike, routed on the body's key.
TEST_P(LeasesTest, ReleaseTellsALeaseFromAReservationByTheBodysKey) {
  const std::string lease = take(*sluice_);
  json reserve = json::parse(decision("tokens"));
  reserve["amount"] = 600;
  const HttpResponse held = sluice_->client().post("/reserve", reserve.dump());
  ASSERT_EQ(held.status, 200) << held.body;
  const std::string reservation = json::parse(held.body)["reservation_id"].get<std::string>();

  json both = json::parse(decision("tokens"));
  both["reservation_id"] = reservation;
  both["lease"] = lease;
  HttpResponse r = sluice_->client().post("/release", both.dump());
  const auto error = [](const HttpResponse& answer) {
    return json::parse(answer.body).value("error", std::string());
  };
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error(r).find("both \"lease\" and \"reservation_id\""), std::string::npos) << r.body;
  r = sluice_->client().post("/release", decision("tokens"));
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error(r).find("neither \"lease\""), std::string::npos) << r.body;
  r = sluice_->client().post("/release", "[1]");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("body: must be a JSON object"), std::string::npos) << r.body;
  EXPECT_EQ(available(), kMaxInFlight - 1) << "nothing was released by a refused body";
  EXPECT_EQ(available("tokens"), 400);

  json release = json::parse(decision("tokens"));
  release["reservation_id"] = reservation;
  r = sluice_->client().post("/release", release.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["status"], "released");
  EXPECT_EQ(available("tokens"), 1000);
  r = sluice_->client().post("/release", leaseBody(lease));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["released"], true);
  EXPECT_EQ(available(), kMaxInFlight);
  // A concurrency limit holds leases, not reservations.
  json on_leases = json::parse(decision("job"));
  on_leases["amount"] = 1;
  r = sluice_->client().post("/reserve", on_leases.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("a concurrency limit cannot hold a reservation"), std::string::npos)
      << r.body;
}

// nginx and Traefik ask /check and never call back: the lease of an allowed check is
// released by the application (X-Sluice-Lease) or comes back at its expiry.
TEST_P(LeasesTest, ACheckTakesALeaseThatTheAppReleasesOrThatExpires) {
  const char* const rules = R"(domain: default
rate_limit:
  algorithm: concurrency
  max_in_flight: 1
  lease: 1s
)";
  SluiceOptions options = withRules({{"default.yaml", rules}});
  if (redis_) {
    options.args.insert(options.args.end(), {"--store", "redis", "--redis", redis_->url()});
  } else if (cluster_) {
    options.args.insert(options.args.end(),
                        {"--store", "redis_cluster", "--redis", cluster_->url(0)});
  }
  SluiceProcess sluice(options);
  ASSERT_TRUE(waitFor([&] { return sluice.client().get("/readyz").status == 200; }, 10s))
      << sluice.log();
  HttpClient client = sluice.client();
  const HttpResponse first = client.request("GET", "/check", {});
  ASSERT_EQ(first.status, 200) << first.body << sluice.log();
  const std::string id = first.header("X-Sluice-Lease");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(client.request("GET", "/check", {}).status, 429);
  ASSERT_EQ(client.post("/release", leaseBody(id)).status, 200);
  const auto taken = std::chrono::steady_clock::now();
  ASSERT_EQ(client.request("GET", "/check", {}).status, 200);
  EXPECT_EQ(client.request("GET", "/check", {}).status, 429);
  ASSERT_TRUE(waitFor([&] { return client.request("GET", "/check", {}).status == 200; }, 3s));
  EXPECT_GE(std::chrono::steady_clock::now() - taken, 900ms) << "only its expiry frees it";
}

TEST_P(LeasesTest, ADeadSidecarsLeasesComeBackWithinTheLeaseTime) {
  if (GetParam() == Backend::kMemory) {
    GTEST_SKIP() << "the memory store's leases die with their process";
  }
  std::unique_ptr<SluiceProcess> other = start();
  const auto taken = std::chrono::steady_clock::now();
  ASSERT_FALSE(take(*other, "short").empty());
  other->signal(SIGKILL);
  ASSERT_TRUE(other->wait(5s).has_value());
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_TRUE(take(*sluice_, "short").empty()) << "the dead sidecar's lease still holds";
  std::string id;
  ASSERT_TRUE(waitFor(
      [&] {
        id = take(*sluice_, "short");
        return !id.empty();
      },
      3s))
      << "the lease of 1.5 s did not come back";
  const auto back = std::chrono::steady_clock::now();
  EXPECT_GE(back - taken, 1400ms) << "it came back before its expiry";
  // Within the lease time, give or take the polling of a loaded machine (three Redis
  // servers and two sidecars on the test's cores).
  EXPECT_LE(back - killed, 1500ms + 2s);
  EXPECT_EQ(sluice_->client().post("/release", leaseBody(id)).status, 200);
}

INSTANTIATE_TEST_SUITE_P(Stores, LeasesTest,
                         ::testing::Values(Backend::kMemory, Backend::kRedis, Backend::kCluster),
                         backendName);

}  // namespace
}  // namespace sluice::test
