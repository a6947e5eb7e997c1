#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/store/lease.hpp"
#include "sluice/store/limit_override.hpp"

namespace sluice {

/// One limit of a store request.
struct StoreLimit {
  /// The bucket's store key (BucketKey::storeKey: escaped client "|" bucket), unique; the
  /// Redis stores derive the Redis key and its hash tag from it (BucketKey::redisKey).
  std::string key;
  LimitParams params;
  bool shadow = false;  ///< evaluated and charged as usual, but never denies the request
  /// This limit's own cost; nullopt: StoreRequest::cost. Each limit of one request may be
  /// charged a different cost, still all or nothing.
  std::optional<std::int64_t> cost;
  /// Quota mode (envoyproxy/ratelimit's `quota_mode`): limits with a group >= 0 deny the
  /// request only when every group of the request has a denying non-shadow limit (a group
  /// is one request descriptor). -1: an ordinary limit.
  int quota_group = -1;
  /// The limit is given its cost back instead of charged (a refund: limiter.hpp `refund`).
  /// It never denies the request and is applied whatever the verdict; its outcome is a
  /// check on the refunded bucket. Never set on a limit that refundRefusal() names.
  bool refund = false;
  /// The name of the rule this limit comes from when a runtime override may replace it
  /// (limit_override.hpp): the store looks up the bucket's own override, then the rule's
  /// for this client, and applies the first live one. Null: never overridden (request-side
  /// limits, `overridable: false`, sketches, eventual limits). Points into the rules
  /// snapshot, which outlives the call.
  const std::string* override_rule = nullptr;

