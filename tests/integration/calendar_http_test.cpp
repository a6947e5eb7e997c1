// Calendar quotas over real HTTP against the real binary, on the memory store and on
// `--store redis` with a real redis-server (docs/algorithms.md, "Calendar windows"): the
// reset a client is told is the next local midnight of the day, the 1st of the month, in
// the rule's zone or the one its request names. The expected instants come from glibc's
// own reading of the tz database (mktime under TZ=...), not from Sluice's code.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>

#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kCalendarRules = R"(domain: quota
descriptors:
  - key: plan
    value: monthly
    rate_limit:
      name: monthly
      unit: month
      requests_per_unit: 2
      calendar: {time_zone: Europe/Paris}
  - key: plan
    value: weekly
    rate_limit:
      name: weekly
      unit: week
      requests_per_unit: 5
      calendar: {time_zone: Australia/Sydney}
  - key: customer
    descriptors:
      - key: tz
        rate_limit:
          name: daily
          unit: day
          requests_per_unit: 3
          calendar: {time_zone_from: tz}
)";

std::int64_t nowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The next start of a calendar unit after `at_ms` in `zone`, by glibc: local midnight of
/// the next day (`days` = 1), of the next Monday (`monday`), or of the 1st of next month.
std::int64_t nextBoundaryMs(const char* zone, std::int64_t at_ms, const std::string& unit) {
  const char* old = std::getenv("TZ");
  const std::string saved = old != nullptr ? old : "";
  setenv("TZ", zone, 1);
  tzset();
  const std::time_t at = static_cast<std::time_t>(at_ms / 1000);
  std::tm local{};
  localtime_r(&at, &local);
  std::tm next{};
  next.tm_year = local.tm_year;
  next.tm_isdst = -1;
  if (unit == "month") {
    next.tm_mon = local.tm_mon + 1;
    next.tm_mday = 1;
  } else if (unit == "week") {
    next.tm_mon = local.tm_mon;
    next.tm_mday = local.tm_mday + (local.tm_wday == 0 ? 1 : 8 - local.tm_wday);
  } else {
    next.tm_mon = local.tm_mon;
    next.tm_mday = local.tm_mday + 1;
  }
  const std::time_t boundary = std::mktime(&next);
  if (old != nullptr) {
    setenv("TZ", saved.c_str(), 1);
  } else {
    unsetenv("TZ");
  }
  tzset();
  return static_cast<std::int64_t>(boundary) * 1000;
}

std::string clientId() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->name()) + "-" + std::to_string(nowMs());
}

enum class Store { kMemory, kRedis };

class CalendarHttpTest : public ::testing::TestWithParam<Store> {
 protected:
  static void TearDownTestSuite() {
    memory_.reset();
    redis_sluice_.reset();
    redis_.reset();
  }

