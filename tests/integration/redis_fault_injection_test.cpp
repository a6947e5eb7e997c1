// Faults injected on purpose between real sidecars and a real Redis (docs/redis.md): the network
// (fault proxy: latency, black hole, reset mid-reply, half-open, slow drip) and Redis itself
// (-OOM, -READONLY, -BUSY, -LOADING, -NOAUTH, CLIENT KILL, CLIENT PAUSE). Each case runs three
// sidecars at once, one per failure mode, each behind its own proxy to the same Redis, and
// checks what README promises: during the fault every answer is either Redis' own or the
// failure mode's (open: 200 flagged degraded; closed: 503; local: the memory store, flagged
// degraded); the fault is logged once and counted by kind; recovery is automatic and timed;
// nothing crashes; and no request is charged twice (a script call whose reply is lost is
// never retried). Each case prints one "FAULT-TABLE" line per mode (docs/quality.md).
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "support/fault_proxy.hpp"
#include "support/http_client.hpp"
#include "support/redis_server.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using std::chrono::milliseconds;

constexpr std::int64_t kLimit = 100'000;
constexpr std::array<const char*, 3> kModes = {"open", "closed", "local"};

const char* const kRules =
    "domain: faults\n"
    "descriptors:\n"
    "  - key: probe\n"
    "    rate_limit:\n"
    "      unit: hour\n"
    "      requests_per_unit: 100000\n";

std::string body(const std::string& client, int hits = 1) {
  return json{{"domain", "faults"},
              {"clientId", client},
              {"hits", hits},
              {"descriptors", json::array({json::array({{{"key", "probe"}, {"value", "p"}}})})}}
      .dump();
}

int countOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (std::size_t pos = text.find(needle); pos != std::string::npos;
       pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

/// Sends `argv` on a connection of its own without waiting for the reply (a long script).
ContextPtr sendWithoutWaiting(RedisServer& redis, const std::vector<std::string>& argv) {
  ContextPtr c = redis.connect();
  std::vector<const char*> args;
  std::vector<std::size_t> lens;
  for (const auto& a : argv) {
    args.push_back(a.data());
    lens.push_back(a.size());
  }
  redisAppendCommandArgv(c.get(), static_cast<int>(args.size()), args.data(), lens.data());
  int done = 0;
  while (!done && redisBufferWrite(c.get(), &done) == REDIS_OK) {
  }
  return c;
}

/// One sidecar of a case: its failure mode, its proxy, what it answered.
struct Sidecar {
  std::string mode;
  std::unique_ptr<FaultProxy> proxy;
  std::unique_ptr<SluiceProcess> process;
  std::unique_ptr<HttpClient> http;
  std::string client;
  int from_redis = 0;       ///< 200, not degraded (charged in Redis)
  int failure_answers = 0;  ///< the failure mode's answer
  int wrong_answers = 0;    ///< anything else
  std::string last_wrong;
  std::optional<Clock::time_point> first_failure;
  std::optional<Clock::time_point> recovered_at;

  /// One request; true when Redis answered it.
  bool send() {
    HttpResponse r = http->post("/shouldAllowRequest", body(client));
    const bool degraded = r.header("X-Sluice-Degraded") == "true";
    if (r.status == 200 && !degraded) {
      ++from_redis;
      return true;
    }
    const bool expected = mode == "closed" ? r.status == 503 : r.status == 200 && degraded;
    if (expected) {
      ++failure_answers;
      if (!first_failure) {
        first_failure = Clock::now();
      }
    } else {
      ++wrong_answers;
      last_wrong = std::to_string(r.status) + " " + r.body;
    }
    return false;
  }

  /// The count Redis holds for this sidecar's client (a check: hits 0 charges nothing).
  std::int64_t charged() {
    HttpResponse r = http->post("/shouldAllowRequest", body(client, 0));
    if (r.status != 200 || r.header("X-Sluice-Degraded") == "true") {
      return -1;
    }
    return kLimit - std::stoll(r.header("X-Ratelimit-Remaining"));
  }
};

struct FaultCase {
  using Action = std::function<void(RedisServer&, std::vector<Sidecar>&)>;
  FaultCase(std::string name_, std::vector<std::string> redis_args_, std::string password_,
            Action inject_, Action clear_, std::vector<std::string> kinds_,
            bool counts_survive_ = true, bool must_fail_ = true, std::string wait_for_kind_ = {})
      : name(std::move(name_)),
        redis_args(std::move(redis_args_)),
        password(std::move(password_)),
        inject(std::move(inject_)),
        clear(std::move(clear_)),
        kinds(std::move(kinds_)),
        counts_survive(counts_survive_),
        must_fail(must_fail_),
        wait_for_kind(std::move(wait_for_kind_)) {}

  std::string name;
  /// Extra redis-server flags.
  std::vector<std::string> redis_args;
  std::string password;
  /// Applies the fault; `clear` (may be empty: the fault heals by itself) removes it.
  std::function<void(RedisServer&, std::vector<Sidecar>&)> inject;
  std::function<void(RedisServer&, std::vector<Sidecar>&)> clear;
  /// The fault kinds (redis_faults_total{kind}) the case may count; at least one must be.
  std::vector<std::string> kinds;
  /// False when the fault replaces Redis' data (a replica loads its master's).
  bool counts_survive = true;
  /// True when some request must get the failure mode's answer.
  bool must_fail = true;
  /// The fault lasts until every sidecar has counted this kind (e.g. "noauth": until a
  /// reconnection has been refused), within the fault deadline.
  std::string wait_for_kind;
};

void PrintTo(const FaultCase& c, std::ostream* os) { *os << c.name; }

class RedisFaultInjectionTest : public ::testing::TestWithParam<FaultCase> {};

TEST_P(RedisFaultInjectionTest, EachFailureModeAnswersAsPromisedAndRecoversAlone) {
  const FaultCase& fault = GetParam();
  RedisServerOptions redis_options;
  redis_options.extra_args = fault.redis_args;
  redis_options.password = fault.password;
  RedisServer redis(redis_options);

  std::vector<Sidecar> sidecars(kModes.size());
  for (std::size_t i = 0; i < kModes.size(); ++i) {
    Sidecar& s = sidecars[i];
    s.mode = kModes[i];
    s.client = fault.name + "-" + s.mode;
    s.proxy = std::make_unique<FaultProxy>(redis.port());
    std::string url = s.proxy->url();
    if (!fault.password.empty()) {
      url = "redis://:" + fault.password + "@127.0.0.1:" + std::to_string(s.proxy->port()) + "/0";
    }
    // A deadline a loaded machine (the CPU hog of docs/quality.md) keeps: the faults below
    // last far longer.
    SluiceOptions options = withRules({{"faults.yaml", kRules}},
                                      {"--threads", "1", "--store", "redis", "--redis", url,
                                       "--failure-mode", s.mode, "--redis-timeout-ms", "250"});
    s.process = std::make_unique<SluiceProcess>(options);
    s.http = std::make_unique<HttpClient>(s.process->client(milliseconds(10'000)));
  }
  for (Sidecar& s : sidecars) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (s.http->get("/readyz").status != 200 && Clock::now() < deadline) {
      std::this_thread::sleep_for(milliseconds(20));
    }
    ASSERT_EQ(s.http->get("/readyz").status, 200) << s.process->log();
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(s.send()) << s.mode << ": " << s.last_wrong << "\n" << s.process->log();
    }
  }

  fault.inject(redis, sidecars);
  const auto injected = Clock::now();
  // Load until every sidecar has answered from its failure mode (or, for a fault that may
  // not touch a request, a short while).
  const auto fault_deadline = injected + std::chrono::seconds(fault.must_fail ? 8 : 1);
  for (;;) {
    bool all_failed = true;
    for (Sidecar& s : sidecars) {
      if (!s.first_failure) {
        s.send();
      } else if (!fault.clear && !s.recovered_at && s.send()) {
        s.recovered_at = Clock::now();  // healed by itself while the others still fail
      }
      all_failed =
          all_failed && s.first_failure.has_value() &&
          (fault.wait_for_kind.empty() || familyTotal(*s.process, "sluice_redis_faults_total",
                                                      "kind=\"" + fault.wait_for_kind + "\"") > 0);
    }
    if (all_failed || Clock::now() >= fault_deadline) {
      break;
    }
  }
  if (fault.clear) {
    fault.clear(redis, sidecars);
  }
  // Recovery is timed from the end of the fault, or from its start when it heals alone.
  const auto cleared = fault.clear ? Clock::now() : injected;
  const auto recovery_deadline = cleared + std::chrono::seconds(15);
  for (bool pending = true; pending && Clock::now() < recovery_deadline;) {
    pending = false;
    for (Sidecar& s : sidecars) {
      if (!s.recovered_at) {
        if (s.send()) {
          s.recovered_at = Clock::now();
        } else {
          pending = true;
        }
      }
    }
  }

  for (Sidecar& s : sidecars) {
    SCOPED_TRACE(fault.name + " / " + s.mode);
    const std::string log = s.process->log();
    ASSERT_TRUE(s.process->running()) << log;
    if (fault.must_fail) {
      EXPECT_TRUE(s.first_failure.has_value()) << "the failure mode never answered\n" << log;
    }
    EXPECT_EQ(s.wrong_answers, 0) << s.last_wrong << "\n" << log;
    ASSERT_TRUE(s.recovered_at.has_value()) << "no recovery\n" << log;

    // Counted by kind, and each kind logged once (one episode per case).
    double counted = 0;
    std::string kinds_seen;
    for (const std::string kind : {"timeout", "connection", "oom", "readonly", "busy", "loading",
                                   "noauth", "script", "protocol", "masterdown"}) {
      const double n =
          familyTotal(*s.process, "sluice_redis_faults_total", "kind=\"" + kind + "\"");
      const int lines = countOf(log, "store redis fault " + kind + ":");
      if (n > 0 || lines > 0) {
        kinds_seen += kind + " ";
        EXPECT_EQ(lines, 1) << kind << "\n" << log;
        EXPECT_GE(n, lines) << kind;
      }
      if (std::find(fault.kinds.begin(), fault.kinds.end(), kind) != fault.kinds.end()) {
        counted += n;
      }
    }
    if (fault.must_fail || s.failure_answers > 0) {
      // Every mode counts the fault by kind, `local` too, although it does not even ask a
      // store whose health is failing: a lost connection and a PING answered with an error
      // are faults of their own.
      EXPECT_GT(counted, 0) << "seen: " << kinds_seen << "\n" << log;
      EXPECT_LE(familyTotal(*s.process, "sluice_store_failure_mode_activations_total", ""), 2)
          << log;
    }

    // No request charged twice: Redis holds at least what it answered, and at most that plus
    // the requests that got the failure mode's answer (their script may have run once).
    const std::int64_t charged = s.charged();
    if (fault.counts_survive) {
      EXPECT_GE(charged, s.from_redis) << log;
      EXPECT_LE(charged, s.from_redis + s.failure_answers) << log;
    }
    if (fault.name == "reset_mid_reply") {
      // The script whose reply was cut ran once, and was not sent again; the other
      // failure-mode answers failed fast while the connection was being made again, and
      // never reached Redis.
      EXPECT_EQ(charged, s.from_redis + 1) << log;
    }
    const auto recovery = std::chrono::duration_cast<milliseconds>(*s.recovered_at - cleared);
    if (std::getenv("SLUICE_FAULT_LOGS") != nullptr) {
      std::printf("%s\n", log.c_str());
    }
    std::printf("FAULT-TABLE | %s | %s | %d | %d | %lld | %lld | %s|\n", fault.name.c_str(),
                s.mode.c_str(), s.from_redis, s.failure_answers, static_cast<long long>(charged),
                static_cast<long long>(recovery.count()), kinds_seen.c_str());
    EXPECT_LT(recovery, std::chrono::seconds(10));
  }
}

std::vector<std::string> luaBusyFor(int ms) {
  return {"EVAL",
          "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] "
          "while true do local n = redis.call('TIME') "
          "if n[1] * 1000000 + n[2] - s > " +
              std::to_string(ms) + "000 then break end end return 1",
          "0"};
}

std::vector<FaultCase> faultCases() {
  std::vector<FaultCase> cases;
  auto each = [](std::vector<Sidecar>& sidecars, const std::function<void(FaultProxy&)>& f) {
    for (Sidecar& s : sidecars) {
      f(*s.proxy);
    }
  };
  cases.push_back(
      {"latency",
       {},
       "",
       [each](RedisServer&, std::vector<Sidecar>& s) {
         each(s, [](FaultProxy& p) { p.setLatency(milliseconds(600)); });
       },
       [each](RedisServer&, std::vector<Sidecar>& s) { each(s, [](FaultProxy& p) { p.clear(); }); },
       {"timeout"}});
  cases.push_back(
      {"blackhole",
       {},
       "",
       [each](RedisServer&, std::vector<Sidecar>& s) {
         each(s, [](FaultProxy& p) { p.setBlackhole(true); });
       },
       [each](RedisServer&, std::vector<Sidecar>& s) { each(s, [](FaultProxy& p) { p.clear(); }); },
       {"timeout", "connection"}});
  cases.push_back({"reset_mid_reply",
                   {},
                   "",
                   [each](RedisServer&, std::vector<Sidecar>& s) {
                     each(s, [](FaultProxy& p) { p.resetMidReply("EVALSHA"); });
                   },
                   {},
                   {"connection"}});
  cases.push_back({"half_open",
                   {},
                   "",
                   [each](RedisServer&, std::vector<Sidecar>& s) {
                     each(s, [](FaultProxy& p) { p.halfOpenExisting(); });
                   },
                   {},
                   {"timeout", "connection"}});
  cases.push_back(
      {"slow_drip",
       {},
       "",
       [each](RedisServer&, std::vector<Sidecar>& s) {
         each(s, [](FaultProxy& p) { p.setDrip(1, milliseconds(30)); });
       },
       [each](RedisServer&, std::vector<Sidecar>& s) { each(s, [](FaultProxy& p) { p.clear(); }); },
       {"timeout", "connection"}});
  cases.push_back({"oom",
                   {"--maxmemory-policy", "noeviction"},
                   "",
                   [](RedisServer& r, std::vector<Sidecar>&) {
                     r.command({"CONFIG", "SET", "maxmemory", "1"});
                   },
                   [](RedisServer& r, std::vector<Sidecar>&) {
                     r.command({"CONFIG", "SET", "maxmemory", "0"});
                   },
                   {"oom"}});
  // The replica's data is replaced by its (empty) master's: counts do not survive, by design.
  auto master = std::make_shared<std::unique_ptr<RedisServer>>();
  cases.push_back({"readonly",
                   {},
                   "",
                   [master](RedisServer& r, std::vector<Sidecar>&) {
                     *master = std::make_unique<RedisServer>();
                     r.command({"REPLICAOF", "127.0.0.1", std::to_string((*master)->port())});
                   },
                   [master](RedisServer& r, std::vector<Sidecar>&) {
                     r.command({"REPLICAOF", "NO", "ONE"});
                     master->reset();
                   },
                   {"readonly", "script", "connection", "timeout", "loading", "masterdown"},
                   false});
  auto blocker = std::make_shared<ContextPtr>();
  cases.push_back({"busy",
                   {"--busy-reply-threshold", "100"},
                   "",
                   [blocker](RedisServer& r, std::vector<Sidecar>&) {
                     *blocker = sendWithoutWaiting(r, luaBusyFor(2000));
                   },
                   {},
                   {"busy", "timeout", "connection"}});
  cases.push_back(
      {"loading",
       {"--key-load-delay", "40", "--loading-process-events-interval-bytes", "1024"},
       "",
       [](RedisServer& r, std::vector<Sidecar>&) {
         r.command({"EVAL", "for i = 1, 20000 do redis.call('SET', 'pad:' .. i, 'x') end", "0"});
         r.command({"SAVE"});
         r.stop();
         r.restart();  // returns while it loads (answers -LOADING)
       },
       {},
       {"loading", "connection"}});
  cases.push_back({"noauth",
                   {},
                   "pw1",
                   [](RedisServer& r, std::vector<Sidecar>&) {
                     r.command({"CONFIG", "SET", "requirepass", "pw2"});
                     r.command({"CLIENT", "KILL", "TYPE", "normal"});
                   },
                   [](RedisServer& r, std::vector<Sidecar>&) {
                     // The fixture's own connection was authenticated before the change.
                     r.command({"CONFIG", "SET", "requirepass", "pw1"});
                   },
                   {"noauth", "connection"},
                   true,
                   true,
                   "noauth"});
  cases.push_back({"client_kill",
                   {},
                   "",
                   [](RedisServer& r, std::vector<Sidecar>&) {
                     r.command({"CLIENT", "KILL", "TYPE", "normal"});
                   },
                   {},
                   {"connection"},
                   true,
                   false});
  cases.push_back({"client_pause",
                   {},
                   "",
                   [](RedisServer& r, std::vector<Sidecar>&) {
                     r.command({"CLIENT", "PAUSE", "1500", "ALL"});
                   },
                   {},
                   {"timeout", "connection"}});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Faults, RedisFaultInjectionTest, ::testing::ValuesIn(faultCases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace sluice::test
