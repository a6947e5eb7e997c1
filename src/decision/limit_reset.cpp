#include "sluice/decision/limit_reset.hpp"

#include <mutex>
#include <optional>
#include <utility>

#include "sluice/rules/bucket_key.hpp"

namespace sluice {
namespace {

/// One reset fanned out to every decision thread's store.
struct ResetFanOut {
  std::mutex mutex;
  std::size_t pending = 0;
  std::size_t removed = 0;
  std::optional<Error> error;
  LimitReset::Done done;

  void arrive(Result<std::size_t> result) {
    Result<std::size_t> total = std::size_t{0};
    {
      std::lock_guard lock(mutex);
      if (result) {
        removed += *result;
      } else if (!error) {
        error = result.error();
      }
      if (--pending != 0) {
        return;
      }
      total = error ? Result<std::size_t>(*error) : Result<std::size_t>(removed);
    }
    done(std::move(total));
  }
};

class LimitResetImpl final : public LimitReset {
 public:
  LimitResetImpl(RulesProvider rules, std::vector<ResetTarget> targets, ResetDone deleted)
      : rules_(std::move(rules)), targets_(std::move(targets)), deleted_(std::move(deleted)) {}

  Status reset(const DecisionRequest& request, Done done) const override {
    RuleSetPtr rules = rules_();
    if (!rules) {
      return makeError(ErrorKind::kUnavailable, "rules: not loaded");
    }
    auto prefixes = resetKeyPrefixes(*rules, request);
    if (!prefixes) {
      return prefixes.error();
    }
    auto shared_prefixes = std::make_shared<const std::vector<std::string>>(std::move(*prefixes));
    if (deleted_) {
      done = [deleted = deleted_, shared_prefixes,
              done = std::move(done)](Result<std::size_t> removed) {
        if (removed) {
          deleted(*shared_prefixes);
        }
        done(std::move(removed));
      };
    }
    if (targets_.empty()) {
      done(std::size_t{0});
      return {};
    }
    auto fan_out = std::make_shared<ResetFanOut>();
    fan_out->pending = targets_.size();
    fan_out->done = std::move(done);
    for (const ResetTarget& target : targets_) {
      target.post([store = target.store, shared_prefixes, fan_out] {
        store->reset(*shared_prefixes,
                     [fan_out](Result<std::size_t> result) { fan_out->arrive(std::move(result)); });
      });
    }
    return {};
  }

 private:
  RulesProvider rules_;
  std::vector<ResetTarget> targets_;
  ResetDone deleted_;
};

}  // namespace

Result<std::vector<std::string>> resetKeyPrefixes(const RuleSet& rules,
                                                  const DecisionRequest& request) {
  const DomainConfig* domain = rules.findDomain(request.domain);
  if (domain == nullptr) {
    return makeError(ErrorKind::kNotFound, "domain: unknown domain \"" + request.domain + "\"");
  }
  std::vector<std::string> prefixes;
  if (request.descriptors.empty()) {
    return BucketKey::domainPrefixes(request.client_id, domain->domain);
  }
  RequestMatch match = matchRequest(*domain, request.descriptors);
  for (const DescriptorMatch& descriptor : match.descriptors) {
    for (const MatchedLimit& limit : descriptor.limits) {
      if (!limit.limit->unlimited) {
        prefixes.push_back(BucketKey::storeKey(request.client_id, limit.bucket_key));
      }
    }
  }
  if (prefixes.empty()) {
    return makeError(
        ErrorKind::kInvalidArgument,
        "descriptors: no rule with a limit matches them in domain \"" + request.domain + "\"");
  }
  return prefixes;
}

std::unique_ptr<LimitReset> makeLimitReset(RulesProvider rules, std::vector<ResetTarget> targets,
                                           ResetDone deleted) {
  return std::make_unique<LimitResetImpl>(std::move(rules), std::move(targets), std::move(deleted));
}

}  // namespace sluice
