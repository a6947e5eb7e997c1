#include "app/app.hpp"

#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "app/counter_snapshots.hpp"
#include "app/operations.hpp"
#include "app/options.hpp"
#include "app/rules_watcher.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/decision/lease_service.hpp"
#include "sluice/decision/lease_tracker.hpp"
#include "sluice/grpc/rls_server.hpp"
#include "sluice/http/forward_auth_config.hpp"
#include "sluice/http/routes.hpp"
#include "sluice/http/server.hpp"
#include "sluice/rules/consistency.hpp"
#include "sluice/rules/rate_limit_config.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/simulate/simulate_command.hpp"
#include "sluice/store/eventual_store.hpp"
#include "sluice/store/failover_store.hpp"
#include "sluice/store/memory_store.hpp"
#include "sluice/store/redis_store.hpp"
#include "sluice/xds/rules_client.hpp"

namespace sluice::app {
namespace {

namespace net = boost::asio;

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;
/// How often the gRPC health status follows the stores' health.
constexpr std::chrono::milliseconds kHealthPollInterval{250};

void setUpLogging(const std::string& level, LogFormat format) {
  if (auto status = sluice::setUpLogging(level, format); !status) {
    std::cerr << "sluice: " << status.error().message << "\n";
  }
}

void logEnvoyEnvironment(const EnvoyEnvironment& environment) {
  if (!environment.mapped.empty()) {
    std::string line;
    for (const auto& mapped : environment.mapped) {
      line += (line.empty() ? "" : "; ") + mapped;
    }
    spdlog::info("envoyproxy/ratelimit environment: {}", line);
  }
  for (const auto& note : environment.notes) {
    spdlog::info("envoyproxy/ratelimit environment: {}", note);
  }
  for (const auto& unhonoured : environment.unhonoured) {
    spdlog::warn("envoyproxy/ratelimit environment not honoured: {}", unhonoured);
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

/// The longest NACK detail sent back: the validator's messages, cut at a line's end.
constexpr std::size_t kMaxErrorDetailBytes = 64 * 1024;

std::string errorDetail(const std::vector<RuleError>& errors) {
  std::string detail;
  for (std::size_t i = 0; i < errors.size(); ++i) {
    std::string line = errors[i].toString();
    if (detail.size() + line.size() + 1 > kMaxErrorDetailBytes) {
      detail += "... and " + std::to_string(errors.size() - i) + " more error(s)";
      break;
    }
    detail += (detail.empty() ? "" : "\n") + line;
  }
  return detail;
}

xds::ClientOptions xdsClientOptions(const AppOptions& options) {
  xds::ClientOptions client;
  client.server = options.rules_xds;
  client.node_id = options.xds_node_id;
  client.node_metadata = xds::parseNodeMetadata(options.xds_node_metadata);
  client.backoff = {options.xds_backoff_initial, options.xds_backoff_max,
                    options.xds_backoff_random_factor, options.xds_backoff_jitter};
  client.tls = {options.xds_tls, options.xds_tls_ca, options.xds_tls_cert, options.xds_tls_key,
                options.xds_tls_server_name};
  client.max_message_bytes = options.xds_max_message_bytes;
  return client;
}

/// GET /metrics on --metrics-listen (envoyproxy/ratelimit's PROMETHEUS_ADDR): a one-thread
/// server of its own, so a scrape never waits behind decisions.
class MetricsListener {
 public:
  MetricsListener(const AppOptions& options, Metrics& metrics)
      : server_(listenerOptions(options), metrics) {
    auto router = std::make_shared<http::Router>();
    http::addMetricsRoute(*router, metrics);
    server_.setRouter(0, std::move(router));
  }
  ~MetricsListener() { stop(); }

  Status start() {
    if (auto status = server_.listen(); !status) {
      return makeError(status.error().kind, "--metrics-listen: " + status.error().message);
    }
    thread_ = std::thread([this] {
      try {
        server_.run();
      } catch (const std::exception& e) {
        spdlog::error("metrics listener stopped: {}", e.what());
      }
    });
    return {};
  }
  void stop() {
    server_.stop();
    if (thread_.joinable()) {
      thread_.join();
    }
  }

 private:
  static http::ServerOptions listenerOptions(const AppOptions& options) {
    http::ServerOptions server;
    // Checked by the flag's setter: HOST:PORT, ":PORT" already made "0.0.0.0:PORT".
    if (auto address = parseHostPort(options.metrics_listen)) {
      server.listen = {http::ListenAddress::tcp(address->host, address->port)};
    }
    server.threads = 1;
    server.max_body_bytes = 4096;
    server.drain_timeout = std::chrono::milliseconds(1000);
    server.request_timeout = options.request_timeout;
    server.idle_timeout = options.idle_timeout;
    return server;
  }

  http::Server server_;
  std::thread thread_;
};

http::ServerOptions serverOptions(const AppOptions& options) {
  http::ServerOptions server;
  server.listen = options.listen;
  server.unix_socket_mode = options.listen_mode;
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
  /// The eventual engine's options from the flags (the exit code of a bad --regions).
  static int eventualOptions(const AppOptions& options, EventualOptions& eventual) {
    eventual.sync_interval = options.sync_interval;
    eventual.region = options.region;
    eventual.max_keys = options.eventual_max_keys;
    eventual.quiet_keys = options.eventual_quiet_keys;
    if (options.regions.empty()) {
      return kExitOk;
    }
    if (options.store != StoreKind::kRedis && options.store != StoreKind::kRedisCluster) {
      std::cerr << "sluice: --regions: eventual regions need --store redis or redis_cluster\n";
      return kExitUsage;
    }
    auto regions =
        parseEventualRegions(options.regions, options.region, options.redis_nodes.front());
    if (!regions) {
      std::cerr << "sluice: --regions: " << regions.error().message << "\n";
      return kExitUsage;
    }
    eventual.regions = std::move(*regions);
    return kExitOk;
  }

  /// Builds everything; nothing serves until run(). Returns the exit code on failure.
  static std::variant<std::unique_ptr<SluiceServer>, int> make(const AppOptions& options) {
    std::unique_ptr<SluiceServer> s(new SluiceServer(options));
    auto operations = Operations::create(options, s->metrics_, s->clock_);
    if (!operations) {
      std::cerr << "sluice: " << operations.error().message << "\n";
      return kExitUsage;
    }
    s->operations_ = std::move(*operations);
    EventualOptions eventual;
    if (const int failed = eventualOptions(options, eventual); failed != kExitOk) {
      return failed;
    }
    // Polls and SIGHUP reloads run on the control context, never on an I/O thread.
    RulesWatcher::Options watch;
    watch.path = options.rules;
    watch.load = {options.merge_domain_config};
    if (!options.rules_xds.empty()) {
      watch.path = "xds://" + options.rules_xds;
    }
    s->watcher_ = RulesWatcher::create(s->server_.controlContext().get_executor(), std::move(watch),
                                       s->metrics_, s->clock_);
    if (options.rules_xds.empty()) {
      if (s->watcher_->reloadNow().status == RulesWatcher::Status::kRejected) {
        return kExitFailure;  // every error is logged with its location
      }
    } else if (auto status = s->startXds(); !status) {
      spdlog::critical("{}", status.error().message);
      return kExitFailure;
    }
    if (!options.metrics_listen.empty()) {
      s->metrics_listener_ = std::make_unique<MetricsListener>(options, s->metrics_);
      if (auto status = s->metrics_listener_->start(); !status) {
        spdlog::critical("{}", status.error().message);
        return kExitFailure;
      }
      spdlog::info("metrics listener on {} (GET /metrics)", options.metrics_listen);
    }
    if (auto status = s->server_.listen(); !status) {
      spdlog::critical("{}", status.error().message);
      return kExitFailure;
    }
    if (const int failed = s->startMemoryStore(); failed != kExitOk) {
      return failed;
    }
    // Eventual limits (`consistency: eventual`, --store redis or redis_cluster): one engine per
    // process, shared by every I/O thread's store.
    if (options.store == StoreKind::kRedisCluster) {
      eventual.cluster_seeds = options.redis_nodes;
    }
    if (options.store == StoreKind::kRedis || options.store == StoreKind::kRedisCluster) {
      s->eventual_ =
          makeEventualEngine(eventual, options.redis_nodes.front(), s->clock_, s->metrics_);
    }
    s->threads_.resize(s->server_.threadCount());
    for (unsigned i = 0; i < s->server_.threadCount(); ++i) {
      s->buildThread(i);
    }
    if (auto status = s->operations_->start(); !status) {
      spdlog::critical("{}", status.error().message);
      return kExitFailure;
    }
    if (auto status = s->startGrpc(); !status) {
      spdlog::critical("{}", status.error().message);
      return kExitFailure;
    }
    return s;
  }

  ~SluiceServer() {
    if (xds_) {
      xds_->stop();
    }
    if (metrics_listener_) {
      metrics_listener_->stop();
    }
    // The gRPC server goes before the decision services it calls, and the per-thread
    // services before the io_contexts their Redis connections live on.
    if (rls_drain_.joinable()) {
      rls_drain_.join();
    }
    rls_.reset();
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
          if (signal == SIGHUP && xds_) {
            spdlog::info("received SIGHUP: the rules come from xDS, nothing to reload");
          } else if (signal == SIGHUP) {
            spdlog::info("received SIGHUP, reloading the rules");
            watcher_->requestReload();
          } else {
            spdlog::info("received {}, draining in-flight requests",
                         signal == SIGTERM ? "SIGTERM" : "SIGINT");
            if (health_timer_) {
              health_timer_->cancel();
            }
            if (lease_timer_) {
              lease_timer_->cancel();
            }
            server_.stop();
          }
          signals.async_wait(on_signal);
        };
    signals.async_wait(on_signal);

    if (!xds_) {
      watcher_->start();
    }
    RuleSetPtr loaded = watcher_->current();
    std::string listening;
    for (const http::ListenAddress& address : server_.boundAddresses()) {
      listening += (listening.empty() ? "" : ", ") + address.toString();
    }
    spdlog::info(
        "sluice listening on {} ({} I/O thread(s)), store {}{}, rules {}: {} limit(s) "
        "in {} domain(s){}",
        listening, server_.threadCount(), storeKindName(options_.store),
        options_.store != StoreKind::kMemory
            ? " (failure mode " + std::string(failureModeName(options_.failure_mode)) + ")"
            : "",
        xds_ ? "from xDS server " + options_.rules_xds : options_.rules,
        loaded ? loaded->limitCount() : 0, loaded ? loaded->domains.size() : 0,
        loaded ? "" : " (not ready until the first set arrives)");
    if (rls_) {
      std::string addresses;
      for (const auto& address : rls_->addresses()) {
        addresses += (addresses.empty() ? "" : ", ") + address;
      }
      spdlog::info("gRPC rate limit service (envoy.service.ratelimit.v3) listening on {}",
                   addresses);
    }
    server_.run();
    if (rls_drain_.joinable()) {
      rls_drain_.join();
    }
    if (eventual_) {
      stopEventualEngine(*eventual_);  // a last sync of the hits admitted before the drain
    }
    if (snapshots_) {
      snapshots_->finish();  // every decision is in: the I/O threads have stopped
    }
    operations_->stop();
    if (xds_) {
      xds_->stop();
    }
    if (metrics_listener_) {
      metrics_listener_->stop();
    }
    watcher_->stop();
    signals.cancel();
    spdlog::info("sluice stopped");
    return kExitOk;
  }

 private:
  /// The process's memory store and, with --memory-snapshot, its counters restored and its
  /// snapshots started (before any request is served). Returns kExitOk, or the exit code
  /// after saying why not.
  int startMemoryStore() {
    if (!openMemory()) {
      return kExitFailure;
    }
    if (options_.memory_snapshot.empty()) {
      return kExitOk;
    }
    if (options_.store != StoreKind::kMemory) {
      std::cerr << "sluice: --memory-snapshot keeps the memory store's counters; with --store "
                << storeKindName(options_.store) << " they live in Redis already\n";
      return kExitUsage;
    }
    MemorySnapshotOptions snapshot;
    snapshot.path = options_.memory_snapshot;
    snapshot.interval = options_.snapshot_interval;
    snapshot.on_error = options_.memory_snapshot_on_error;
    auto started = CounterSnapshots::start(
        snapshot, *memory_, [watcher = watcher_] { return watcher->current(); }, clock_, metrics_);
    if (!started) {
      spdlog::critical("{}", started.error().message);
      return kExitFailure;
    }
    snapshots_ = std::move(*started);
    return kExitOk;
  }

  /// What one I/O thread owns besides its io_context: its store (Redis connections are per
  /// thread), its decision metrics (their caches are not synchronised) and its service.
  struct ThreadServices {
    StorePtr store;
    std::unique_ptr<DecisionObserver> metrics;
    std::unique_ptr<DecisionObserver> reservation_metrics;
    std::unique_ptr<DecisionObserver> ban_observer;
    std::unique_ptr<DecisionService> decisions;
    std::unique_ptr<LeaseService> leases;
  };

  explicit SluiceServer(const AppOptions& options)
      : options_(options), server_(serverOptions(options), metrics_) {
    http::describeHttpMetrics(metrics_);
    describeDecisionMetrics(metrics_);
    leases_ = std::make_unique<LeaseTracker>(metrics_);
    lease_timer_.emplace(server_.controlContext());
    sweepLeases();
    describeReservationMetrics(metrics_);
  }

  /// The memory store (the store, or the failover's fallback), with its overrides file for
  /// --store memory. False (logged) when the overrides file cannot be read.
  bool openMemory() {
    MemoryStoreOptions memory_options;
    memory_options.max_keys = options_.memory_max_keys;
    if (options_.store == StoreKind::kMemory) {
      memory_options.overrides_file = options_.operations.overrides_file;
    } else if (!options_.operations.overrides_file.empty()) {
      spdlog::warn("--overrides-file is for --store memory; the {} store keeps overrides in Redis",
                   storeKindName(options_.store));
    }
    auto memory = openMemoryStore(memory_options, clock_, metrics_);
    if (!memory) {
      spdlog::critical("--overrides-file: {}", memory.error().message);
      return false;
    }
    memory_ = std::move(*memory);
    return true;
  }

  /// The rules from an xDS management server: every response is converted and validated as
  /// a whole (loadRateLimitConfigs) and installed in the watcher as a file reload is.
  Status startXds() {
    const LoadOptions load{options_.merge_domain_config};
    if (options_.force_start_without_rules) {
      // Serve with no rules until the first set arrives, as envoyproxy/ratelimit does.
      watcher_->install(loadRateLimitConfigs({}, clock_.nowMicros() / kMicrosPerMilli, load),
                        "an empty rule set (--force-start-without-initial-config)");
    }
    auto apply = [this, load](const std::string& version,
                              std::vector<RateLimitConfigResource> resources) {
      LoadResult loaded =
          loadRateLimitConfigs(resources, clock_.nowMicros() / kMicrosPerMilli, load);
      if (loaded.rules) {
        auto versioned = std::make_shared<RuleSet>(*loaded.rules);
        versioned->version = version;
        loaded.rules = std::move(versioned);
      }
      auto outcome = watcher_->install(std::move(loaded), "xDS version '" + version + "'");
      xds::ApplyOutcome result;
      result.accepted = outcome.status != RulesWatcher::Status::kRejected;
      result.error_detail = errorDetail(outcome.errors);
      return result;
    };
    xds_ = xds::makeRulesClient(xdsClientOptions(options_), std::move(apply), metrics_, clock_);
    return xds_->start();
  }

  /// Envoy's gRPC Rate Limit Service over the I/O threads' decision services, when
  /// --grpc-listen is given: started, draining with the HTTP server, its health following
  /// the stores'.
  Status startGrpc() {
    if (options_.grpc_listen.empty()) {
      return {};
    }
    grpc::RlsServerOptions rls_options;
    rls_options.listen = options_.grpc_listen;
    rls_options.unix_mode = options_.grpc_unix_mode;
    rls_options.max_connection_age = options_.grpc_max_connection_age;
    rls_options.max_connection_age_grace = options_.grpc_max_connection_age_grace;
    rls_options.response_headers = options_.grpc_response_headers;
    rls_options.reflection = options_.grpc_reflection;
    rls_options.max_message_bytes = options_.max_body_bytes;
    rls_options.drain_timeout = options_.drain_timeout;
    rls_options.serve_on_workers = true;
    if (const grpc::TlsFiles& tls = options_.grpc_tls;
        !tls.cert_file.empty() || !tls.key_file.empty() || !tls.client_ca_file.empty() ||
        !tls.client_san.empty()) {
      if (tls.cert_file.empty() || tls.key_file.empty()) {
        return makeError(ErrorKind::kInvalidArgument,
                         "gRPC TLS needs both --grpc-tls-cert and --grpc-tls-key");
      }
      rls_options.tls = tls;
    }
    rls_options.request_timeout = options_.request_timeout;
    std::vector<grpc::RlsWorker> workers;
    for (unsigned i = 0; i < threads_.size(); ++i) {
      workers.push_back(grpc::RlsWorker{&server_.ioContext(i), threads_[i].decisions.get()});
    }
    rls_ = std::make_unique<grpc::RlsServer>(std::move(rls_options), std::move(workers), metrics_);
    if (auto status = rls_->start(); !status) {
      return status;
    }
    // shutdown() blocks until every call is finished, and calls are finished on the I/O
    // threads: it runs on a thread of its own while they keep going.
    server_.setStopParticipant([this](std::function<void()> release) {
      rls_drain_ = std::thread([this, release = std::move(release)] {
        rls_->shutdown();
        release();
      });
    });
    health_timer_.emplace(server_.controlContext());
    followHealth(true);
    return {};
  }

  /// Leases that reached their expiry unreleased leave `leases_outstanding` within a second
  /// even when no request comes (LeaseTracker).
  void sweepLeases() {
    leases_->sweep(clock_.nowMicros());
    lease_timer_->expires_after(std::chrono::seconds(1));
    lease_timer_->async_wait([this](const boost::system::error_code& ec) {
      if (!ec) {
        sweepLeases();
      }
    });
  }

  void followHealth(bool was_serving) {
    // Serving once rules are in force (from xDS they may not be yet) and every store is up.
    bool serving = watcher_->current() != nullptr &&
                   std::all_of(threads_.begin(), threads_.end(), [](const ThreadServices& s) {
                     return !s.store || s.store->healthy();
                   });
    if (serving != was_serving) {
      rls_->setServing(serving);
    }
    health_timer_->expires_after(kHealthPollInterval);
    health_timer_->async_wait([this, serving](const boost::system::error_code& ec) {
      if (!ec) {
        followHealth(serving);
      }
    });
  }

  StorePtr makeStore(unsigned i) {
    switch (options_.store) {
      case StoreKind::kMemory:
        return memory_;
      case StoreKind::kRedis: {
        StorePtr redis = makeFailoverStore(
            makeRedisStore(server_.ioContext(i), options_.redis_nodes.front(), metrics_, clock_),
            memory_, options_.failure_mode, metrics_);
        return eventual_ ? makeEventualStore(std::move(redis), eventual_, server_.ioContext(i))
                         : redis;
      }
      case StoreKind::kRedisCluster: {
        StorePtr cluster = makeFailoverStore(
            makeRedisClusterStore(server_.ioContext(i), options_.redis_nodes, metrics_, clock_),
            memory_, options_.failure_mode, metrics_);
        return eventual_ ? makeEventualStore(std::move(cluster), eventual_, server_.ioContext(i))
                         : cluster;
      }
    }
    return memory_;
  }

  /// The worst health over the threads' stores: failing, then connecting, then healthy.
  StoreHealth worstHealth() const {
    StoreHealth worst = StoreHealth::kHealthy;
    for (const ThreadServices& s : threads_) {
      const StoreHealth h = s.store ? s.store->health() : StoreHealth::kHealthy;
      if (h == StoreHealth::kFailing) {
        return h;
      }
      if (h == StoreHealth::kConnecting) {
        worst = h;
      }
    }
    return worst;
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
    parts.envoy_charge = options_.envoy_charge;
    parts.reservations = options_;
    t.reservation_metrics = makeReservationMetrics(metrics_);
    parts.observers.push_back(t.metrics.get());
    parts.observers.push_back(t.reservation_metrics.get());
    t.ban_observer = makeBanObserver(metrics_, clock_);
    parts.observers.push_back(t.ban_observer.get());
    for (DecisionObserver* observer : operations_->observers()) {
      parts.observers.push_back(observer);
    }
    parts.leases = leases_.get();
    t.decisions = makeDecisionService(std::move(parts));
    t.leases = makeLeaseService(
        LeaseServiceParts{[this] { return watcher_->current(); }, t.store, &clock_, leases_.get()});

    http::HandlerContext context;
    context.decisions = t.decisions.get();
    context.leases = t.leases.get();
    context.metrics = &metrics_;
    context.rules = [this] { return watcher_->current(); };
    // Ready only when every I/O thread's store is: each thread has its own Redis
    // connection, and a probe lands on one thread only.
    context.store_healthy = [this] {
      return std::all_of(threads_.begin(), threads_.end(),
                         [](const ThreadServices& s) { return !s.store || s.store->healthy(); });
    };
    context.store_state = [this] { return worstHealth(); };
    if (eventual_) {
      context.store_detail = [this] { return eventualStatusJson(*eventual_); };
    }
    context.default_domain = options_.default_domain;
    context.forward_auth = std::make_shared<const http::ForwardAuthConfig>(options_.forward_auth);
    auto router = std::make_shared<http::Router>();
    http::addDecisionPortRoutes(*router, context);
    server_.setRouter(i, std::move(router));
    operations_->addResetTarget(server_.ioContext(i), *t.store, context);
    operations_->followLeases(*leases_);
  }

  const AppOptions& options_;
  Metrics metrics_;
  SystemClock clock_;
  std::unique_ptr<Operations> operations_;
  http::Server server_;
  std::shared_ptr<RulesWatcher> watcher_;
  std::unique_ptr<xds::RulesClient> xds_;
  std::unique_ptr<MetricsListener> metrics_listener_;
  StorePtr memory_;
  std::unique_ptr<CounterSnapshots> snapshots_;  ///< --memory-snapshot
  EventualEnginePtr eventual_;
  std::vector<ThreadServices> threads_;
  std::unique_ptr<grpc::RlsServer> rls_;
  std::thread rls_drain_;
  std::optional<net::steady_timer> health_timer_;
  std::unique_ptr<LeaseTracker> leases_;
  std::optional<net::steady_timer> lease_timer_;
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
  if (!args.empty() && args.front() == "simulate") {
    args.erase(args.begin());
    return simulate::runSimulate(args, std::cout, std::cerr);
  }
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
  logEnvoyEnvironment(options->envoy_environment);
  try {
    return serve(*options);
  } catch (const std::exception& e) {
    spdlog::critical("sluice failed to start: {}", e.what());
    return kExitFailure;
  }
}

}  // namespace sluice::app
