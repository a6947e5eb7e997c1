#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/inplace_function.hpp"
#include "sluice/common/result.hpp"
#include "sluice/decision/reservation.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/store.hpp"

namespace sluice {

/// The decision: what a transport asks (DecisionRequest), what it gets back (Decision), the
/// service between them and the observers it calls once per decision. The path of one
/// request through these types is in docs/architecture.md.

/// A limit given by the request itself (envoy's `RateLimitDescriptor.limit`): it applies to
/// its descriptor instead of the rules (a fixed window of requests_per_unit per unit; the
/// domain must still be known). Its bucket is keyed like envoyproxy/ratelimit's: domain,
/// every entry (key and value) and the unit, not requests_per_unit, so requests that change
/// the number keep counting in the same window.
struct LimitOverride {
  std::int64_t requests_per_unit = 0;  ///< >= 0 (0 blocks everything)
  TimeUnit unit = TimeUnit::kSecond;
};

/// A parsed decision request (from /shouldAllowRequest, /json, /check, gRPC or any other
/// transport).
struct DecisionRequest {
  std::string domain;                   ///< already defaulted by the caller
  std::string client_id;                ///< empty: no per-client scope
  std::vector<Descriptor> descriptors;  ///< empty: the domain-level rate_limit applies
  std::int64_t hits = 1;                ///< >= 0
  /// Per-descriptor hits (envoy's descriptor-level hits_addend); empty or one per descriptor.
  /// Each limit is charged the hits of its own descriptor, all limits in one atomic store
  /// call (all or nothing); a descriptor without its own hits uses `hits`.
  std::vector<std::optional<std::int64_t>> descriptor_hits;
  /// Per-descriptor limit overrides (envoy's descriptor-level `limit`); empty or one per
  /// descriptor. A descriptor with an override is not matched against the rules.
  std::vector<std::optional<LimitOverride>> descriptor_limits;
  /// A refund: every limit is given its hits back instead of charged (docs/refunds.md).
  bool refund = false;
  /// Per-descriptor refunds (Envoy's descriptor-level `is_negative_hits`); empty or one
  /// per descriptor. A refunded descriptor's limits never deny the request.
  std::vector<bool> descriptor_refunds;
  /// How the limits that are not refunded are charged (store.hpp, Charge): all or nothing,
  /// every limit whatever the verdict (envoy's counting), or a report (never denies).
  Charge charge = Charge::kAllOrNothing;
  /// The request came through Envoy's API (POST /json, gRPC RLS): a request charged all or
  /// nothing is charged as DecisionServiceParts::envoy_charge says instead.
  bool envoy_api = false;
  /// A refund's lease (its concurrency limits release it; without one they release nothing):
  /// taken by the service from a refunded descriptor's `lease_id` entry (lease_id.hpp).
  LeaseNumber lease = 0;
  /// A reservation step (docs/reservations.md); op kNone for an ordinary request. A reserve
  /// holds `hits` on every matched limit; a commit charges `hits` (the actual amount) as a
  /// report and releases the hold; a release gives it back.
  ReservationRequest reservation{};

  /// True when descriptor `d` is refunded.
  bool refunds(std::size_t d) const {
    return refund || (d < descriptor_refunds.size() && descriptor_refunds[d]);
  }

