#include "sluice/store/eventual_store.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "sluice/limiter/eventual.hpp"
#include "sluice/rules/bucket_key.hpp"
#include "sluice/store/request_verdict.hpp"
#include "store/eventual/eventual_engine.hpp"
#include "store/redis/redis_errors.hpp"

namespace sluice {

namespace net = boost::asio;
using eventual::ScriptOp;

namespace {

/// A request in flight: owns a copy of the request (the refs point into it).
struct Pending {
  StoreRequest request;
  std::vector<EventualLimitRef> eventual;
  std::vector<std::size_t> strict;  ///< indices of the strict limits
  std::vector<int> strict_groups;   ///< quota groups of the strict limits
  bool pure = false;                ///< no strict limit
  Store::Callback done;
};

class EventualStore final : public Store, public std::enable_shared_from_this<EventualStore> {
 public:
  EventualStore(StorePtr inner, EventualEnginePtr engine, net::io_context& io)
      : inner_(std::move(inner)),
        engine_(std::move(engine)),
        io_(io),
        backend_(engine_->makeBackendOn(io)) {}

  ~EventualStore() override { backend_->stop(); }

  void evaluate(const StoreRequest& request, Callback done) override {
    // Scratch vectors reused from request to request (this store serves one I/O thread; they
    // are not used once `done` is called, so a nested evaluate() may reuse them).
    std::vector<EventualLimitRef>& eventual = scratch_eventual_;
    std::vector<std::size_t>& strict = scratch_strict_;
    std::vector<int>& strict_groups = scratch_groups_;
    eventual.clear();
    strict.clear();
    strict_groups.clear();
    for (std::size_t i = 0; i < request.limits.size(); ++i) {
      const StoreLimit& limit = request.limits[i];
      if (isEventual(limit)) {
        eventual.push_back(EventualLimitRef{i, &limit});
      } else {
        strict.push_back(i);
        if (limit.quota_group >= 0) {
          strict_groups.push_back(limit.quota_group);
        }
      }
    }
    if (eventual.empty()) {
      inner_->evaluate(request, std::move(done));
      return;
    }
    // The hasher (under a lock) only for a request with a sketch limit.
    if (std::any_of(eventual.begin(), eventual.end(),
                    [](const EventualLimitRef& r) { return EventualEngine::isSketch(*r.limit); }) &&
        !engine_->sketchHasher()) {
      fetchSketchSeed(request, std::move(done));
      return;
    }
    const bool pure = strict.empty();
    const bool reachable = engine_->reachable() && backend_->ready();
    // The thread's spare answer (recycleStoreResponse()) lends its outcomes' storage: a warm
    // thread answers without allocating.
    StoreResponse response = takeSpareStoreResponse();
    EventualEngine::Local local = engine_->decideLocally(
        eventual, request.cost, pure, !reachable, strict_groups, std::move(response.outcomes));
    if (local.decided && (pure || !local.allowed)) {
      // The common case: answered from the views, nothing to keep for later.
      response.allowed = local.allowed;
      if (pure) {
        // Every limit is eventual, in request order: the outcomes are the answer as they are.
        response.outcomes = std::move(local.outcomes);
      } else {
        response = responseOf(request.limits.size(), eventual, local.allowed, local.outcomes);
      }
      done(std::move(response));
      return;
    }
    auto p = std::make_shared<Pending>();
    p->request = request;
    p->eventual = std::move(eventual);
    for (EventualLimitRef& ref : p->eventual) {
      ref.limit = &p->request.limits[ref.index];
    }
    p->strict = std::move(strict);
    p->strict_groups = strict_groups;
    p->pure = pure;
    p->done = std::move(done);
    if (local.decided) {
      afterEventual(std::move(p), std::move(local));
      return;
    }
    roundTrip(std::move(p), local.reason);
  }

  /// Leases are strict only (the rules refuse eventual concurrency limits).
  void changeLease(const LeaseRequest& request, LeaseCallback done) override {
    inner_->changeLease(request, std::move(done));
  }

  void reset(const std::vector<std::string>& key_prefixes, ResetCallback done) override {
    inner_->reset(key_prefixes, std::move(done));
  }

  bool healthy() const override { return inner_->healthy(); }
  StoreHealth health() const override { return inner_->health(); }
  std::string_view kind() const override { return inner_->kind(); }
  bool holdsReservations() const override { return inner_->holdsReservations(); }