  void SetUp() override {
    if (GetParam() == Store::kMemory) {
      if (!memory_) {
        memory_ = std::make_unique<SluiceProcess>(withRules({{"quota.yaml", kCalendarRules}}));
      }
      sluice_ = memory_.get();
      return;
    }
    if (!redis_sluice_) {
      redis_ = std::make_unique<RedisServer>();
      redis_sluice_ = std::make_unique<SluiceProcess>(
          withRules({{"quota.yaml", kCalendarRules}},
                    {"--threads", "1", "--store", "redis", "--redis", redis_->url(),
                     "--failure-mode", "closed", "--redis-timeout-ms", "1000"}));
      HttpClient client = redis_sluice_->client();
      const auto deadline = SteadyClock::now() + std::chrono::seconds(10);
      while (client.get("/readyz").status != 200) {
        if (SteadyClock::now() > deadline) {
          throw std::runtime_error("sluice on redis not ready: " + redis_sluice_->log());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    sluice_ = redis_sluice_.get();
  }

  HttpResponse decide(const std::string& client, const std::string& descriptor) {
    return sluice_->client().post(
        "/shouldAllowRequest",
        R"({"domain":"quota","clientId":")" + client + R"(","descriptors":[)" + descriptor + "]}");
  }

  /// Decides and checks that the reset told (body and headers) is the time left until the
  /// boundary glibc computes for `zone` and `unit`, within the request's own duration.
  HttpResponse expectResetAt(const std::string& client, const std::string& descriptor,
                             const char* zone, const std::string& unit) {
    const std::int64_t before = nowMs();
    HttpResponse r = decide(client, descriptor);
    const std::int64_t after = nowMs();
    SCOPED_TRACE(r.body);
    EXPECT_EQ(nextBoundaryMs(zone, before, unit), nextBoundaryMs(zone, after, unit))
        << "the request straddled a boundary: rerun";
    const std::int64_t boundary = nextBoundaryMs(zone, after, unit);
    const json limit = json::parse(r.body)["descriptors"][0]["limits"][0];
    const std::int64_t reset_ms = limit["reset_after_ms"].get<std::int64_t>();
    EXPECT_GE(reset_ms, boundary - after);
    EXPECT_LE(reset_ms, boundary - before + 1);
    const std::int64_t reset_s = std::stoll(r.header("X-Ratelimit-Reset"));
    EXPECT_GE(reset_s, (boundary - after + 999) / 1000);
    EXPECT_LE(reset_s, (boundary - before + 999) / 1000 + 1);
    return r;
  }

  SluiceProcess* sluice_ = nullptr;

 private:
  static std::unique_ptr<SluiceProcess> memory_;
  static std::unique_ptr<RedisServer> redis_;
  static std::unique_ptr<SluiceProcess> redis_sluice_;
};

std::unique_ptr<SluiceProcess> CalendarHttpTest::memory_;
std::unique_ptr<RedisServer> CalendarHttpTest::redis_;
std::unique_ptr<SluiceProcess> CalendarHttpTest::redis_sluice_;

TEST_P(CalendarHttpTest, MonthlyQuotaResetsOnTheFirstOfTheMonthInParis) {
  const std::string client = clientId();
  const std::string monthly = R"([{"key":"plan","value":"monthly"}])";
  EXPECT_EQ(expectResetAt(client, monthly, "Europe/Paris", "month").status, 200);
  EXPECT_EQ(expectResetAt(client, monthly, "Europe/Paris", "month").status, 200);
  const HttpResponse denied = expectResetAt(client, monthly, "Europe/Paris", "month");
  EXPECT_EQ(denied.status, 429);
  // Retry-After names the same instant: the 1st of next month, local midnight.
  const std::int64_t retry_s = std::stoll(denied.header("Retry-After"));
  EXPECT_EQ(retry_s, std::stoll(denied.header("X-Ratelimit-Reset")));
  // The policy names the unit's nominal length (30 days).
  EXPECT_EQ(denied.header("RateLimit-Policy"), "\"monthly\";q=2;w=2592000");
}

TEST_P(CalendarHttpTest, WeeklyQuotaResetsOnMondayInSydney) {
  EXPECT_EQ(
      expectResetAt(clientId(), R"([{"key":"plan","value":"weekly"}])", "Australia/Sydney", "week")
          .status,
      200);
}

TEST_P(CalendarHttpTest, DailyQuotaEndsAtTheMidnightOfTheZoneTheRequestNames) {
  const std::string client = clientId();
  for (const char* zone : {"America/New_York", "Asia/Kolkata", "Pacific/Auckland"}) {
    const std::string descriptor =
        std::string(R"([{"key":"customer","value":"c1"},{"key":"tz","value":")") + zone + R"("}])";
    EXPECT_EQ(expectResetAt(client, descriptor, zone, "day").status, 200) << zone;
  }
}

TEST_P(CalendarHttpTest, AZoneTheDatabaseLacksIsABadRequest) {
  const HttpResponse r =
      decide(clientId(), R"([{"key":"customer","value":"c1"},{"key":"tz","value":"Mars/Base"}])");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_NE(r.body.find("entry \\\"tz\\\" names no time zone"), std::string::npos) << r.body;
}

TEST_P(CalendarHttpTest, RulesShowTheCalendar) {
  const json rules = json::parse(sluice_->client().get("/rules").body);
  const json& limit = rules["domains"]["quota"]["descriptors"][0]["rate_limits"][0];
  EXPECT_EQ(limit["calendar"]["unit"], "month");
  EXPECT_EQ(limit["calendar"]["time_zone"], "Europe/Paris");
}

INSTANTIATE_TEST_SUITE_P(Stores, CalendarHttpTest, ::testing::Values(Store::kMemory, Store::kRedis),
                         [](const auto& info) {
                           return info.param == Store::kMemory ? "memory" : "redis";
                         });

TEST(CalendarValidateTest, AnUnknownZoneStopsTheStartWithItsPlace) {
  const std::string dir = ::testing::TempDir() + "calendar-validate-" + std::to_string(nowMs());
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir + "/quota.yaml");
    out << "domain: quota\ndescriptors:\n  - key: plan\n    rate_limit:\n      unit: day\n"
           "      requests_per_unit: 3\n      calendar: {time_zone: Europe/Pariss}\n";
  }
  auto [status, output] = runSluice({"--validate", "--rules", dir});
  EXPECT_EQ(status, 1) << output;
  EXPECT_NE(output.find("quota.yaml:7:"), std::string::npos) << output;
  EXPECT_NE(output.find("did you mean 'Europe/Paris'?"), std::string::npos) << output;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sluice::test
