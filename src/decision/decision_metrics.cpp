#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sluice/decision/decision_service.hpp"

namespace sluice {
namespace {

constexpr std::string_view kDecisionsMetric = "decisions_total";
constexpr std::string_view kNearLimitMetric = "near_limit_total";
constexpr std::string_view kDescriptorMetric = "descriptor_decisions_total";
constexpr std::string_view kCandidateMetric = "candidate_decisions_total";
constexpr std::string_view kUnknownDomainLabel = "_unknown";
/// The rule label of request-side limits (envoy's descriptor `limit`): their generated
/// names carry request values and must not grow the label set.
constexpr std::string_view kRequestLimitLabel = "_request";
/// An allowed limit is near its limit when at most 1/kNearLimitDivisor of it remains.
constexpr std::int64_t kNearLimitDivisor = 5;

bool nodeWantsValues(const DescriptorNode& node) {
  return node.detailed_metric || node.value_to_metric;
}

class DecisionMetrics final : public DecisionObserver {
 public:
  explicit DecisionMetrics(Metrics& metrics)
      : metrics_(metrics), unknown_domain_(counter(kUnknownDomainLabel, "", "unknown_domain")) {
    describeDecisionMetrics(metrics_);
  }

  void observe(const DecisionRequest& request, const Result<Decision>& result,
               Micros /*started_us*/) override {
    if (!result) {
      return;
    }
    const Decision& decision = *result;
    if (request.refund || request.charge == Charge::kReport ||
        request.reservation.op != HoldOp::kNone) {
      // A refund, a report or a reservation step is no decision (docs/refunds.md); the
      // reservation steps have their own metrics (reservation_metrics.cpp).
      return;
    }
    if (decision.domain == nullptr) {
      // Unknown domains are counted under "_unknown": their names must not grow the label set.
      unknown_domain_.inc();
      return;
    }
    countDecisions(*decision.domain, decision);
    countCandidates(*decision.domain, decision);
    countNearLimit(decision.domain->domain, decision);
    countDescriptorValues(decision.domain->domain, request, decision);
  }

 private:
  struct RuleCounters {
    Counter* allowed = nullptr;
    Counter* denied = nullptr;
    Counter* shadow_denied = nullptr;
  };

