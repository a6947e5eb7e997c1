#include "sluice/decision/lease_service.hpp"

#include <algorithm>
#include <utility>

#include "sluice/decision/lease_id.hpp"
#include "sluice/rules/bucket_key.hpp"

namespace sluice {
namespace {

/// The buckets of a lease in the current rules, and their limits' names.
struct LeaseTarget {
  LeaseRequest request;
  std::vector<const RateLimit*> rules;
  std::string domain;
};

Result<LeaseTarget> targetOf(const RuleSet& rules, const LeaseToken& token, LeaseOp op) {
  const DomainConfig* domain = rules.findDomain(token.domain);
  if (domain == nullptr) {
    return makeError(ErrorKind::kNotFound,
                     "lease: its domain \"" + token.domain +
                         "\" is no longer in the rules (its leases expire by themselves)");
  }
  LeaseTarget target;
  target.request.op = op;
  target.request.lease = token.lease;
  target.domain = token.domain;
  const RequestMatch match = matchRequest(*domain, token.descriptors);
  for (const DescriptorMatch& dm : match.descriptors) {
    for (const MatchedLimit& ml : dm.limits) {
      if (ml.limit->unlimited || ml.limit->params.algorithm != Algorithm::kConcurrency) {
        continue;
      }
      target.request.holds.push_back(
          LeaseHold{BucketKey::storeKey(token.client_id, ml.bucket_key), ml.limit->params});
      target.rules.push_back(ml.limit);
    }
  }
  if (target.request.holds.empty()) {
    return makeError(ErrorKind::kNotFound,
                     "lease: its descriptors match no concurrency limit in the current rules "
                     "(its leases expire by themselves)");
  }
  return target;
}

/// The error when no bucket held the lease live; nothing was changed.
Error notHeld(LeaseOp op, const LeaseResponse& response, Micros now) {
  Micros expired_at = 0;
  for (const LeaseHoldResult& hold : response.holds) {
    if (hold.found == LeaseFound::kExpired) {
      expired_at = std::max(expired_at, hold.expires_at);
    }
  }
  const std::string verb = op == LeaseOp::kRelease ? "released" : "renewed";
  if (expired_at > 0) {
    const Micros ago = std::max<Micros>(0, now - expired_at);
    return makeError(
        ErrorKind::kNotFound,
        "lease: expired " + std::to_string(ago / kMicrosPerMilli) + " ms ago, so it cannot be " +
            verb +
            (op == LeaseOp::kRelease ? " (its slot came back by itself)" : " (take a new one)") +
            "; nothing was changed");
  }
  return makeError(ErrorKind::kNotFound,
                   "lease: not held (already released, expired, or never granted), so it "
                   "cannot be " +
                       verb +
                       (op == LeaseOp::kRelease ? " (an expired lease's slot came back by itself)"
                                                : " (take a new one)") +
                       "; nothing was changed");
}

class LeaseServiceImpl final : public LeaseService {
 public:
  explicit LeaseServiceImpl(LeaseServiceParts parts) : parts_(std::move(parts)) {}

  void change(LeaseOp op, const std::string& lease_id, Callback done) override {
    auto token = decodeLeaseId(lease_id);
    if (!token) {
      done(token.error());
      return;
    }
    RuleSetPtr rules = parts_.rules();
    if (!rules) {
      done(makeError(ErrorKind::kUnavailable, "rules are not loaded"));
      return;
    }
    auto target = targetOf(*rules, *token, op);
    if (!target) {
      done(target.error());
      return;
    }
    auto shared = std::make_shared<LeaseTarget>(std::move(*target));
    parts_.store->changeLease(
        shared->request,
        [this, shared, rules = std::move(rules), done = std::move(done)](
            Result<LeaseResponse> response) mutable { answer(*shared, response, done); });
  }

 private:
  void answer(const LeaseTarget& target, Result<LeaseResponse>& response, const Callback& done) {
    if (!response) {
      done(response.error());
      return;
    }
    const Micros now = parts_.clock->nowMicros();
    LeaseAnswer answer;
    answer.op = target.request.op;
    for (std::size_t i = 0; i < response->holds.size() && i < target.rules.size(); ++i) {
      const LeaseHoldResult& hold = response->holds[i];
      if (hold.found != LeaseFound::kHeld) {
        continue;
      }
      const RateLimit& rule = *target.rules[i];
      answer.limits.push_back(
          LeaseAnswer::Limit{rule.name, rule.params.limit, hold.outcome.remaining});
      if (target.request.op == LeaseOp::kRenew) {
        const Micros left = std::max<Micros>(0, hold.expires_at - now);
        answer.expires_in_us =
            answer.expires_in_us == 0 ? left : std::min(answer.expires_in_us, left);
      }
      if (parts_.leases == nullptr) {
        continue;
      }
      if (target.request.op == LeaseOp::kRelease) {
        parts_.leases->released(target.domain, rule.name, target.request.lease, "release", now);
      } else {
        parts_.leases->renewed(target.domain, rule.name, target.request.lease, hold.expires_at,
                               now);
      }
    }
    if (answer.limits.empty()) {
      done(notHeld(target.request.op, *response, now));
      return;
    }
    done(std::move(answer));
  }

  LeaseServiceParts parts_;
};

}  // namespace

std::unique_ptr<LeaseService> makeLeaseService(LeaseServiceParts parts) {
  return std::make_unique<LeaseServiceImpl>(std::move(parts));
}

}  // namespace sluice
