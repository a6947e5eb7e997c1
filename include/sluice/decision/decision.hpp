#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/rules/rules.hpp"

namespace sluice {

/// A parsed decision request (from /shouldAllowRequest, /json or /check).
struct DecisionRequest {
  std::string domain;                   ///< already defaulted by the caller
  std::string client_id;                ///< empty: no per-client scope
  std::vector<Descriptor> descriptors;  ///< empty: the domain-level rate_limit applies
  std::int64_t hits = 1;                ///< >= 0
  /// Per-descriptor hits (envoy's descriptor-level hits_addend); empty or one per descriptor.
  std::vector<std::optional<std::int64_t>> descriptor_hits;
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
  const RateLimit* rule = nullptr;  ///< the rule it comes from; points into Decision::rules
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

  /// The limit that answers for this descriptor alone (envoy's one status per descriptor):
  /// the denying non-shadow limit, else the limited one with the least remaining. Null when
  /// the descriptor has no limited limit (no rule, or only unlimited ones).
  const LimitStatus* binding() const;
};

struct Decision {
  bool allowed = true;
  bool degraded = false;  ///< decided by a failure mode, not by the store
  bool domain_known = true;
  std::vector<DescriptorStatus> descriptors;
  RuleSetPtr rules;  ///< the snapshot used from start to end
  /// The request's descriptors, moved in by the service once matched (so that observers
  /// such as value labels need no copy of the request).
  std::vector<Descriptor> request_descriptors;

  /// The limit whose headers the answer carries: on a deny the denying non-shadow limit
  /// with the longest retry; otherwise the evaluated limit with the least remaining.
  /// Null when no limit was evaluated.
  const LimitStatus* binding() const;
};

/// Turns a request into a decision: snapshot the rules, match, ask the store, aggregate.
class DecisionService {
 public:
  using Callback = std::function<void(Result<Decision>)>;
  virtual ~DecisionService() = default;
  /// Called on an I/O thread; the callback runs on the same thread. Errors: the store's
  /// (kTimeout, kConnection, ...) when the failure mode is `closed`.
  virtual void decide(DecisionRequest request, Callback done) = 0;
};

}  // namespace sluice
