#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/decision/limit_reset.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/limit_override.hpp"

/// Runtime overrides behind the decision layer (the admin port's `/limits/overrides`,
/// docs/overrides.md): the rules say which limit an override replaces and validate its
/// `rate_limit` exactly as the rules loader validates a rule; the store keeps it where the
/// counters are and applies it in the decision itself. The transport only parses the JSON
/// and encodes the answer.
namespace sluice {

/// What PUT and DELETE /limits/overrides name.
struct OverrideRequest {
  std::string domain;
  /// The rule's name (RateLimit::name): with no descriptor, the override replaces that rule
  /// for `client_id`; with one, it picks among the descriptor's limits.
  std::string rule;
  /// One descriptor: the override replaces the limit of the one bucket it matches (that
  /// descriptor value, for `client_id`).
  std::optional<Descriptor> descriptor;
  std::string client_id;  ///< "" : requests without a client id (Envoy's API)
  /// PUT only: the `rate_limit` object as compact JSON, the rules file's keys.
  std::string rate_limit_json;
  /// PUT only: a duration from now (`90m`, rules syntax) or an RFC 3339 instant; nullopt:
  /// never expires.
  std::optional<std::string> expires;
  std::string reason;  ///< PUT only: required, at most kMaxOverrideReasonBytes
  std::string set_by;  ///< who asks (the peer address), for the record and the log
};

inline constexpr std::size_t kMaxOverrideReasonBytes = 1024;

/// GET /limits/overrides' filters; empty: any.
struct OverrideFilter {
  std::string domain;
  std::string client;
  std::string rule;
};

/// What a PUT did.
struct OverrideChange {
  StoredOverridePtr value;  ///< its record_json is the answer
  bool replaced = false;
};

class LimitOverrides {
 public:
  using SetDone = std::function<void(Result<OverrideChange>)>;
  using RemoveDone = std::function<void(Result<bool>)>;
  using ListDone = std::function<void(Result<std::vector<StoredOverridePtr>>)>;
  virtual ~LimitOverrides() = default;

  /// Validates `request` against the current rules and sets it in the store. Errors found
  /// before the store is asked are returned (`done` is not called): kUnavailable (rules not
  /// loaded), kNotFound (unknown domain or rule), kInvalidArgument (the validator's message,
  /// a limit that refuses overrides, a bad `expires` or `reason`). Otherwise `done` is
  /// called once on the store's thread. Thread-safe.
  virtual Status set(const OverrideRequest& request, SetDone done) const = 0;
  /// Removes the override `request` names (the same target as set()); `done` gets false
  /// when there was none.
  virtual Status remove(const OverrideRequest& request, RemoveDone done) const = 0;
  /// The live overrides that pass `filter`, ordered by domain, rule, client.
  virtual void list(const OverrideFilter& filter, ListDone done) const = 0;
};

/// LimitOverrides over the current rules and the decision threads' stores: the first one
/// keeps the overrides (they live in the store: every thread's sees the same ones), and after
/// a change every target's Store::overridesChanged() runs, on its own thread, before the
/// change is answered.
/// `max_overrides` bounds how many a store keeps (`--max-overrides`). Counts
/// `override_changes_total{action}` (set, replace, delete) in `metrics`.
std::unique_ptr<LimitOverrides> makeLimitOverrides(RulesProvider rules,
                                                   std::vector<ResetTarget> targets,
                                                   const Clock& clock, Metrics& metrics,
                                                   std::size_t max_overrides);

/// A record's fields, parsed back from StoredOverride::record_json, for filters and views.
struct OverrideRecordView {
  std::string domain;
  std::string rule;
  std::string client_id;
  bool per_bucket = false;  ///< set for one descriptor value, not for the whole rule
};
std::optional<OverrideRecordView> viewOverrideRecord(const StoredOverride& value);

}  // namespace sluice