  // Counts without building label strings: the series of each rule are looked up once per
  // rules snapshot and then found by the rule's address.
  void countDecisions(const DomainConfig& domain, const Decision& decision) {
    if (decision.rules != counted_rules_) {
      counted_rules_ = decision.rules;  // also keeps the addresses below from being reused
      rule_counters_.clear();
      last_rule_ = nullptr;
      last_counters_ = nullptr;
      request_counters_.clear();
      no_rule_counters_.clear();
      candidate_counters_.clear();
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
        // Request-side limits are new objects every time: one series per domain.
        RuleCounters* slot = nullptr;
        bool inserted = false;
        if (l.from_request) {
          auto [it, added] = request_counters_.try_emplace(&domain);
          slot = &it->second;
          inserted = added;
        } else if (l.rule != nullptr && l.rule == last_rule_) {
          slot = last_counters_;  // the usual run of decisions on one rule: no hashing
        } else {
          auto [it, added] = rule_counters_.try_emplace(l.rule);
          slot = &it->second;
          inserted = added;
          last_rule_ = l.rule;
          last_counters_ = slot;
        }
        RuleCounters& c = *slot;
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

  /// What each matched candidate would have decided (countDecisions ran first: the map is
  /// the current snapshot's).
  void countCandidates(const DomainConfig& domain, const Decision& decision) {
    for (const CandidateStatus& c : decision.candidates) {
      auto [it, inserted] = candidate_counters_.try_emplace(c.rule);
      if (inserted) {
        const Labels base{{"domain", domain.domain}, {"rule", c.rule->name}};
        Labels allow = base;
        allow.emplace_back("would", "allow");
        Labels deny = base;
        deny.emplace_back("would", "deny");
        it->second = {&metrics_.counter(kCandidateMetric, allow),
                      &metrics_.counter(kCandidateMetric, deny)};
      }
      (c.outcome.allowed ? it->second.first : it->second.second)->inc();
    }
  }

  void countNearLimit(const std::string& domain, const Decision& decision) {
    for (const DescriptorStatus& descriptor : decision.descriptors) {
      for (const LimitStatus& limit : descriptor.limits) {
        if (limit.unlimited || !limit.outcome.allowed || limit.limit <= 0) {
          continue;
        }
        if (limit.outcome.remaining * kNearLimitDivisor <= limit.limit) {
          nearLimitCounter(domain,
                           limit.from_request ? std::string(kRequestLimitLabel) : limit.name)
              .inc();
        }
      }
    }
  }

  Counter& nearLimitCounter(const std::string& domain, const std::string& rule) {
    std::string key = domain;
    key += '\0';
    key += rule;
    auto it = near_limit_.find(key);
    if (it == near_limit_.end()) {
      Counter& c = metrics_.counter(kNearLimitMetric, {{"domain", domain}, {"rule", rule}});
      it = near_limit_.emplace(std::move(key), &c).first;
    }
    return *it->second;
  }

  /// Value labels, for the nodes that ask for them; the service already matched each
  /// descriptor (DescriptorStatus::node).
  void countDescriptorValues(const std::string& domain, const DecisionRequest& request,
                             const Decision& decision) {
    const std::size_t n = std::min(request.descriptors.size(), decision.descriptors.size());
    for (std::size_t d = 0; d < n; ++d) {
      const DescriptorNode* node = decision.descriptors[d].node;
      if (node != nullptr && nodeWantsValues(*node)) {
        countValues(domain, request.descriptors[d], decision.descriptors[d]);
      }
    }
  }

  /// Out of line: most decisions have no node that asks for values, and their loop above
  /// then needs none of this one's labels on its stack.
  [[gnu::noinline]] void countValues(const std::string& domain, const Descriptor& descriptor,
                                     const DescriptorStatus& status) {
    const std::string value = describeDescriptor(descriptor);
    for (const LimitStatus& limit : status.limits) {
      metrics_
          .counter(kDescriptorMetric, {{"domain", domain},
                                       {"rule", limit.name},
                                       {"descriptor", value},
                                       {"outcome", std::string(limitOutcomeWord(limit))}})
          .inc();
    }
  }

  Counter& counter(std::string_view domain, std::string_view rule, std::string_view outcome) {
    return metrics_.counter(kDecisionsMetric, {{"domain", std::string(domain)},
                                               {"rule", std::string(rule)},
                                               {"outcome", std::string(outcome)}});
  }

  Metrics& metrics_;
  Counter& unknown_domain_;
  RuleSetPtr counted_rules_;  // the snapshot the two maps below point into
  std::unordered_map<const RateLimit*, RuleCounters> rule_counters_;
  // The rule counted last and its series (a node of rule_counters_, which does not move).
  const RateLimit* last_rule_ = nullptr;
  RuleCounters* last_counters_ = nullptr;
  std::unordered_map<const DomainConfig*, RuleCounters> request_counters_;  // by domain
  std::unordered_map<const DomainConfig*, Counter*> no_rule_counters_;
  /// Per candidate limit: its would="allow" and would="deny" series.
  std::unordered_map<const RateLimit*, std::pair<Counter*, Counter*>> candidate_counters_;
  std::unordered_map<std::string, Counter*> near_limit_;
};

class DenialEvents final : public DecisionObserver {
 public:
  DenialEvents(DenialEventSink& sink, const Clock& clock) : sink_(sink), clock_(clock) {}

  void observe(const DecisionRequest& request, const Result<Decision>& result,
               Micros /*started_us*/) override {
    if (!result || result->allowed) {
      return;
    }
    const Decision& decision = *result;
    const LimitStatus* binding = bindingLimit(decision);
    DenialEvent event;
    event.time_us = clock_.nowMicros();
    event.domain = request.domain;
    event.client = request.client_id;
    if (binding != nullptr) {
      event.rule = binding->name;
      for (std::size_t d = 0; d < decision.descriptors.size(); ++d) {
        for (const LimitStatus& limit : decision.descriptors[d].limits) {
          if (&limit == binding && d < request.descriptors.size()) {
            event.descriptor = describeDescriptor(request.descriptors[d]);
            // "Who": the client id, else the entries the bucket is charged to.
            assignBucketIdentity(event.client, decision, d);
          }
        }
      }
    }
    sink_.publish(std::move(event));
  }

 private:
  DenialEventSink& sink_;
  const Clock& clock_;
};

}  // namespace

void describeDecisionMetrics(Metrics& metrics) {
  metrics.describe(kDecisionsMetric, Metrics::Type::kCounter,
                   "Rate-limit decisions by domain, rule and outcome (allowed, denied, "
                   "shadow_denied, no_rule, unknown_domain).");
  metrics.describe(kNearLimitMetric, Metrics::Type::kCounter,
                   "Allowed decisions that left a limit with at most 20% of it remaining, by "
                   "domain and rule.");
  metrics.describe(kCandidateMetric, Metrics::Type::kCounter,
                   "What each candidate limit (docs/what-if.md) would have decided, by domain, "
                   "rule and would (allow, deny); candidates never deny.");
  metrics.describe(kDescriptorMetric, Metrics::Type::kCounter,
                   "Decisions by descriptor value, only for rules that set detailed_metric or "
                   "value_to_metric (outcome as in decisions_total).");
}

std::unique_ptr<DecisionObserver> makeDecisionMetrics(Metrics& metrics) {
  return std::make_unique<DecisionMetrics>(metrics);
}

std::unique_ptr<DecisionObserver> makeDenialEvents(DenialEventSink& sink, const Clock& clock) {
  return std::make_unique<DenialEvents>(sink, clock);
}

}  // namespace sluice