  void setOverride(const OverrideSlot& slot, StoredOverridePtr value, std::size_t max_overrides,
                   OverrideSetCallback done) override {
    inner_->setOverride(slot, std::move(value), max_overrides, std::move(done));
  }
  void removeOverride(const OverrideSlot& slot, OverrideRemoveCallback done) override {
    inner_->removeOverride(slot, std::move(done));
  }
  void listOverrides(OverrideListCallback done) override { inner_->listOverrides(std::move(done)); }
  void overridesChanged() override { inner_->overridesChanged(); }

 private:
  static bool isEventual(const StoreLimit& limit) {
    return limit.params.consistency == Consistency::kEventual &&
           (eventual::supportsEventual(limit.params.algorithm) || EventualEngine::isSketch(limit));
  }

  /// Has the engine read (or first set) the sketch hash seed every sidecar shares (the strict
  /// sketch's, redis::sketchSeedKey(); with regions, the first region's), then evaluates
  /// `request`.
  /// Without it the sidecars would hash clients to different cells, so a sketch limit is not
  /// decided before it is read: a failure answers the request with the error (the
  /// --failure-mode applies), and the next sketch request tries again.
  void fetchSketchSeed(const StoreRequest& request, Callback done) {
    engine_->fetchSketchSeed([weak = weak_from_this(), &io = io_, request,
                              done = std::move(done)](Status status) mutable {
      // On the engine's thread: back to this store's.
      net::post(io, [weak, status = std::move(status), request = std::move(request),
                     done = std::move(done)]() mutable {
        auto self = weak.lock();
        if (!self) {
          return;  // shutting down
        }
        if (!status) {
          done(status.error());
          return;
        }
        self->evaluate(request, std::move(done));
      });
    });
  }

  /// One round trip for keys that are new, stale or close to their limit: a request of
  /// eventual limits only is decided and charged by the script; one with strict limits too
  /// refreshes the views, then goes on as if decided locally.
  void roundTrip(std::shared_ptr<Pending> p, eventual::Route reason) {
    engine_->roundTrips(reason).inc();
    if (backend_->clustered() && spansSlots(p->eventual)) {
      refreshPerSlot(std::move(p));
      return;
    }
    const ScriptOp op = p->pure ? ScriptOp::kDecide : ScriptOp::kSync;
    std::vector<std::string> keys;
    std::vector<std::string> args;
    const Micros sent_at = engine_->now();
    engine_->buildCall(p->eventual, op, p->request.cost, sent_at, keys, args);
    backend_->evalScript(std::move(keys), std::move(args), engine_->redisOptions().request_timeout,
                         [this, p = std::move(p), op, sent_at](Result<redis::Reply> reply) mutable {
                           if (reply) {
                             StoreResponse response;
                             Status status = engine_->absorb(p->eventual, op, *reply, sent_at,
                                                             p->pure ? &response : nullptr);
                             if (status && p->pure) {
                               respond(*p, response.allowed, response.outcomes, false);
                               return;
                             }
                           }
                           // Redis failed the round trip (or it only refreshed): decide from the
                           // view.
                           EventualEngine::Local local = engine_->decideLocally(
                               p->eventual, p->request.cost, p->pure, true, p->strict_groups);
                           afterEventual(std::move(p), std::move(local));
                         });
  }

  bool spansSlots(const std::vector<EventualLimitRef>& refs) const {
    const int first = engine_->clusterSlotOf(refs.front());
    return std::any_of(refs.begin() + 1, refs.end(), [&](const EventualLimitRef& ref) {
      return engine_->clusterSlotOf(ref) != first;
    });
  }

