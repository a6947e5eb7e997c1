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
            R"("domain":"auth","client":"a \"b\"","rule":"login","decision":"denied",)"
            R"("degraded":false,"latency_us":42)");
}

}  // namespace
}  // namespace sluice::app
