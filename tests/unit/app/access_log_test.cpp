#include "app/access_log.hpp"

#include <gtest/gtest.h>

namespace sluice::app {
namespace {

TEST(AccessRecordTest, PlainAndJsonLines) {
  AccessRecord record;
  record.domain = "auth";
  record.client = "a \"b\"";
  record.rule = "login";
  record.decision = "denied";
  record.latency_us = 42;
  EXPECT_EQ(formatAccessRecord(record, LogFormat::kPlain),
            R"(domain="auth" client="a \"b\"" rule="login" decision=denied degraded=false )"
            R"(latency_us=42)");
  EXPECT_EQ(formatAccessRecord(record, LogFormat::kJson),
            R"({"time":"1970-01-01T00:00:00.000000Z","domain":"auth","client":"a \"b\"",)"
            R"("descriptors":[],"hits":1,"rule":"login","decision":"denied","degraded":false,)"
            R"("latency_us":42,"rules":""})");
}

TEST(AccessRecordTest, JsonLineCarriesWhatAReplayNeeds) {
  DecisionRequest request;
  request.domain = "auth";
  request.client_id = "u1";
  request.descriptors = {{{"user", "mallory"}}};
  request.hits = 3;
  AccessRecord record;
  record.request = &request;
  record.time_us = 1'795'665'014'123'456;
  record.rules_hash = "9f2c";
  record.rule = "per_user";
  record.decision = "allowed";
  record.latency_us = 7;
  EXPECT_EQ(formatAccessRecord(record, LogFormat::kJson),
            R"({"time":"2026-11-26T03:50:14.123456Z","domain":"auth","client":"u1",)"
            R"("descriptors":[{"user":"mallory"}],"hits":3,"rule":"per_user",)"
            R"("decision":"allowed","degraded":false,"latency_us":7,"rules":"9f2c"})");
}

}  // namespace
}  // namespace sluice::app