  /// A cluster's round trip for limits in several hash slots (a sketch's cells and counters
  /// of one request): no script may decide them together, so one call per slot refreshes
  /// their views and the request is decided on the fresh views (as a mixed request's
  /// eventual limits are).
  void refreshPerSlot(std::shared_ptr<Pending> p) {
    std::map<int, std::vector<EventualLimitRef>> groups;
    for (const EventualLimitRef& ref : p->eventual) {
      groups[engine_->clusterSlotOf(ref)].push_back(ref);
    }
    auto outstanding = std::make_shared<std::size_t>(groups.size());
    const Micros sent_at = engine_->now();
    for (auto& [slot, refs] : groups) {
      std::vector<std::string> keys;
      std::vector<std::string> args;
      engine_->buildCall(refs, ScriptOp::kSync, p->request.cost, sent_at, keys, args);
      backend_->evalScript(
          std::move(keys), std::move(args), engine_->redisOptions().request_timeout,
          [this, p, refs = std::move(refs), outstanding, sent_at](Result<redis::Reply> reply) {
            if (reply) {
              // A reply of the wrong shape changes nothing: the views decide as they are.
              (void)engine_->absorb(refs, ScriptOp::kSync, *reply, sent_at, nullptr);
            }
            if (--*outstanding > 0) {
              return;
            }
            EventualEngine::Local local = engine_->decideLocally(p->eventual, p->request.cost,
                                                                 p->pure, true, p->strict_groups);
            afterEventual(p, std::move(local));
          });
    }
  }

  void afterEventual(std::shared_ptr<Pending> p, EventualEngine::Local local) {
    if (p->pure || !local.allowed) {
      respond(*p, local.allowed, local.outcomes, false);
      return;
    }
    // The eventual limits allow: the strict ones decide, and the eventual charge follows
    // only if they allowed too.
    StoreRequest strict;
    strict.cost = p->request.cost;
    strict.lease = p->request.lease;
    strict.limits.reserve(p->strict.size());
    for (std::size_t i : p->strict) {
      strict.limits.push_back(p->request.limits[i]);
    }
    quotaAcross(*p, local.outcomes, strict);
    auto outcomes = std::make_shared<std::vector<Outcome>>(std::move(local.outcomes));
    inner_->evaluate(strict, [this, p = std::move(p),
                              outcomes = std::move(outcomes)](Result<StoreResponse> r) mutable {
      if (!r) {
        auto done = std::move(p->done);
        done(r.error());
        return;
      }
      // count_rejected eventual limits record the attempt even when the strict ones denied.
      engine_->chargeLater(p->eventual, p->request.cost, *outcomes, r->allowed);
      StoreResponse response;
      response.allowed = r->allowed;
      response.degraded = r->degraded;
      response.outcomes.resize(p->request.limits.size());
      for (std::size_t i = 0; i < p->eventual.size() && i < outcomes->size(); ++i) {
        response.outcomes[p->eventual[i].index] = (*outcomes)[i];
      }
      for (std::size_t i = 0; i < p->strict.size() && i < r->outcomes.size(); ++i) {
        response.outcomes[p->strict[i]] = r->outcomes[i];
      }
      auto done = std::move(p->done);
      done(std::move(response));
    });
  }

  /// Quota mode across the two halves of a mixed request (store.hpp: allowed iff every
  /// non-shadow, non-quota limit allows and one quota group has no denying limit). The
  /// eventual limits allowed (or decideLocally() would have denied); what their quota groups
  /// say is folded into the strict request, whose store then applies the same rule:
  /// - a group with eventual limits only, none denying, passes: every strict quota limit
  ///   can no longer deny, so it is sent as shadow (evaluated and charged if it allows);
  /// - a group with a denying eventual limit has failed: its strict limits are sent as shadow
  ///   (they cannot make it pass);
  /// - the other groups keep their quota group: the strict store decides whether one passes.
  static void quotaAcross(const Pending& p, const std::vector<Outcome>& outcomes,
                          StoreRequest& strict) {
    if (p.strict_groups.empty()) {
      return;
    }
    RequestVerdict eventual;
    for (std::size_t i = 0; i < p.eventual.size() && i < outcomes.size(); ++i) {
      eventual.add(*p.eventual[i].limit, outcomes[i].allowed);
    }
    bool passes = false;
    for (const EventualLimitRef& ref : p.eventual) {
      const int g = ref.limit->quota_group;
      if (g >= 0 && !eventual.groupFailed(g) &&
          std::find(p.strict_groups.begin(), p.strict_groups.end(), g) == p.strict_groups.end()) {
        passes = true;
      }
    }
    for (StoreLimit& limit : strict.limits) {
      if (limit.quota_group < 0) {
        continue;
      }
      if (passes || eventual.groupFailed(limit.quota_group)) {
        limit.shadow = true;
        limit.quota_group = -1;
      }
    }
  }