  std::int64_t costOr(std::int64_t request_cost) const { return cost.value_or(request_cost); }
};

/// How a request's limits are charged (docs/refunds.md). Refund limits
/// (StoreLimit::refund) are given back their cost in every mode.
enum class Charge : std::uint8_t {
  /// Decide; an allowed request charges every limit that allowed, a denied one charges
  /// nothing (count_rejected limits aside). Sluice's own endpoints.
  kAllOrNothing,
  /// Decide as kAllOrNothing, then charge every limit whatever the verdict: a limit that
  /// allowed as usual, one that denied with limiter.hpp's chargeAnyway (its count goes past
  /// the limit). envoyproxy/ratelimit's counting (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
  /// false); a denied limit's outcome is then the same request's answer on the charged state.
  kEvery,
  /// A report: never deny; every limit is charged with chargeAnyway, even past its limit,
  /// and answers what a check says on the charged bucket.
  kReport,
};

/// A reservation's step (docs/reservations.md): a hold counts against every limit of the
/// request while the work runs, as if charged, and is settled by a commit (the actual amount
/// is charged as a report), a release, or its expiry.
enum class HoldOp : std::uint8_t {
  kNone,     ///< an ordinary request
  kReserve,  ///< hold StoreRequest::cost on every limit, all or nothing
  kCommit,   ///< charge StoreRequest::cost (as Charge::kReport) and release the hold
  kRelease,  ///< give the hold back, charge nothing
};

/// What a reservation step asks the store (StoreRequest::hold).
struct HoldCall {
  HoldOp op = HoldOp::kNone;
  std::string nonce{};         ///< the reservation's own part of its id: 16 hex digits
  Micros ttl_us = 0;           ///< kReserve: the hold's lifetime from the store's now, > 0
  Micros keep_us = 0;          ///< how long a settled or expired hold is remembered after expiry
  Micros expires_at_us = 0;    ///< kCommit/kRelease: the expiry the id carries (store clock)
  std::int64_t max_holds = 0;  ///< kReserve: most live holds on one bucket (0: no bound)
};

/// The result of a reservation step (StoreResponse::hold_status).
enum class HoldStatus : std::uint8_t {
  kNone,       ///< not a reservation step
  kReserved,   ///< held on every limit until StoreResponse::hold_expires_at_us
  kDenied,     ///< a limit cannot hold it (the outcomes say which and when to retry)
  kFull,       ///< a bucket already holds HoldCall::max_holds live reservations
  kCommitted,  ///< the hold was live: the actual amount charged, the hold released
  kLate,       ///< the hold had expired (or is forgotten): charged as a report
  kReleased,   ///< the hold was live and is given back
  kSettled,    ///< already committed or released: nothing charged or given back
  kExpired,    ///< release of a hold that had expired (it already returned)
  kUnknown,    ///< no such hold and not expired yet: another request's id, or made up
};

/// All limits of one decision; evaluated atomically.
struct StoreRequest {
  std::vector<StoreLimit> limits;
  std::int64_t cost = 1;  ///< hits; 0 checks without consuming
  Charge charge = Charge::kAllOrNothing;
  /// concurrency limits: the lease an admitted request takes (> 0; the decision service
  /// draws it), or the lease a refund releases (0: none).
  LeaseNumber lease = 0;
  /// A reservation step (op kNone: none). kReserve holds `cost` on every limit; kCommit
  /// charges `cost` (the actual amount) on every limit; kRelease charges nothing.
  HoldCall hold{};
  /// The instant to decide at, on the store's clock, when the caller has just read it (the
  /// decision service reads the clock once per decision and passes the reading on); 0: the
  /// store reads its own clock. Stores that decide on another clock (Redis) ignore it.
  Micros now_us = 0;
};

struct StoreResponse {
  std::vector<Outcome> outcomes;  ///< one per StoreRequest::limits, same order
  bool allowed = true;            ///< every non-shadow limit allowed
  bool degraded = false;          ///< answered by a failure mode, not by the store itself
  /// The instant the limits were evaluated at (the memory store's clock reading); 0 when
  /// the store does not say (Redis decides on its own clock). The access log records it, so
  /// that a replay decides at the very same microsecond.
  Micros at_us = 0;
  /// The runtime overrides applied, one per overridden limit (usually none).
  std::vector<AppliedOverride> overrides;
  /// A reservation step's result (HoldStatus::kNone for an ordinary request).
  HoldStatus hold_status = HoldStatus::kNone;
  /// kReserved: when the hold expires, on the store's clock (Redis's for the Redis stores).
  Micros hold_expires_at_us = 0;
  /// kCommitted: the amount the hold was made for (for actual - reserved).
  std::int64_t hold_amount = 0;
  /// Per limit: holds found expired unsettled during this call (empty: none).
  std::vector<std::uint32_t> holds_expired{};
};

namespace store_detail {
struct SpareResponse {
  StoreResponse response;
  bool has = false;
};
inline thread_local SpareResponse t_spare_response;
}  // namespace store_detail

/// This thread's spare StoreResponse, whose outcomes keep the capacity of an answer already
/// handed on: a store that answers with takeSpareStoreResponse() and a caller that gives
/// each answer back with recycleStoreResponse() exchange answers without allocating once
/// the thread is warm (the memory store and the decision service do). Returns an empty
/// response (allowed, not degraded, no outcomes, at_us 0); a new one when there is no spare.
inline StoreResponse takeSpareStoreResponse() {
  store_detail::SpareResponse& spare = store_detail::t_spare_response;
  if (!spare.has) {
    return StoreResponse{};
  }
  spare.has = false;
  StoreResponse response = std::move(spare.response);
  response.outcomes.clear();
  response.overrides.clear();
  response.allowed = true;
  response.degraded = false;
  response.at_us = 0;
  response.hold_status = HoldStatus::kNone;
  response.hold_expires_at_us = 0;
  response.hold_amount = 0;
  response.holds_expired.clear();
  return response;
}

/// Keeps `response`'s storage as this thread's spare (when it has none yet).
inline void recycleStoreResponse(StoreResponse&& response) {
  store_detail::SpareResponse& spare = store_detail::t_spare_response;
  if (!spare.has) {
    spare.response = std::move(response);
    spare.has = true;
  }
}

/// The state of a store's connection(s) to its backing service (README.md, "Store health
/// and readiness"), fed by connection events and periodic pings, never guessed from
/// request failures.
///   kConnecting: the first connection is being made (start-up, bounded by
///                RedisOptions::connect_wait); requests wait for it.
///   kHealthy:    connected, and the last ping was answered.
///   kFailing:    lost, refused, or answering pings with an error; reconnecting.
enum class StoreHealth { kConnecting, kHealthy, kFailing };

/// "connecting", "healthy", "failing".
std::string_view storeHealthName(StoreHealth health);

/// Where counters live. Semantics (README.md, "Rules", item 4): the request is allowed iff every
/// non-shadow, non-quota limit allows and, when the request has quota groups, at least one
/// group has no denying non-shadow limit; then every limit that allowed is charged its cost.
/// Otherwise nothing is charged, except that limits with count_rejected record the attempt
/// either way. A limit that allowed but was not charged (the request was denied) reports
/// its bucket as it is (the outcome of a check, cost 0, at the same instant), so a denied
/// answer never reports a charge that did not happen.
class Store {
 public:
  using Callback = std::function<void(Result<StoreResponse>)>;
  using ResetCallback = std::function<void(Result<std::size_t>)>;
  using LeaseCallback = std::function<void(Result<LeaseResponse>)>;

