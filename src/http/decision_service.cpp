#include "http/decision_service.hpp"

#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/envoy_semantics.hpp"

namespace sluice::http {
namespace {

constexpr std::string_view kDecisionsMetric = "decisions_total";
constexpr std::string_view kUnknownDomainLabel = "_unknown";
constexpr std::string_view kRequestLimitLabel = "_request";

LimitStatus statusOf(const MatchedLimit& matched) {
  const RateLimit& rule = *matched.limit;
  LimitStatus status;
  status.name = rule.name;
  status.limit = rule.requests_per_unit;
  status.unit = rule.unit;
  status.unit_multiplier = rule.unit_multiplier;
  status.window_us = rule.params.window_us;
  status.algorithm = rule.params.algorithm;
  status.shadow = rule.shadow_mode;
  status.unlimited = rule.unlimited;
  status.shape = rule.params.shape;
  status.detailed_metric = matched.node != nullptr && matched.node->detailed_metric;
  status.explicit_name = rule.explicit_name;
  status.quota = rule.quota_mode;
  status.rule = matched.limit;
  return status;
}

/// The descriptors matched against the rules: those with a request-side limit are left
/// out (empty: they match nothing and replace nothing, as in envoyproxy/ratelimit).
const std::vector<Descriptor>& descriptorsToMatch(const DecisionRequest& request,
                                                  std::vector<Descriptor>& storage) {
  bool any = false;
  for (const auto& limit : request.descriptor_limits) {
    any = any || limit.has_value();
  }
  if (!any) {
    return request.descriptors;
  }
  storage = request.descriptors;
  for (std::size_t d = 0; d < storage.size() && d < request.descriptor_limits.size(); ++d) {
    if (request.descriptor_limits[d]) {
      storage[d].clear();
    }
  }
  return storage;
}

class DecisionServiceImpl final : public DecisionService {
 public:
  DecisionServiceImpl(RulesProvider rules, StorePtr store, Metrics& metrics)
      : rules_(std::move(rules)),
        store_(std::move(store)),
        metrics_(metrics),
        unknown_domain_(counter(kUnknownDomainLabel, "", "unknown_domain")) {
    describeHttpMetrics(metrics_);
  }

  void decide(DecisionRequest request, Callback done) override {
    RuleSetPtr rules = rules_();
    if (!rules) {
      done(makeError(ErrorKind::kUnavailable, "rules are not loaded"));
      return;
    }
    Decision decision;
    decision.rules = rules;
    const DomainConfig* domain = rules->findDomain(request.domain);
    if (domain == nullptr) {
      decision.domain_known = false;
      decision.descriptors.resize(request.descriptors.size());
      unknown_domain_.inc();
      done(std::move(decision));
      return;
    }

    std::vector<Descriptor> without_overrides;
    RequestMatch match = matchRequest(*domain, descriptorsToMatch(request, without_overrides));
    StoreRequest store_request;
    store_request.client = request.client_id;
    store_request.cost = request.hits;
    // (descriptor index, limit index) of each store limit, to put outcomes back.
    std::vector<std::pair<std::size_t, std::size_t>> slots;
    decision.descriptors.resize(match.descriptors.size());
    for (std::size_t d = 0; d < match.descriptors.size(); ++d) {
      const DescriptorMatch& dm = match.descriptors[d];
      DescriptorStatus& ds = decision.descriptors[d];
      ds.matched = dm.matched;
      if (dm.node != nullptr) {
        ds.metadata_json = dm.node->metadata_json;
      }
      std::int64_t descriptor_cost = request.hits;
      if (d < request.descriptor_hits.size() && request.descriptor_hits[d]) {
        descriptor_cost = *request.descriptor_hits[d];
      }
      if (d < request.descriptor_limits.size() && request.descriptor_limits[d]) {
        const LimitOverride& override = *request.descriptor_limits[d];
        auto rule = makeRequestLimit(override, domain->domain, request.descriptors[d]);
        MatchedLimit ml{rule.get(), nullptr,
                        requestLimitBucketKey(*domain, request.descriptors[d], override.unit)};
        ds.matched = true;
        ds.limits.push_back(statusOf(ml));
        ds.limits.back().from_request = true;
        decision.request_limits.push_back(std::move(rule));
        StoreLimit limit;
        limit.key = storeKey(request.client_id, ml.bucket_key);
        limit.params = ml.limit->params;
        limit.cost = descriptor_cost;
        store_request.limits.push_back(std::move(limit));
        slots.emplace_back(d, 0);
        continue;
      }
      for (const MatchedLimit& ml : dm.limits) {
        ds.limits.push_back(statusOf(ml));
        if (ml.limit->unlimited) {
          continue;
        }
        // Each limit is charged its own descriptor's hits, all in one atomic store call.
        StoreLimit limit;
        limit.key = storeKey(request.client_id, ml.bucket_key);
        limit.params = ml.limit->params;
        limit.shadow = ml.limit->shadow_mode;
        limit.cost = descriptor_cost;
        if (ml.limit->quota_mode) {
          limit.quota_group = static_cast<int>(d);
        }
        store_request.limits.push_back(std::move(limit));
        slots.emplace_back(d, ds.limits.size() - 1);
      }
    }
    decision.request_descriptors = std::move(request.descriptors);
    if (store_request.limits.empty()) {
      record(*domain, decision);
      done(std::move(decision));
      return;
    }
    // `domain` points into decision.rules, which the callback keeps alive.
    store_->evaluate(store_request,
                     [this, domain, decision = std::move(decision), slots = std::move(slots),
                      done = std::move(done)](Result<StoreResponse> response) mutable {
                       if (!response) {
                         done(response.error());
                         return;
                       }
                       const StoreResponse& r = *response;
                       for (std::size_t i = 0; i < slots.size() && i < r.outcomes.size(); ++i) {
                         auto [d, l] = slots[i];
                         decision.descriptors[d].limits[l].outcome = r.outcomes[i];
                       }
                       decision.allowed = r.allowed;
                       decision.degraded = r.degraded;
                       decision.metadata_json = mergePassedMetadata(decision.descriptors);
                       record(*domain, decision);
                       done(std::move(decision));
                     });
  }