  /// Every field back to its default, keeping the capacity of the strings and vectors for
  /// reuse; the descriptors stay (a parser reuses them, with their entries, and trims the
  /// rest). The one place that knows every field: a field added here is reset here.
  void clearForReuse() {
    domain.clear();
    client_id.clear();
    hits = 1;
    descriptor_hits.clear();
    descriptor_limits.clear();
    refund = false;
    descriptor_refunds.clear();
    charge = Charge::kAllOrNothing;
    envoy_api = false;
    lease = 0;
    reservation.op = HoldOp::kNone;
    reservation.ttl_us = 0;
    reservation.id.clear();
  }
};

/// The status of one limit of one descriptor.
struct LimitStatus {
  std::string name;
  std::int64_t limit = 0;  ///< requests_per_unit
  TimeUnit unit = TimeUnit::kSecond;
  std::int64_t unit_multiplier = 1;
  Micros window_us = 0;
  Algorithm algorithm = Algorithm::kFixedWindow;
  bool shadow = false;
  bool unlimited = false;
  bool shape = false;
  bool detailed_metric = false;
  /// The rule named itself (`name:`); false for generated names and request overrides.
  /// Envoy's answers leave `currentLimit.name` out when false, as envoyproxy/ratelimit does.
  bool explicit_name = false;
  /// The node has `quota_mode: true` (envoyproxy/ratelimit's quota mode): an over-limit
  /// quota descriptor denies the request only when every quota descriptor of the request
  /// is over its limit.
  bool quota = false;
  /// A request-side limit (DecisionRequest::descriptor_limits), not a rule.
  bool from_request = false;
  /// Reservation holds on this limit's bucket found expired unsettled by this decision.
  std::uint32_t holds_expired = 0;
  /// The rule it comes from; points into Decision::rules, or into Decision::request_limits
  /// for a request-side limit.
  const RateLimit* rule = nullptr;
  /// The runtime override that replaced the rule's limit for this request (limit, unit,
  /// unit_multiplier and window_us above are then the override's); null when none did.
  StoredOverridePtr override_value;
  Outcome outcome;
};

/// What a candidate limit (RateLimit::candidate) of a matched descriptor would have decided:
/// kept apart from the descriptors' limits, so it never shows in an answer.
struct CandidateStatus {
  const RateLimit* rule = nullptr;  ///< points into Decision::rules
  std::size_t descriptor = 0;       ///< the request descriptor that matched it
  Outcome outcome;
};

/// The status of one request descriptor.
struct DescriptorStatus {
  // A constructor rather than an aggregate, so that adding a field does not make every
  // brace-initialization elsewhere warn about a missing initializer.
  DescriptorStatus(bool is_matched = false, std::vector<LimitStatus> statuses = {},
                   std::string metadata = {})
      : matched(is_matched), limits(std::move(statuses)), metadata_json(std::move(metadata)) {}

  bool matched = false;             ///< a rule matched (even if unlimited)
  std::vector<LimitStatus> limits;  ///< in rule order
  std::string metadata_json;        ///< the matched node's `metadata` as JSON ("" if none)
  /// The matched node (points into Decision::rules); null when none or for the
  /// domain-level limit.
  const DescriptorNode* node = nullptr;

  /// True when no non-shadow limit of this descriptor denied (envoy's "passed" descriptor:
  /// its status code is OK).
  bool passed() const;
};

struct Decision {
  bool allowed = true;
  bool degraded = false;  ///< decided by a failure mode, not by the store
  bool domain_known = true;
  /// When the store evaluated the limits (StoreResponse::at_us); 0 when it does not say or
  /// no limit was evaluated.
  Micros decided_at_us = 0;
  std::vector<DescriptorStatus> descriptors;
  RuleSetPtr rules;  ///< the snapshot used from start to end
  /// The request's domain in `rules`; null when unknown (or the rules are not loaded).
  const DomainConfig* domain = nullptr;
  /// The request itself, moved in by the service once decided: the answer's encoders and
  /// the observers read it from here, so the path never copies it.
  DecisionRequest request;
  /// The rules `metadata` of every descriptor that passed, merged in request order (first
  /// wins; objects merged recursively), as compact JSON: envoyproxy/ratelimit's
  /// `dynamicMetadata.metadata`. "" when none.
  std::string metadata_json;
  /// A reservation step's result (status kNone for an ordinary request).
  ReservationOutcome reservation{};
  /// Holds found expired unsettled on the request's buckets (the sum of the limits').
  std::uint32_t holds_expired = 0;
  /// The rate limits built from request-side overrides (LimitStatus::rule points here).
  std::vector<std::shared_ptr<const RateLimit>> request_limits;
  /// The lease an admitted request took in its concurrency limits (lease_id.hpp), "" when
  /// it took none; lease_us is the shortest lease time among them (renew before it ends).
  std::string lease_id;
  Micros lease_us = 0;
  /// The matched candidate limits and what each would have decided (docs/what-if.md).
  std::vector<CandidateStatus> candidates;

