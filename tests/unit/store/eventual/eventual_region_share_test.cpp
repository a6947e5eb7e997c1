// Two regions hammering one eventual limit through a slow link, on simulated time: the real
// engines (their syncs, replication, local decisions and the script's round trips against real
// redis-servers, RedisLink simulating only the network) keep the admitted total within
// [L, 1.01 L] (docs/eventual.md, "Regions: each region's share near the limit").
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/common/manual_executor.hpp"
#include "store/eventual/eventual_engine.hpp"
#include "store/eventual/eventual_script.hpp"
#include "support/redis_server.hpp"
#include "unit/store/eventual/redis_link.hpp"

namespace sluice {
namespace {

using namespace std::chrono_literals;
using test::RedisLink;
using test::RedisServer;

/// One region: its redis-server and its sidecar's engine, with the engine's links by region.
struct RegionSidecar {
  std::string name;
  Metrics metrics;
  std::map<std::string, std::shared_ptr<RedisLink>> links;
  std::unique_ptr<EventualEngine> engine;
  std::int64_t admitted = 0;
};

struct Hammering {
  std::int64_t admitted = 0;
  Micros limit_reached_us = -1;  ///< simulated time when the admitted total reached L
};

class EventualRegionShareTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    limit_.key = "hammered|api";
    limit_.params.algorithm = Algorithm::kFixedWindow;
    limit_.params.limit = 1'000;
    limit_.params.window_us = 24LL * 3600 * kMicrosPerSecond;
    limit_.params.consistency = Consistency::kEventual;
    refs_ = {EventualLimitRef{0, &limit_}};
  }

  /// A started sidecar of region `name` replicating to region `other`, its link to `other`
  /// delayed by `one_way` each way.
  std::unique_ptr<RegionSidecar> sidecar(const std::string& name, const std::string& other,
                                         std::chrono::microseconds one_way) {
    auto s = std::make_unique<RegionSidecar>();
    s->name = name;
    EventualOptions options;
    options.sync_interval = 50ms;
    options.region = name;
    EventualRegion r;
    r.name = other;
    options.regions.push_back(r);
    RedisOptions local;
    local.key_prefix = "t";
    RegionSidecar* raw = s.get();
    auto backends = [this, raw, name, one_way](const EventualRegion* region,
                                               Metrics&) -> std::shared_ptr<redis::RedisBackend> {
      const std::string to = region != nullptr ? region->name : name;
      auto link =
          std::make_shared<RedisLink>(executor_, servers_[to], eventual::composeEventualScript());
      if (region != nullptr) {
        link->setDelay(one_way);
      }
      raw->links[to] = link;
      return link;
    };
    s->engine =
        std::make_unique<EventualEngine>(options, local, clock_, executor_, backends, s->metrics);
    s->engine->start();
    executor_.runReady();
    return s;
  }

  /// One request of cost 1, as the store decides a pure eventual request: locally when the
  /// view may, else by the script's decide op on the region's own Redis (no delay).
  bool request(RegionSidecar& s) {
    EventualEngine::Local local = s.engine->decideLocally(refs_, 1, true, false);
    if (local.decided) {
      return local.allowed;
    }
    std::vector<std::string> keys;
    std::vector<std::string> args;
    const Micros sent_at = clock_.nowMicros();
    s.engine->buildCall(refs_, eventual::ScriptOp::kDecide, 1, sent_at, keys, args);
    std::optional<Result<redis::Reply>> reply;
    s.links[s.name]->evalScript(std::move(keys), std::move(args), 1s,
                                [&reply](Result<redis::Reply> r) { reply = std::move(r); });
    executor_.runReady();
    if (!reply || !*reply) {
      ADD_FAILURE() << "round trip failed";
      return false;
    }
    StoreResponse response;
    EXPECT_TRUE(s.engine->absorb(refs_, eventual::ScriptOp::kDecide, **reply, sent_at, &response));
    return response.allowed;
  }

  /// Both regions send `per_ms` requests each per simulated millisecond until the admitted
  /// total has not moved for 3 s (at most 60 s).
  Hammering hammer(std::chrono::microseconds one_way, int per_ms) {
    auto a = sidecar("a", "b", one_way);
    auto b = sidecar("b", "a", one_way);
    executor_.advance(100ms);  // both links have answered once
    Hammering run;
    Micros last_change = 0;
    std::int64_t last = 0;
    for (Micros t = 0; t < 60 * kMicrosPerSecond && t - last_change < 3 * kMicrosPerSecond;
         t += 1000) {
      for (RegionSidecar* s : {a.get(), b.get()}) {
        for (int k = 0; k < per_ms; ++k) {
          s->admitted += request(*s) ? 1 : 0;
        }
      }
      run.admitted = a->admitted + b->admitted;
      if (run.admitted != last) {
        last = run.admitted;
        last_change = t;
      }
      if (run.limit_reached_us < 0 && run.admitted >= limit_.params.limit) {
        run.limit_reached_us = t;
      }
      executor_.advance(1ms);
    }
    return run;
  }

  ManualClock clock_;
  ManualExecutor executor_{clock_};
  std::map<std::string, RedisServer> servers_;
  StoreLimit limit_;
  std::vector<EventualLimitRef> refs_;
};

// 2 000 requests per second per region (rate x delay: 100 to 400 hits on a 50 to 200 ms link,
// 10 to 40 % of L): admitted within [L, 1.01 L].
TEST_P(EventualRegionShareTest, TwoRegionsAtFullRateAdmitWithinOnePercent) {
  const Hammering run = hammer(std::chrono::milliseconds(GetParam()), 2);
  EXPECT_GE(run.admitted, limit_.params.limit);
  EXPECT_LE(run.admitted, limit_.params.limit + limit_.params.limit / 100);
  // The price: the last hits wait for the other region's confirmations.
  EXPECT_GE(run.limit_reached_us, 0);
  RecordProperty("admitted", static_cast<int>(run.admitted));
  RecordProperty("limit_reached_ms", static_cast<int>(run.limit_reached_us / 1000));
}

INSTANTIATE_TEST_SUITE_P(LinkDelay, EventualRegionShareTest, ::testing::Values(50, 200),
                         [](const auto& info) { return std::to_string(info.param) + "ms"; });

}  // namespace
}  // namespace sluice
