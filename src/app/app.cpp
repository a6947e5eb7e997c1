#include "app/app.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "app/operations.hpp"
#include "app/options.hpp"
#include "app/rules_watcher.hpp"
#include "http/decision_service.hpp"
#include "http/forward_auth.hpp"
#include "http/routes.hpp"
#include "http/server.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/memory_store.hpp"
#include "sluice/store/redis_store.hpp"

namespace sluice::app {
namespace {

namespace net = boost::asio;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

void setUpLogging(const std::string& level, LogFormat format) {
  if (auto status = sluice::setUpLogging(level, format); !status) {
    std::cerr << "sluice: " << status.error().message << "\n";
  }
}

std::optional<FailureMode> failureMode(const std::string& name) {
  if (name == "open") {
    return FailureMode::kOpen;
  }
  if (name == "closed") {
    return FailureMode::kClosed;
  }
  if (name == "local") {
    return FailureMode::kLocal;
  }
  return std::nullopt;
}

/// What one I/O thread owns besides its io_context: its store (Redis connections are per
/// thread) and its DecisionService.
struct ThreadServices {
  StorePtr store;
  std::unique_ptr<DecisionService> decisions;
};

// Every connection is a file descriptor, and the usual soft limit (1024) is far below what
// the server accepts (max_connections_per_thread per I/O thread): raise it to the hard limit.
void raiseOpenFileLimit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      spdlog::warn("cannot raise the open file limit to {}", limit.rlim_max);
    }
  }
}

int serve(const AppOptions& options) {
  std::optional<RedisOptions> redis_options;
  std::vector<RedisOptions> cluster_seeds;
  if (options.store == "redis" || options.store == "redis_cluster") {
    RedisOptions base;
    base.key_prefix = options.redis_prefix;
    base.request_timeout = options.redis_timeout;
    if (options.store == "redis_cluster") {
      auto parsed = parseRedisClusterUrls(options.redis_url, base);
      if (!parsed) {
        std::cerr << "sluice: --redis: " << parsed.error().message << "\n";
        return kExitUsage;
      }
      cluster_seeds = std::move(*parsed);
      redis_options = cluster_seeds.front();
    } else {
      auto parsed = parseRedisUrl(options.redis_url, base);
      if (!parsed) {
        std::cerr << "sluice: --redis: " << parsed.error().message << "\n";
        return kExitUsage;
      }
      redis_options = std::move(*parsed);
    }
  }

  raiseOpenFileLimit();
  Metrics metrics;
  SystemClock clock;
  http::describeHttpMetrics(metrics);
  auto operations = Operations::create(options, metrics, clock);
  if (!operations) {
    std::cerr << "sluice: " << operations.error().message << "\n";
    return kExitUsage;
  }

  http::ServerOptions server_options;
  server_options.host = options.listen_host;
  server_options.port = options.listen_port;
  server_options.threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  server_options.max_body_bytes = options.max_body_bytes;
  server_options.drain_timeout = options.drain_timeout;
  server_options.request_timeout = options.request_timeout;
  server_options.idle_timeout = options.idle_timeout;
  // Declared before the per-thread services so that they are destroyed first, while the
  // io_contexts their Redis connections live on still exist.
  http::Server server(server_options, metrics);
  // Polls and SIGHUP reloads run on the control context, never on an I/O thread.
  auto watcher = RulesWatcher::create(
      server.controlContext().get_executor(),
      RulesWatcher::Options{.path = options.rules, .load = {options.merge_domain_config}}, metrics,
      clock);
  if (watcher->reloadNow().status == RulesWatcher::Status::kRejected) {
    return kExitFailure;  // every error is logged with its location
  }
  if (auto status = server.listen(); !status) {
    spdlog::critical("{}", status.error().message);
    return kExitFailure;
  }

  MemoryStoreOptions memory_options;
  memory_options.max_keys = options.memory_max_keys;
  StorePtr memory = makeMemoryStore(memory_options, clock, metrics);

  std::vector<ThreadServices> threads(server.threadCount());
  for (unsigned i = 0; i < server.threadCount(); ++i) {
    ThreadServices& t = threads[i];
    if (redis_options) {
      StorePtr redis = cluster_seeds.empty()
                           ? makeRedisStore(server.ioContext(i), *redis_options, metrics)
                           : makeRedisClusterStore(server.ioContext(i), cluster_seeds, metrics);
      t.store =
          makeFailoverStore(std::move(redis), memory, *failureMode(options.failure_mode), metrics);
    } else {
      t.store = memory;
    }
    t.decisions =
        http::makeDecisionService([&watcher] { return watcher->current(); }, t.store, metrics);
    t.decisions = (*operations)->wrap(std::move(t.decisions));
    http::HandlerContext context;
    context.decisions = t.decisions.get();
    context.metrics = &metrics;
    context.rules = [&watcher] { return watcher->current(); };
    // Ready only when every I/O thread's store is: each thread has its own Redis
    // connection, and a probe lands on one thread only.
    context.store_healthy = [&threads] {
      return std::all_of(threads.begin(), threads.end(),
                         [](const ThreadServices& s) { return !s.store || s.store->healthy(); });
    };
    context.default_domain = options.default_domain;
    context.forward_auth = std::make_shared<const http::ForwardAuthConfig>(options.forward_auth);
    auto router = std::make_shared<http::Router>();
    http::addDecisionPortRoutes(*router, context);
    server.setRouter(i, std::move(router));
    (*operations)->addResetTarget(server.ioContext(i), *t.store, context);
  }
  if (auto status = (*operations)->start(); !status) {
    spdlog::critical("{}", status.error().message);
    return kExitFailure;
  }

  net::signal_set signals(server.controlContext(), SIGINT, SIGTERM, SIGHUP);
  std::function<void(const boost::system::error_code&, int)> on_signal =
      [&](const boost::system::error_code& ec, int signal) {
        if (ec) {
          return;
        }
        if (signal == SIGHUP) {
          spdlog::info("received SIGHUP, reloading the rules");
          watcher->requestReload();
        } else {
          spdlog::info("received {}, draining in-flight requests",
                       signal == SIGTERM ? "SIGTERM" : "SIGINT");
          server.stop();
        }
        signals.async_wait(on_signal);
      };
  signals.async_wait(on_signal);

  watcher->start();
  RuleSetPtr loaded = watcher->current();
  spdlog::info(
      "sluice listening on {}:{} ({} I/O thread(s)), store {}{}, rules {}: {} limit(s) "
      "in {} domain(s)",
      options.listen_host, server.port(), server.threadCount(), options.store,
      redis_options ? " (failure mode " + options.failure_mode + ")" : "", options.rules,
      loaded->limitCount(), loaded->domains.size());
  server.run();
  (*operations)->stop();
  watcher->stop();
  signals.cancel();
  spdlog::info("sluice stopped");
  return kExitOk;
}

}  // namespace

int runMain(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  auto options = parseOptions(args, [](std::string_view name) -> std::optional<std::string> {
    const char* value = std::getenv(std::string(name).c_str());
    return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
  });
  if (!options) {
    std::cerr << "sluice: " << options.error().message << "\n";
    return kExitUsage;
  }
  if (options->help) {
    std::cout << helpText();
    return kExitOk;
  }
  if (options->validate) {
    return validateRulesCommand(options->rules, std::cout,
                                LoadOptions{options->merge_domain_config});
  }
  setUpLogging(options->log_level, options->operations.log_format);
  try {
    return serve(*options);
  } catch (const std::exception& e) {
    spdlog::critical("sluice failed to start: {}", e.what());
    return kExitFailure;
  }
}

}  // namespace sluice::app