  /// Answers with the eventual outcomes; strict limits (not evaluated: an eventual one denied)
  /// report allowed with remaining 0, as the Redis store's over-limit cache does.
  static StoreResponse responseOf(std::size_t limits, const std::vector<EventualLimitRef>& refs,
                                  bool allowed, const std::vector<Outcome>& outcomes) {
    StoreResponse response;
    response.allowed = allowed;
    response.outcomes.resize(limits);
    for (std::size_t i = 0; i < refs.size() && i < outcomes.size(); ++i) {
      response.outcomes[refs[i].index] = outcomes[i];
    }
    return response;
  }

  static void respond(Pending& p, bool allowed, const std::vector<Outcome>& outcomes,
                      bool /*degraded*/) {
    auto done = std::move(p.done);
    done(responseOf(p.request.limits.size(), p.eventual, allowed, outcomes));
  }

  StorePtr inner_;
  EventualEnginePtr engine_;
  std::vector<EventualLimitRef> scratch_eventual_;
  std::vector<std::size_t> scratch_strict_;
  std::vector<int> scratch_groups_;
  net::io_context& io_;
  std::shared_ptr<redis::RedisBackend> backend_;
};

bool validRegionChar(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == '-';
}

}  // namespace

Status checkRegionName(const std::string& name) {
  if (name.empty() || name.size() > 64 || !std::all_of(name.begin(), name.end(), validRegionChar)) {
    return makeError(ErrorKind::kInvalidArgument,
                     "region name \"" + name + "\" must be 1 to 64 of [A-Za-z0-9_.-]");
  }
  return {};
}

Result<std::vector<EventualRegion>> parseEventualRegions(const std::string& text,
                                                         const std::string& own_region,
                                                         const RedisOptions& base) {
  std::vector<EventualRegion> regions;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    if (comma == std::string::npos) {
      comma = text.size();
    }
    const std::string item = text.substr(start, comma - start);
    start = comma + 1;
    if (item.empty()) {
      if (comma == text.size()) {
        break;
      }
      return makeError(ErrorKind::kInvalidArgument, "empty item in \"" + text + "\"");
    }
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) {
      return makeError(ErrorKind::kInvalidArgument,
                       "\"" + item + "\" must be NAME=URL (e.g. eu=redis://10.0.0.5:6379/0)");
    }
    EventualRegion region;
    region.name = item.substr(0, eq);
    if (auto status = checkRegionName(region.name); !status) {
      return status.error();
    }
    if (region.name == own_region) {
      return makeError(ErrorKind::kInvalidArgument,
                       "region \"" + region.name +
                           "\" is this sidecar's own region (--region); list only the others");
    }
    for (const auto& other : regions) {
      if (other.name == region.name) {
        return makeError(ErrorKind::kInvalidArgument,
                         "region \"" + region.name + "\" is listed twice");
      }
    }
    const std::string value = item.substr(eq + 1);
    const std::string where = "region \"" + region.name + "\": ";
    static constexpr std::string_view kCluster = "cluster:";
    if (value.starts_with(kCluster)) {
      // A Redis Cluster: its seeds joined by '+' (',' separates regions); a '+' inside a
      // password is written %2B, as any reserved character of a URL.
      const std::string seeds = value.substr(kCluster.size());
      if (seeds.empty()) {
        return makeError(ErrorKind::kInvalidArgument,
                         where + "\"cluster:\" needs one or more seed URLs joined by '+' (e.g. " +
                             region.name + "=cluster:redis://10.1.0.5:7000+redis://10.1.0.6:7000)");
      }
      auto parsed = parseRedisClusterUrls(seeds, base, '+');
      if (!parsed) {
        return makeError(ErrorKind::kInvalidArgument, where + "cluster " + parsed.error().message);
      }
      region.redis = parsed->front();
      region.cluster_seeds = std::move(*parsed);
    } else {
      auto redis = parseRedisUrl(value, base);
      if (!redis) {
        std::string hint;
        if (value.find('+') != std::string::npos) {
          hint = " (a region that is a Redis Cluster is written NAME=cluster:URL+URL...)";
        }
        return makeError(ErrorKind::kInvalidArgument, where + redis.error().message + hint);
      }
      region.redis = std::move(*redis);
    }
    regions.push_back(std::move(region));
    if (comma == text.size()) {
      break;
    }
  }
  return regions;
}

StorePtr makeEventualStore(StorePtr inner, EventualEnginePtr engine, net::io_context& io) {
  return std::make_shared<EventualStore>(std::move(inner), std::move(engine), io);
}

}  // namespace sluice