 private:
  struct RuleCounters {
    Counter* allowed = nullptr;
    Counter* denied = nullptr;
    Counter* shadow_denied = nullptr;
  };

  // Counts without building label strings: the series of each rule are looked up once per
  // rules snapshot and then found by the rule's address.
  void record(const DomainConfig& domain, const Decision& decision) {
    if (decision.rules != counted_rules_) {
      counted_rules_ = decision.rules;  // also keeps the addresses below from being reused
      rule_counters_.clear();
      request_counters_.clear();
      no_rule_counters_.clear();
    }
    for (const auto& d : decision.descriptors) {
      if (!d.matched) {
        auto [it, inserted] = no_rule_counters_.try_emplace(&domain, nullptr);
        if (inserted) {
          it->second = &counter(domain.domain, "", "no_rule");
        }
        it->second->inc();
        continue;
      }
      for (const auto& l : d.limits) {
        // Request-side limits are new objects every time: counted under one series per
        // domain (rule "_request") instead of one per address.
        const void* identity = l.from_request ? static_cast<const void*>(&domain) : l.rule;
        auto [it, inserted] =
            (l.from_request ? request_counters_ : rule_counters_).try_emplace(identity);
        RuleCounters& c = it->second;
        if (inserted) {
          const std::string_view rule = l.from_request ? kRequestLimitLabel : l.name;
          c.allowed = &counter(domain.domain, rule, "allowed");
          c.denied = &counter(domain.domain, rule, "denied");
          c.shadow_denied = &counter(domain.domain, rule, "shadow_denied");
        }
        if (l.unlimited || l.outcome.allowed) {
          c.allowed->inc();
        } else {
          (l.shadow ? c.shadow_denied : c.denied)->inc();
        }
      }
    }
  }

  Counter& counter(std::string_view domain, std::string_view rule, std::string_view outcome) {
    return metrics_.counter(kDecisionsMetric, {{"domain", std::string(domain)},
                                               {"rule", std::string(rule)},
                                               {"outcome", std::string(outcome)}});
  }

  RulesProvider rules_;
  StorePtr store_;
  Metrics& metrics_;
  Counter& unknown_domain_;
  RuleSetPtr counted_rules_;  // the snapshot the two maps below point into
  std::unordered_map<const void*, RuleCounters> rule_counters_;
  std::unordered_map<const void*, RuleCounters> request_counters_;  // by domain
  std::unordered_map<const DomainConfig*, Counter*> no_rule_counters_;
};

}  // namespace

std::string storeKey(std::string_view client_id, std::string_view bucket_key) {
  std::string key;
  key.reserve(client_id.size() + 1 + bucket_key.size());
  appendEscapedKeyPart(key, client_id);
  key += '|';
  key += bucket_key;
  return key;
}

void describeHttpMetrics(Metrics& metrics) {
  metrics.describe(kDecisionsMetric, Metrics::Type::kCounter,
                   "Rate-limit decisions by domain, rule and outcome (allowed, denied, "
                   "shadow_denied, no_rule, unknown_domain).");
  metrics.describe("http_request_duration_seconds", Metrics::Type::kHistogram,
                   "Time from a complete request to its answer being ready, by endpoint "
                   "(excludes leaky-bucket shaping holds).",
                   latencyBuckets());
}

std::unique_ptr<DecisionService> makeDecisionService(RulesProvider rules, StorePtr store,
                                                     Metrics& metrics) {
  return std::make_unique<DecisionServiceImpl>(std::move(rules), std::move(store), metrics);
}

}  // namespace sluice::http
