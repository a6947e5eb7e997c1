#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/store.hpp"

/// Resetting a client's limits (the admin port's `DELETE /limits`) behind the decision
/// layer: the rules say which buckets a request stands for, the stores of every decision
/// thread delete them. The transport only parses the request and encodes the answer.
namespace sluice {

/// Runs a task on one decision I/O thread (e.g. posts it to that thread's io_context).
using PostTask = std::function<void(std::function<void()>)>;

/// One decision I/O thread's store, reset on that thread: Redis stores are bound to their
/// io_context, and each store keeps its own local over-limit cache.
struct ResetTarget {
  PostTask post;
  Store* store = nullptr;  ///< outlives the LimitReset
};

/// The store-key prefixes a reset deletes for a request shaped like a decision request, in
/// BucketKey's grammar (the keys the DecisionService charges):
/// - with descriptors: the buckets of every limit those descriptors match, for this client
///   (exactly the keys a decision would charge);
/// - without descriptors: every bucket of this client in the domain (domain-level limit
///   and all descriptors).
/// kNotFound for an unknown domain, kInvalidArgument when descriptors match no rule.
Result<std::vector<std::string>> resetKeyPrefixes(const RuleSet& rules,
                                                  const DecisionRequest& request);

class LimitReset {
 public:
  using Done = std::function<void(Result<std::size_t>)>;
  virtual ~LimitReset() = default;

  /// Matches `request` (domain, clientId, descriptors) against the current rules and
  /// deletes its buckets on every target, each on its own thread. Errors found before any
  /// deletion are returned and `done` is not called: kUnavailable (rules not loaded), and
  /// resetKeyPrefixes()'s. Otherwise `done` is called once, on the thread of the last
  /// target to finish (or the caller's, without targets), with the number of buckets
  /// removed on all of them or the first store error. Thread-safe.
  virtual Status reset(const DecisionRequest& request, Done done) const = 0;
};

/// Told the store-key prefixes of a reset once every target deleted them without error
/// (e.g. LeaseTracker::reset, whose leases lived in those buckets); on the thread of `done`.
using ResetDone = std::function<void(const std::vector<std::string>& key_prefixes)>;

/// A LimitReset over the current rules and these targets.
std::unique_ptr<LimitReset> makeLimitReset(RulesProvider rules, std::vector<ResetTarget> targets,
                                           ResetDone deleted = nullptr);

}  // namespace sluice