  virtual ~Store() = default;

  /// Evaluates and charges all limits of one request atomically. Called on an I/O thread;
  /// the callback runs on the same thread, possibly before evaluate() returns. Errors:
  /// kTimeout, kConnection, kScript.
  virtual void evaluate(const StoreRequest& request, Callback done) = 0;

  /// Releases or renews one lease in every bucket of `request`, atomically, as evaluate()
  /// does (same thread rules). Buckets that do not hold it are left as they are. The default
  /// is for stores that hold no leases: every bucket answers kNotHeld.
  virtual void changeLease(const LeaseRequest& request, LeaseCallback done) {
    LeaseResponse response;
    response.holds.resize(request.holds.size());
    done(std::move(response));
  }

  /// Deletes the buckets whose keys start with any of `key_prefixes` (admin reset).
  /// The callback gets the number of buckets removed.
  virtual void reset(const std::vector<std::string>& key_prefixes, ResetCallback done) = 0;

  /// True while the store can answer requests: /readyz is 200 only while every I/O
  /// thread's store is. For a failover store this is the readiness of the failure mode
  /// (`open` and `local` answer whatever the primary's health, once start-up is over).
  /// Thread-safe.
  virtual bool healthy() const = 0;

  /// The state of the backing connection(s) (/readyz's `store` and `store_healthy`).
  /// Thread-safe. Stores without a connection are always kHealthy.
  virtual StoreHealth health() const {
    return healthy() ? StoreHealth::kHealthy : StoreHealth::kFailing;
  }

  /// "memory", "redis", "redis_cluster".
  virtual std::string_view kind() const = 0;

  /// Runtime overrides (limit_override.hpp), kept where the counters are: in process (and
  /// its file) for the memory store, in Redis for the Redis stores. Called on an I/O thread
  /// of this store; the callback runs on the same thread. A store that keeps none answers
  /// kUnavailable.
  ///
  /// Sets (or replaces) the override at `slot`; kInvalidArgument when a new one would pass
  /// `max_overrides`.
  virtual void setOverride(const OverrideSlot& slot, StoredOverridePtr value,
                           std::size_t max_overrides, OverrideSetCallback done) {
    (void)slot, (void)value, (void)max_overrides;
    done(makeError(ErrorKind::kUnavailable, "this store keeps no overrides"));
  }
  /// Removes the override at `slot`; the callback says whether there was one.
  virtual void removeOverride(const OverrideSlot& slot, OverrideRemoveCallback done) {
    (void)slot;
    done(makeError(ErrorKind::kUnavailable, "this store keeps no overrides"));
  }
  /// Called on this store's thread after an override changed (through any thread's store):
  /// a store that answers denials from a local cache drops it, so that the change applies
  /// to this thread's next decision.
  virtual void overridesChanged() {}
  /// Every override kept, expired ones included (the caller filters them).
  virtual void listOverrides(OverrideListCallback done) {
    done(makeError(ErrorKind::kUnavailable, "this store keeps no overrides"));
  }
  /// True when evaluate() implements StoreRequest::hold (reservations); a store that does
  /// not is never sent one (the decision service refuses the step).
  virtual bool holdsReservations() const { return false; }
};

using StorePtr = std::shared_ptr<Store>;

}  // namespace sluice
