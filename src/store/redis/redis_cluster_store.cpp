#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/store/redis_store.hpp"
#include "store/redis/cluster_slots.hpp"
#include "store/redis/redis_connection.hpp"
#include "store/redis/redis_errors.hpp"
#include "store/redis/redis_store_internal.hpp"
#include "store/store_health.hpp"

namespace sluice {

namespace net = boost::asio;

namespace {

using Clock = std::chrono::steady_clock;

/// A request follows at most this many MOVED/ASK/TRYAGAIN answers (Redis' own clients
/// use 5 as well); more means the topology is in flux: the failure mode answers.
constexpr int kMaxRedirects = 5;
/// Topology refreshes (CLUSTER SLOTS) are at least this far apart per I/O thread, however
/// many MOVED replies or connection failures ask for one.
constexpr std::chrono::milliseconds kMinRefreshInterval{200};
/// While a master of the slot map is unreachable, the topology is re-read this often until
/// a replica has been promoted (the failover).
constexpr std::chrono::milliseconds kFailedMasterRefresh{250};
/// TRYAGAIN (keys of one slot half migrated) is retried after this pause.
constexpr std::chrono::milliseconds kTryAgainPause{10};

/// Topology changes are logged once per process, not once per I/O thread: every thread
/// keeps its own slot map and sees the same change. One log per cluster (`name`: this
/// sidecar's, or another region's).
class TopologyLog {
 public:
  /// True when `description` differs from the last one logged for `name` (and records it).
  static bool changed(const std::string& name, const std::string& description) {
    static std::mutex mutex;
    static std::map<std::string, std::string> last;
    std::lock_guard lock(mutex);
    std::string& before = last[name];
    if (description == before) {
      return false;
    }
    before = description;
    return true;
  }
};

/// Routes each request to the master of its hash slot (one connection per master, made on
/// first use), follows MOVED and ASK, re-reads the topology after MOVED and after a master
/// is lost. Lives on one io_context; everything is asynchronous.
class ClusterBackend final : public redis::RedisBackend,
                             public std::enable_shared_from_this<ClusterBackend> {
 public:
  ClusterBackend(net::io_context& io, std::vector<RedisOptions> seeds, Metrics& metrics,
                 std::string script, std::string region)
      : io_(io),
        region_(std::move(region)),
        log_name_(region_.empty() ? "redis cluster" : "redis cluster of region " + region_),
        seeds_(std::move(seeds)),
        script_(std::move(script)),
        park_timer_(io),
        refresh_timer_(io),
        slots_(redis::kClusterSlots, -1),
        start_timer_(io),
        start_deadline_(Clock::now() + seeds_.front().connect_wait),
        member_(region_.empty() ? std::make_unique<store::StoreHealthGroup::Member>(
                                      store::StoreHealthGroup::of(metrics, "redis_cluster"))
                                : nullptr),
        reconnects_(redis::describeRedisMetrics(metrics).counter("redis_reconnects_total")),
        moved_(describe(metrics).counter("redis_cluster_redirects_total", {{"kind", "moved"}})),
        ask_(metrics.counter("redis_cluster_redirects_total", {{"kind", "ask"}})),
        refreshes_ok_(
            metrics.counter("redis_cluster_topology_refreshes_total", {{"result", "ok"}})),
        refreshes_failed_(
            metrics.counter("redis_cluster_topology_refreshes_total", {{"result", "failed"}})),
        failovers_(metrics.counter("redis_cluster_failovers_total")) {}

  ~ClusterBackend() override {
    // Handlers of calls in flight are dropped with the connections, never called.
    for (Node& node : nodes_) {
      node.connection.reset();
    }
  }

  ClusterBackend(const ClusterBackend&) = delete;
  ClusterBackend& operator=(const ClusterBackend&) = delete;

  /// Reads the topology from the seeds (asynchronously, on the io_context's thread).
  void start() {
    net::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        for (const RedisOptions& seed : self->seeds_) {
          self->nodeIndex(seed.host, seed.port);
        }
        self->requestRefresh();
        self->start_timer_.expires_at(self->start_deadline_);
        self->start_timer_.async_wait(
            [weak = self->weak_from_this()](boost::system::error_code ec) {
              if (auto s = weak.lock(); s && !ec) {
                s->start_over_ = true;
                s->updateHealth();
                s->redispatchParked();
              }
            });
      }
    });
  }

  void evalScript(std::vector<std::string> keys, std::vector<std::string> args,
                  std::chrono::milliseconds timeout, redis::ReplyHandler done) override {
    evalScript(redis::RespArgs::of(keys), redis::RespArgs::of(args), timeout, std::move(done));
  }

  void evalScript(redis::RespArgs keys, redis::RespArgs args, std::chrono::milliseconds timeout,
                  redis::ReplyHandler done) override {
    int slot = -1;
    bool spans = false;
    keys.forEach([&](std::string_view key) {
      const int of_key = redis::keyHashSlot(key);
      spans = spans || (slot >= 0 && of_key != slot);
      slot = of_key;
    });
    if (spans) {
      done(makeError(ErrorKind::kInvalidArgument,
                     "redis cluster: the keys of one request span hash slots"));
      return;
    }
    send(std::max(slot, 0), std::move(keys), std::move(args), timeout, std::move(done));
  }

  void evalScriptOnMasterOf(int slot, redis::RespArgs args, std::chrono::milliseconds timeout,
                            redis::ReplyHandler done) override {
    send(std::clamp(slot, 0, redis::kClusterSlots - 1), redis::RespArgs{}, std::move(args), timeout,
         std::move(done));
  }

  bool ready() const override { return mapped_.load(std::memory_order_acquire); }

  std::uint64_t connectCount() const override {
    std::uint64_t sum = dropped_connects_;
    for (const Node& node : nodes_) {
      if (node.connection) {
        sum += node.connection->connectCount();
      }
    }
    return sum;
  }

  int masterOf(int slot) const override {
    return slot >= 0 && slot < redis::kClusterSlots ? slots_[static_cast<std::size_t>(slot)] : -1;
  }

  void stop() override {
    stopped_ = true;
    park_timer_.cancel();
    refresh_timer_.cancel();
    start_timer_.cancel();
    std::vector<std::shared_ptr<Call>> parked;
    parked.swap(parked_);
    for (auto& call : parked) {
      finish(call, makeError(ErrorKind::kUnavailable, "redis cluster: stopped"));
    }
    for (Node& node : nodes_) {
      if (node.connection) {
        node.connection->stop();
      }
    }
  }

  std::vector<std::string> keyNodes() const override {
    std::vector<std::string> out;
    for (int index : masters()) {
      out.push_back(nodes_[static_cast<std::size_t>(index)].address);
    }
    return out;
  }

  void command(const std::string& node, std::vector<std::string> argv,
               std::chrono::milliseconds timeout, redis::ReplyHandler done) override {
    auto it = by_address_.find(node);
    if (it == by_address_.end()) {
      done(makeError(ErrorKind::kNotFound, "redis cluster: unknown node " + node));
      return;
    }
    auto call = std::make_shared<Call>();
    call->fixed_node = it->second;
    call->argv = std::move(argv);
    call->deadline = Clock::now() + timeout;
    call->done = std::move(done);
    dispatch(std::move(call));
  }

  bool clustered() const override { return true; }
  void post(std::function<void()> fn) override { net::post(io_, std::move(fn)); }
  StoreHealth health() const override { return health_.load(std::memory_order_acquire); }

 private:
  struct Node {
    std::string host;
    int port = 0;
    std::string address;  ///< "host:port"
    std::shared_ptr<redis::RedisConnection> connection;
    bool failed = false;  ///< lost (or never reached) since its last successful handshake
  };

  /// One request on its way through redirects: a script call (`keys` and `args`, RESP
  /// already), or with `fixed_node` set a plain command (`argv`; admin reset), which is not
  /// redirected.
  struct Call {
    redis::RespArgs keys;
    redis::RespArgs args;
    std::vector<std::string> argv;
    int slot = 0;
    std::optional<int> fixed_node;
    std::optional<int> ask_node;  ///< ASK target for the next attempt only
    int redirects = 0;
    Clock::time_point deadline;
    /// Made during start-up: `deadline` is the end of the start-up wait until the call is
    /// sent, then `timeout` from the send.
    bool rebase = false;
    std::chrono::milliseconds timeout{0};
    redis::ReplyHandler done;
  };

  /// Sends a script call to the master of `slot`, waiting at start-up for the topology.
  void send(int slot, redis::RespArgs keys, redis::RespArgs args, std::chrono::milliseconds timeout,
            redis::ReplyHandler done) {
    auto call = std::make_shared<Call>();
    call->slot = slot;
    call->keys = std::move(keys);
    call->args = std::move(args);
    call->deadline = Clock::now() + timeout;
    if (health() == StoreHealth::kConnecting) {
      // Start-up: wait for the topology and the connections; the deadline runs from the send.
      call->timeout = timeout;
      call->deadline = std::max(call->deadline, start_deadline_);
      call->rebase = true;
    }
    call->done = std::move(done);
    dispatch(std::move(call));
  }

  static Metrics& describe(Metrics& metrics) {
    metrics.describe("redis_cluster_redirects_total", Metrics::Type::kCounter,
                     "MOVED and ASK replies followed by the Redis Cluster store (per kind).");
    metrics.describe("redis_cluster_topology_refreshes_total", Metrics::Type::kCounter,
                     "CLUSTER SLOTS reads of the Redis Cluster store (per I/O thread).");
    metrics.describe("redis_cluster_failovers_total", Metrics::Type::kCounter,
                     "Slot ranges whose master was replaced by one of its replicas.");
    return metrics;
  }

  std::vector<int> masters() const {
    std::vector<int> out;
    for (int index : slots_) {
      if (index >= 0 && std::find(out.begin(), out.end(), index) == out.end()) {
        out.push_back(index);
      }
    }
    return out;
  }

  int nodeIndex(const std::string& host, int port) {
    std::string address = host + ":" + std::to_string(port);
    auto it = by_address_.find(address);
    if (it != by_address_.end()) {
      return it->second;
    }
    const int index = static_cast<int>(nodes_.size());
    nodes_.push_back(Node{host, port, address, nullptr, false});
    by_address_.emplace(std::move(address), index);
    return index;
  }

  /// The node's connection, created and started on first use.
  redis::RedisConnection& connection(int index) {
    Node& node = nodes_[static_cast<std::size_t>(index)];
    if (!node.connection) {
      redis::ConnectionOptions options;
      options.redis = seeds_.front();
      options.redis.host = node.host;
      options.redis.port = node.port;
      options.stall_timeout = options.redis.stall_timeout;
      options.ping_interval = options.redis.ping_interval;
      options.scripts.push_back(script_);
      options.on_connect_error = [weak = weak_from_this()](const Error& error) {
        if (auto self = weak.lock(); self && self->member_) {
          self->member_->group().fault(redis::faultKind(error), error.message);
        }
      };
      options.on_fault = [weak = weak_from_this()](const Error& error) {
        if (auto self = weak.lock(); self && self->member_) {
          self->member_->group().fault(redis::faultKind(error), error.message);
        }
      };
      options.on_health = [weak = weak_from_this()](StoreHealth, const std::string&) {
        if (auto self = weak.lock()) {
          self->updateHealth();
        }
      };
      options.on_connected = [weak = weak_from_this(), index](std::uint64_t count) {
        if (auto self = weak.lock()) {
          self->onConnected(index, count);
        }
      };
      options.on_disconnected = [weak = weak_from_this(), index](const std::string&) {
        if (auto self = weak.lock()) {
          self->onDisconnected(index);
        }
      };
      node.connection = redis::RedisConnection::create(io_, std::move(options));
      node.failed = false;
      node.connection->start();
    }
    return *node.connection;
  }

  void dispatch(std::shared_ptr<Call> call) {
    if (stopped_) {
      finish(call, makeError(ErrorKind::kUnavailable, "redis cluster: stopped"));
      return;
    }
    const auto now = Clock::now();
    if (now >= call->deadline) {
      finish(call, redis::redisError(
                       redis::FailureSource::kDeadline, 0,
                       "redis cluster, after " + std::to_string(call->redirects) + " redirect(s)"));
      return;
    }
    int index = call->fixed_node ? *call->fixed_node
                : call->ask_node ? *call->ask_node
                                 : slots_[static_cast<std::size_t>(call->slot)];
    if (index < 0) {
      // No topology yet (start-up): wait for it within the deadline.
      requestRefresh();
      park(std::move(call));
      return;
    }
    redis::RedisConnection& conn = connection(index);
    const Node& node = nodes_[static_cast<std::size_t>(index)];
    if (!conn.ready()) {
      if (node.failed && !connecting()) {
        requestRefresh();
        finish(call, redis::redisError(redis::FailureSource::kNotReady, 0, node.address));
        return;
      }
      park(std::move(call));  // connecting for the first time
      return;
    }
    if (call->rebase) {
      call->rebase = false;
      call->deadline = std::min(call->deadline, now + call->timeout);
    }
    const auto timeout =
        std::max(std::chrono::milliseconds(1),
                 std::chrono::ceil<std::chrono::milliseconds>(call->deadline - now));
    auto on_reply = [weak = weak_from_this(), call, index](Result<redis::Reply> reply) {
      if (auto self = weak.lock()) {
        self->onReply(call, index, std::move(reply));
      }
    };
    if (call->fixed_node) {
      conn.command(call->argv, timeout, std::move(on_reply));
      return;
    }
    if (call->ask_node) {
      // ASKING and the script go out back to back on one connection: the target accepts
      // the importing slot for the next command only.
      call->ask_node.reset();
      conn.command({"ASKING"}, timeout, [](Result<redis::Reply>) {});
    }
    conn.evalScript(0, call->keys, call->args, timeout, std::move(on_reply));
  }

  void onReply(const std::shared_ptr<Call>& call, int index, Result<redis::Reply> reply) {
    if (reply || call->fixed_node) {
      finish(call, std::move(reply));
      return;
    }
    const Error& error = reply.error();
    const std::optional<std::string_view> text = redis::replyErrorText(error);
    if (!text) {
      if (error.kind == ErrorKind::kConnection) {
        requestRefresh();
      }
      finish(call, std::move(reply));
      return;
    }
    const std::optional<redis::Redirect> redirect = redis::parseRedirect(*text);
    const bool try_again = text->starts_with("TRYAGAIN");
    if (!redirect && !try_again) {
      // A script that names keys in its arguments (evalScriptOnMasterOf) learns that one of
      // them moved from this error, not from MOVED.
      if (text->starts_with("CLUSTERDOWN") ||
          text->find("non local key") != std::string_view::npos) {
        requestRefresh();
      }
      finish(call, std::move(reply));
      return;
    }
    if (++call->redirects > kMaxRedirects) {
      finish(call, makeError(ErrorKind::kUnavailable,
                             "redis cluster: more than " + std::to_string(kMaxRedirects) +
                                 " redirects, last: " + std::string(*text)));
      return;
    }
    if (try_again) {
      auto timer = std::make_shared<net::steady_timer>(io_, kTryAgainPause);
      timer->async_wait([weak = weak_from_this(), call, timer](boost::system::error_code ec) {
        if (auto self = weak.lock(); self && !ec) {
          self->dispatch(call);
        }
      });
      return;
    }
    const std::string host =
        redirect->host.empty() ? nodes_[static_cast<std::size_t>(index)].host : redirect->host;
    const int target = nodeIndex(host, redirect->port);
    if (redirect->kind == redis::Redirect::Kind::kMoved) {
      moved_.inc();
      slots_[static_cast<std::size_t>(redirect->slot)] = target;
      requestRefresh();
    } else {
      ask_.inc();
      call->ask_node = target;
    }
    dispatch(call);
  }

  void finish(const std::shared_ptr<Call>& call, Result<redis::Reply> result) {
    auto done = std::move(call->done);
    done(std::move(result));
  }

  /// Holds a call until its node connects or the topology arrives, within its deadline.
  void park(std::shared_ptr<Call> call) {
    const auto deadline = call->deadline;
    parked_.push_back(std::move(call));
    if (!park_at_ || deadline < *park_at_) {
      park_at_ = deadline;
      park_timer_.expires_at(deadline);
      park_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
        if (auto self = weak.lock(); self && !ec) {
          self->park_at_.reset();
          self->redispatchParked();
        }
      });
    }
  }

  /// Tries every parked call again (a node connected, the topology changed, a deadline).
  void redispatchParked() {
    std::vector<std::shared_ptr<Call>> calls;
    calls.swap(parked_);
    for (auto& call : calls) {
      dispatch(std::move(call));
    }
    if (parked_.empty()) {
      park_at_.reset();
      park_timer_.cancel();
    } else if (!park_at_) {
      // Re-arm for the earliest remaining deadline.
      auto earliest =
          std::min_element(parked_.begin(), parked_.end(),
                           [](const auto& a, const auto& b) { return a->deadline < b->deadline; });
      park_at_ = (*earliest)->deadline;
      park_timer_.expires_at(*park_at_);
      park_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
        if (auto self = weak.lock(); self && !ec) {
          self->park_at_.reset();
          self->redispatchParked();
        }
      });
    }
  }

  void onConnected(int index, std::uint64_t count) {
    if (count > 1) {
      reconnects_.inc();
    }
    nodes_[static_cast<std::size_t>(index)].failed = false;
    updateHealth();
    // Not from inside the connection's own reply callback.
    net::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        self->redispatchParked();
        if (self->refresh_wanted_ && !self->refreshing_) {
          // A read that waited for a connection goes out now, not at the next retry.
          self->refresh_timer_.cancel();
          self->refresh_armed_ = false;
          self->runRefresh();
        }
      }
    });
  }

  void onDisconnected(int index) {
    nodes_[static_cast<std::size_t>(index)].failed = true;
    updateHealth();
    net::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) {
        self->redispatchParked();
        self->requestRefresh();
      }
    });
  }

  /// Asks for a CLUSTER SLOTS read, at most one per kMinRefreshInterval.
  void requestRefresh(std::chrono::milliseconds min_wait = std::chrono::milliseconds(0)) {
    if (stopped_) {
      return;
    }
    refresh_wanted_ = true;
    if (refreshing_ || refresh_armed_) {
      return;
    }
    const auto now = Clock::now();
    const auto at = std::max(last_refresh_ + kMinRefreshInterval, now + min_wait);
    if (at <= now) {
      runRefresh();
      return;
    }
    refresh_armed_ = true;
    refresh_timer_.expires_at(at);
    refresh_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      if (auto self = weak.lock(); self && !ec) {
        self->refresh_armed_ = false;
        self->runRefresh();
      }
    });
  }

  void runRefresh() {
    if (stopped_ || refreshing_ || !refresh_wanted_) {
      return;
    }
    // Any node that answers will do: the masters in use first, then every known node
    // (replicas included: after a failover one of them is the new master), then the seeds.
    std::optional<int> source;
    for (std::size_t i = 0; i < nodes_.size() && !source; ++i) {
      const int index = static_cast<int>((refresh_rotor_ + i) % nodes_.size());
      const Node& node = nodes_[static_cast<std::size_t>(index)];
      if (node.connection && node.connection->ready()) {
        source = index;
      }
    }
    last_refresh_ = Clock::now();
    if (!source) {
      // Nobody connected: connect to every known node; the first handshake that succeeds
      // triggers the read (onConnected), and the timer retries meanwhile.
      for (std::size_t i = 0; i < nodes_.size(); ++i) {
        connection(static_cast<int>(i));
      }
      requestRefresh(kMinRefreshInterval);
      return;
    }
    refresh_rotor_ = static_cast<std::size_t>(*source) + 1;
    refreshing_ = true;
    refresh_wanted_ = false;
    const Node& node = nodes_[static_cast<std::size_t>(*source)];
    node.connection->command({"CLUSTER", "SLOTS"}, seeds_.front().connect_timeout,
                             [weak = weak_from_this(), host = node.host,
                              address = node.address](Result<redis::Reply> reply) {
                               auto self = weak.lock();
                               if (!self) {
                                 return;
                               }
                               self->refreshing_ = false;
                               Result<redis::ClusterTopology> topology =
                                   reply ? redis::parseClusterSlots(*reply, host)
                                         : Result<redis::ClusterTopology>(reply.error());
                               if (!topology) {
                                 self->refreshes_failed_.inc();
                                 spdlog::debug("{}: CLUSTER SLOTS from {} failed: {}",
                                               self->log_name_, address, topology.error().message);
                                 self->requestRefresh(kMinRefreshInterval);
                                 return;
                               }
                               self->refreshes_ok_.inc();
                               self->apply(*topology);
                               if (self->refresh_wanted_) {
                                 self->requestRefresh();
                               }
                             });
  }

  /// "0-5460: 127.0.0.1:7003 replaces 127.0.0.1:7000 (unreachable)" for each range whose
  /// master is now one of its replicas of the previous topology (a failover, automatic or
  /// manual). Read from the topologies alone, so that every I/O thread finds the same.
  std::vector<std::string> failoversSince(const redis::ClusterTopology& next) const {
    std::vector<std::string> out;
    for (const redis::SlotRange& range : next.ranges) {
      for (const redis::SlotRange& before : previous_.ranges) {
        if (before.first > range.first || before.last < range.first ||
            before.master.address() == range.master.address()) {
          continue;
        }
        const bool promoted = std::any_of(
            before.replicas.begin(), before.replicas.end(),
            [&](const redis::ClusterNode& n) { return n.address() == range.master.address(); });
        if (!promoted) {
          continue;
        }
        auto old = by_address_.find(before.master.address());
        const bool unreachable =
            old != by_address_.end() && nodes_[static_cast<std::size_t>(old->second)].failed;
        out.push_back(std::to_string(range.first) + "-" + std::to_string(range.last) + ": " +
                      range.master.address() + " replaces " + before.master.address() +
                      (unreachable ? " (unreachable)" : ""));
      }
    }
    return out;
  }

  void apply(const redis::ClusterTopology& topology) {
    std::vector<int> slots(redis::kClusterSlots, -1);
    for (const redis::SlotRange& range : topology.ranges) {
      const int master = nodeIndex(range.master.host, range.master.port);
      for (const redis::ClusterNode& replica : range.replicas) {
        nodeIndex(replica.host, replica.port);
      }
      std::fill(slots.begin() + range.first, slots.begin() + range.last + 1, master);
    }
    const std::vector<std::string> failovers = failoversSince(topology);
    slots_ = std::move(slots);
    complete_ = topology.coversAllSlots();
    mapped_.store(complete_, std::memory_order_release);

    const std::string description = topology.describe();
    if (description != described_) {
      described_ = description;
      // Once per process: every I/O thread reads the same change.
      if (TopologyLog::changed(region_, description)) {
        for (const std::string& failover : failovers) {
          spdlog::warn("{}: failover detected: slots {}", log_name_, failover);
        }
        failovers_.inc(static_cast<std::uint64_t>(failovers.size()));
        spdlog::info("{}: topology {}{}", log_name_, description,
                     complete_ ? "" : " (not every slot is served)");
      }
    }
    previous_ = topology;
    dropUnusedConnections();
    // Every master is connected at once, not on first use: the store is healthy (and
    // /readyz ready) only once it can reach every slot.
    for (int index : masters()) {
      connection(index);
    }
    updateHealth();
    // A master of the map unreachable: read again until a replica has taken over.
    for (int index : masters()) {
      if (nodes_[static_cast<std::size_t>(index)].failed) {
        requestRefresh(kFailedMasterRefresh);
        break;
      }
    }
    redispatchParked();
  }

  /// Closes the connections of nodes that no longer serve slots (a failed-over master, a
  /// replica used as a seed). Deferred: this may run inside one of their reply callbacks.
  void dropUnusedConnections() {
    const std::vector<int> in_use = masters();
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      Node& node = nodes_[i];
      if (!node.connection ||
          std::find(in_use.begin(), in_use.end(), static_cast<int>(i)) != in_use.end()) {
        continue;
      }
      dropped_connects_ += node.connection->connectCount();
      net::post(io_, [connection = std::move(node.connection)] { connection->stop(); });
      node.failed = false;
    }
  }

  /// True during start-up: until the topology is known and every master has been
  /// connected once, or the start-up wait (connect_wait) is over.
  bool connecting() const { return !start_over_ && !connected_once_; }

  void updateHealth() {
    std::string reason;
    bool all_up = complete_;
    if (!complete_) {
      reason = masters().empty() ? "no slot map yet" : "not every slot is served";
    }
    bool all_connected_once = complete_;
    for (int index : masters()) {
      const Node& node = nodes_[static_cast<std::size_t>(index)];
      if (!node.connection || node.connection->connectCount() == 0) {
        all_connected_once = false;
      }
      if (node.failed || !node.connection || !node.connection->ready() ||
          node.connection->health() != StoreHealth::kHealthy) {
        if (all_up) {
          reason = "master " + node.address +
                   (node.failed                                     ? " unreachable"
                    : !node.connection || !node.connection->ready() ? " not connected"
                                                                    : " not answering PING");
        }
        all_up = false;
      }
    }
    if (all_connected_once) {
      connected_once_ = true;
    }
    StoreHealth next = all_up         ? StoreHealth::kHealthy
                       : connecting() ? StoreHealth::kConnecting
                                      : StoreHealth::kFailing;
    if (next == StoreHealth::kHealthy) {
      reason = "every slot's master connected";
    } else if (next == StoreHealth::kFailing && !connected_once_) {
      reason = "not connected " + std::to_string(seeds_.front().connect_wait.count()) +
               " ms after start: " + reason;
    }
    health_.store(next, std::memory_order_release);
    if (member_) {
      member_->report(next, reason);
    }
  }

  net::io_context& io_;
  std::string region_;    ///< empty: this sidecar's cluster; else another region's
  std::string log_name_;  ///< "redis cluster" or "redis cluster of region <name>"
  std::vector<RedisOptions> seeds_;
  std::string script_;
  net::steady_timer park_timer_;
  net::steady_timer refresh_timer_;

  std::vector<Node> nodes_;  ///< every node ever named; indices are stable
  std::unordered_map<std::string, int> by_address_;
  std::vector<int> slots_;              ///< slot -> index into nodes_ of its master, -1 unknown
  bool complete_ = false;               ///< every slot has a master
  std::atomic<bool> mapped_{false};     ///< complete_, for ready()
  std::uint64_t dropped_connects_ = 0;  ///< connectCount() of the connections dropped
  bool stopped_ = false;
  std::string described_;  ///< the topology last applied, for change detection
  redis::ClusterTopology previous_;
  std::atomic<StoreHealth> health_{StoreHealth::kConnecting};
  net::steady_timer start_timer_;
  Clock::time_point start_deadline_;
  bool start_over_ = false;
  bool connected_once_ = false;  ///< every master of a complete map connected once
  /// The `redis_cluster` health group (null: a backend outside it, another region's).
  std::unique_ptr<store::StoreHealthGroup::Member> member_;

  std::vector<std::shared_ptr<Call>> parked_;
  std::optional<Clock::time_point> park_at_;

  bool refresh_wanted_ = false;
  bool refreshing_ = false;
  bool refresh_armed_ = false;
  Clock::time_point last_refresh_{};
  std::size_t refresh_rotor_ = 0;

  Counter& reconnects_;
  Counter& moved_;
  Counter& ask_;
  Counter& refreshes_ok_;
  Counter& refreshes_failed_;
  Counter& failovers_;
};

}  // namespace

std::shared_ptr<redis::RedisBackend> redis::makeClusterBackend(net::io_context& io,
                                                               std::vector<RedisOptions> seeds,
                                                               Metrics& metrics, std::string script,
                                                               std::string region) {
  auto backend = std::make_shared<ClusterBackend>(io, std::move(seeds), metrics, std::move(script),
                                                  std::move(region));
  backend->start();
  return backend;
}

StorePtr makeRedisClusterStore(net::io_context& io, const std::vector<RedisOptions>& seeds,
                               Metrics& metrics, const sluice::Clock& clock) {
  return redis::makeRedisStoreOver(
      redis::makeClusterBackend(io, seeds, metrics,
                                redis::composeScript(seeds.front().script_time)),
      seeds.front(), metrics, "redis_cluster", clock);
}

}  // namespace sluice