  /// The limit whose headers the answer carries: bindingLimit(*this).
  const LimitStatus* binding() const;
};

/// The one choice of the limit an answer reports, used by the headers, the JSON answer, the
/// access log and the denial events: on a deny, the denying non-shadow limit with the
/// longest retry (one that can never pass first); otherwise the evaluated non-shadow limit
/// with the least remaining. Null when no limit was evaluated. Shadow limits never bind:
/// turning shadow mode on must not change what clients see.
const LimitStatus* bindingLimit(const Decision& decision);

/// The same choice within one descriptor, for answers with one status per descriptor
/// (envoy's /json): the limit that denies (shadow limits report their own deny), else the
/// least remaining; null when the descriptor has no evaluated limit.
const LimitStatus* descriptorBindingLimit(const DescriptorStatus& descriptor);

/// The request-level outcome word (access log): unknown_domain, denied, shadow_denied
/// (allowed, but a shadow limit would have denied), allowed (a limit was evaluated or an
/// unlimited rule matched), no_rule.
std::string_view decisionWord(const Decision& decision);

/// The outcome word of one limit (decisions_total): allowed, denied, shadow_denied.
std::string_view limitOutcomeWord(const LimitStatus& limit);

/// "key=value,key=value" (descriptor values as sent).
std::string describeDescriptor(const Descriptor& descriptor);

/// "Who" a limit of request descriptor `descriptor` is charged to, written into `out`
/// (replacing it, keeping its capacity): the request's client id where there is one, else
/// the descriptor entries that make the bucket distinct, those the rules count per value
/// (`user=mallory`, not the `path=/login` all such buckets share); all the descriptor's
/// entries when none does (a bucket shared by everyone); "" for the domain-level limit of a
/// request without client id. /limits/top, the denial events and `sluice simulate` name
/// clients so.
void assignBucketIdentity(std::string& out, const Decision& decision, std::size_t descriptor);

/// This thread's spare request, whose vectors and strings keep the capacity of a decision
/// already answered: a transport that parses into takeSpareRequest() and gives each answered
/// decision back with recycleDecision() decides without allocating for them once the thread
/// is warm (the HTTP decision endpoints do; the DecisionService takes the spare decisions
/// itself). It returns an empty request (hits 1, no descriptors) whose storage is the
/// spare's; a new one when there is none.
DecisionRequest takeSpareRequest();
/// Keeps `decision` (and its request) as this thread's spares; drops its rules snapshot.
void recycleDecision(Decision&& decision);

/// Turns a request into a decision: snapshot the rules, match, ask the store, aggregate.
/// Transport-neutral: HTTP routes call it today, any other transport calls it the same way.
class DecisionService {
 public:
  /// Move-only; a callable of up to 64 bytes (a Respond and a few pointers) is stored in
  /// place, without allocating. It is handed the service's own result: it may read it in
  /// place or move the decision out (recycleDecision()), but must not keep a reference to it
  /// after it returns.
  using Callback = InplaceFunction<void(Result<Decision>&&), 64>;
  virtual ~DecisionService() = default;
  /// Called on an I/O thread; the callback runs on the same thread (possibly before
  /// decide() returns). Errors: kUnavailable (rules not loaded), the store's (kTimeout,
  /// kConnection, ...) when the failure mode is `closed`.
  virtual void decide(DecisionRequest&& request, Callback done) = 0;

  /// Writes a request into `request` (cleared for reuse: DecisionRequest::clearForReuse()),
  /// or says why it cannot be decided.
  using RequestFill = InplaceFunction<Status(DecisionRequest&), 32>;
  /// decide() on a request `fill` writes in place, into storage the service keeps for reuse,
  /// so that neither the request nor its decision moves on the way. When `fill` fails its
  /// error is returned: `done` is not called (nor moved from) and no observer sees it. A
  /// callback that leaves the decision where it is (no recycleDecision()) lets its storage
  /// serve the service's next request. The default fills a spare (takeSpareRequest()) and
  /// calls decide().
  virtual Status decideInPlace(const RequestFill& fill, Callback& done);
};

/// Sees every decision once, on the deciding I/O thread, before the answer is handed back
/// (metrics, access log, denial events). Must not block.
class DecisionObserver {
 public:
  virtual ~DecisionObserver() = default;
  /// `decision` is the result or its error; `started_us` the clock's reading when
  /// decide() was called.
  virtual void observe(const DecisionRequest& request, const Result<Decision>& decision,
                       Micros started_us) = 0;
};

}  // namespace sluice
