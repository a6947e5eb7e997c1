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
#include <variant>
#include <vector>

#include "app/operations.hpp"
#include "app/options.hpp"
#include "app/rules_watcher.hpp"
#include "http/forward_auth.hpp"
#include "http/routes.hpp"
#include "http/server.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision_service.hpp"
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

http::ServerOptions serverOptions(const AppOptions& options) {
  http::ServerOptions server;
  server.host = options.listen_host;
  server.port = options.listen_port;
  server.threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  server.max_body_bytes = options.max_body_bytes;
  server.drain_timeout = options.drain_timeout;
  server.request_timeout = options.request_timeout;
  server.idle_timeout = options.idle_timeout;
  return server;
}

}  // namespace

/// The whole process once started (docs/architecture.md, "Layers"): the HTTP server, the
/// rules watcher, the operators' side, and what each I/O thread owns.
class SluiceServer {
 public:
  /// Builds everything; nothing serves until run(). Returns the exit code on failure.
  static std::variant<std::unique_ptr<SluiceServer>, int> make(const AppOptions& options) {
    std::unique_ptr<SluiceServer> s(new SluiceServer(options));
    auto operations = Operations::create(options, s->metrics_, s->clock_);
    if (!operations) {
      std::cerr << "sluice: " << operations.error().message << "\n";
      return kExitUsage;
    }
    s->operations_ = std::move(*operations);
    // Polls and SIGHUP reloads run on the control context, never on an I/O thread.
    s->watcher_ = RulesWatcher::create(
        s->server_.controlContext().get_executor(),
        RulesWatcher::Options{.path = options.rules, .load = {options.merge_domain_config}},
        s->metrics_, s->clock_);
    if (s->watcher_->reloadNow().status == RulesWatcher::Status::kRejected) {
      return kExitFailure;  // every error is logged with its location
    }
    if (auto status = s->server_.listen(); !status) {
      spdlog::critical("{}", status.error().message);
      return kExitFailure;
    }
    MemoryStoreOptions memory_options;
    memory_options.max_keys = options.memory_max_keys;
    s->memory_ = makeMemoryStore(memory_options, s->clock_, s->metrics_);
    s->threads_.resize(s->server_.threadCount());
    for (unsigned i = 0; i < s->server_.threadCount(); ++i) {
      s->buildThread(i);
    }
    if (auto status = s->operations_->start(); !status) {
      spdlog::critical("{}", status.error().message);
      return kExitFailure;
    }
    return s;
  }

  ~SluiceServer() {
    // The per-thread services go first, while the io_contexts their Redis connections live
    // on still exist.
    threads_.clear();
  }

  /// Serves until SIGINT/SIGTERM (SIGHUP reloads the rules); returns the exit code.
  int run() {
    net::signal_set signals(server_.controlContext(), SIGINT, SIGTERM, SIGHUP);
    std::function<void(const boost::system::error_code&, int)> on_signal =
        [&](const boost::system::error_code& ec, int signal) {
          if (ec) {
            return;
          }
          if (signal == SIGHUP) {
            spdlog::info("received SIGHUP, reloading the rules");
            watcher_->requestReload();
          } else {
            spdlog::info("received {}, draining in-flight requests",
                         signal == SIGTERM ? "SIGTERM" : "SIGINT");
            server_.stop();
          }
          signals.async_wait(on_signal);
        };
    signals.async_wait(on_signal);

    watcher_->start();
    RuleSetPtr loaded = watcher_->current();
    spdlog::info(
        "sluice listening on {}:{} ({} I/O thread(s)), store {}{}, rules {}: {} limit(s) "
        "in {} domain(s)",
        options_.listen_host, server_.port(), server_.threadCount(), storeKindName(options_.store),
        options_.store != StoreKind::kMemory
            ? " (failure mode " + std::string(failureModeName(options_.failure_mode)) + ")"
            : "",
        options_.rules, loaded->limitCount(), loaded->domains.size());
    server_.run();
    operations_->stop();
    watcher_->stop();
    signals.cancel();
    spdlog::info("sluice stopped");
    return kExitOk;
  }

 private:
  /// What one I/O thread owns besides its io_context: its store (Redis connections are per
  /// thread), its decision metrics (their caches are not synchronised) and its service.
  struct ThreadServices {
    StorePtr store;
    std::unique_ptr<DecisionObserver> metrics;
    std::unique_ptr<DecisionService> decisions;
  };

  explicit SluiceServer(const AppOptions& options)
      : options_(options), server_(serverOptions(options), metrics_) {
    http::describeHttpMetrics(metrics_);
    describeDecisionMetrics(metrics_);
  }

  StorePtr makeStore(unsigned i) {
    switch (options_.store) {
      case StoreKind::kMemory:
        return memory_;
      case StoreKind::kRedis:
        return makeFailoverStore(
            makeRedisStore(server_.ioContext(i), options_.redis_nodes.front(), metrics_, clock_),
            memory_, options_.failure_mode, metrics_);
      case StoreKind::kRedisCluster:
        return makeFailoverStore(
            makeRedisClusterStore(server_.ioContext(i), options_.redis_nodes, metrics_, clock_),
            memory_, options_.failure_mode, metrics_);
    }
    return memory_;
  }

  /// The one place that builds an I/O thread's services and routes.
  void buildThread(unsigned i) {
    ThreadServices& t = threads_[i];
    t.store = makeStore(i);
    t.metrics = makeDecisionMetrics(metrics_);
    DecisionServiceParts parts;
    parts.rules = [this] { return watcher_->current(); };
    parts.store = t.store;
    parts.clock = &clock_;
    parts.observers.push_back(t.metrics.get());
    for (DecisionObserver* observer : operations_->observers()) {
      parts.observers.push_back(observer);
    }
    t.decisions = makeDecisionService(std::move(parts));

    http::HandlerContext context;
    context.decisions = t.decisions.get();
    context.metrics = &metrics_;
    context.rules = [this] { return watcher_->current(); };
    // Ready only when every I/O thread's store is: each thread has its own Redis
    // connection, and a probe lands on one thread only.
    context.store_healthy = [this] {
      return std::all_of(threads_.begin(), threads_.end(),
                         [](const ThreadServices& s) { return !s.store || s.store->healthy(); });
    };
    context.default_domain = options_.default_domain;
    context.forward_auth = std::make_shared<const http::ForwardAuthConfig>(options_.forward_auth);
    auto router = std::make_shared<http::Router>();
    http::addDecisionPortRoutes(*router, context);
    server_.setRouter(i, std::move(router));
    operations_->addResetTarget(server_.ioContext(i), *t.store, context);
  }

  const AppOptions& options_;
  Metrics metrics_;
  SystemClock clock_;
  std::unique_ptr<Operations> operations_;
  http::Server server_;
  std::shared_ptr<RulesWatcher> watcher_;
  StorePtr memory_;
  std::vector<ThreadServices> threads_;
};

std::variant<std::unique_ptr<SluiceServer>, int> makeServer(const AppOptions& options) {
  return SluiceServer::make(options);
}

int run(SluiceServer& server) { return server.run(); }

namespace {

int serve(const AppOptions& options) {
  raiseOpenFileLimit();
  auto server = makeServer(options);
  if (auto* code = std::get_if<int>(&server)) {
    return *code;
  }
  return run(*std::get<std::unique_ptr<SluiceServer>>(server));
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
