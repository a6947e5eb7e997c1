#include "app/observed_decisions.hpp"

#include <unordered_map>
#include <utility>
#include <vector>

namespace sluice::app {
namespace {

constexpr std::string_view kNearLimitMetric = "near_limit_total";
constexpr std::string_view kDescriptorMetric = "descriptor_decisions_total";
/// An allowed limit is near its limit when at most 1/kNearLimitDivisor of it remains.
constexpr std::int64_t kNearLimitDivisor = 5;

bool nodeWantsValues(const DescriptorNode& node) {
  return node.detailed_metric || node.value_to_metric;
}

bool treeWantsValues(const std::vector<DescriptorNode>& nodes) {
  for (const DescriptorNode& node : nodes) {
    if (nodeWantsValues(node) || treeWantsValues(node.children)) {
      return true;
    }
  }
  return false;
}

bool rulesWantValues(const RuleSet& rules) {
  for (const auto& [name, domain] : rules.domains) {
    if (treeWantsValues(domain.descriptors)) {
      return true;
    }
  }
  return false;
}

std::string_view limitOutcome(const LimitStatus& limit) {
  if (limit.unlimited || limit.outcome.allowed) {
    return "allowed";
  }
  return limit.shadow ? "shadow_denied" : "denied";
}

class ObservedDecisionService final : public DecisionService {
 public:
  ObservedDecisionService(std::unique_ptr<DecisionService> inner, DecisionObservers observers)
      : inner_(std::move(inner)), observers_(observers) {
    describeDecisionObserverMetrics(*observers_.metrics);
  }

  void decide(DecisionRequest request, Callback done) override {
    const Micros started = observers_.clock->nowMicros();
    // The whole request is needed afterwards only for the log and the events; value labels
    // read the descriptors the service hands back in Decision::request_descriptors.
    std::shared_ptr<const DecisionRequest> kept;
    if (observers_.access_log != nullptr || observers_.events != nullptr) {
      kept = std::make_shared<const DecisionRequest>(request);
    }
    std::string domain = request.domain;
    // The client of a denial, for GET /limits/top (ids fit the small-string buffer mostly).
    std::string client = observers_.top != nullptr && !kept ? request.client_id : std::string();
    inner_->decide(std::move(request),
                   [this, started, kept, domain = std::move(domain), client = std::move(client),
                    done = std::move(done)](Result<Decision> decision) mutable {
                     observe(domain, kept.get(), decision, started);
                     if (decision && !decision->allowed && observers_.top != nullptr) {
                       recordDenials(domain, kept ? kept->client_id : client, *decision, started);
                     }
                     done(std::move(decision));
                   });
  }

 private:
  void observe(const std::string& domain, const DecisionRequest* request,
               const Result<Decision>& decision, Micros started) {
    if (decision) {
      countNearLimit(domain, *decision);
      countDescriptorValues(domain, *decision);
      if (request != nullptr && observers_.events != nullptr && !decision->allowed) {
        publishDenial(*request, *decision);
      }
    }
    if (request != nullptr && observers_.access_log != nullptr) {
      const Micros now = observers_.clock->nowMicros();
      AccessRecord record;
      record.domain = request->domain;
      record.client = request->client_id;
      if (decision) {
        const LimitStatus* binding = decision->binding();
        record.rule = binding != nullptr ? std::string_view(binding->name) : std::string_view();
        record.decision = decisionWord(*decision);
        record.degraded = decision->degraded;
      } else {
        record.decision = "error";
      }
      record.latency_us = now - started;
      observers_.access_log->write(record);
    }
  }

  /// `now`: when the request arrived (the window it falls in; saves a clock read).
  void recordDenials(const std::string& domain, const std::string& client, const Decision& decision,
                     Micros now) {
    for (const DescriptorStatus& descriptor : decision.descriptors) {
      for (const LimitStatus& limit : descriptor.limits) {
        if (!limit.unlimited && !limit.shadow && !limit.outcome.allowed) {
          observers_.top->record(domain, limit.name, client, now);
        }
      }
    }
  }

  /// Unknown domains are skipped: the DecisionService counts them under "_unknown" and
  /// their names must not grow the label set.
  void countNearLimit(const std::string& domain, const Decision& decision) {
    if (!decision.domain_known) {
      return;
    }
    for (const DescriptorStatus& descriptor : decision.descriptors) {
      for (const LimitStatus& limit : descriptor.limits) {
        if (limit.unlimited || !limit.outcome.allowed || limit.limit <= 0) {
          continue;
        }
        if (limit.outcome.remaining * kNearLimitDivisor <= limit.limit) {
          nearLimitCounter(domain, limit.name).inc();
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
      Counter& counter =
          observers_.metrics->counter(kNearLimitMetric, {{"domain", domain}, {"rule", rule}});
      it = near_limit_.emplace(std::move(key), &counter).first;
    }
    return *it->second;
  }

  void countDescriptorValues(const std::string& domain_name, const Decision& decision) {
    const std::vector<Descriptor>& descriptors = decision.request_descriptors;
    if (!decision.domain_known || !decision.rules || descriptors.empty()) {
      return;
    }
    if (decision.rules != flag_cache_rules_) {
      flag_cache_rules_ = decision.rules;
      flag_cache_value_ = rulesWantValues(*decision.rules);
    }
    if (!flag_cache_value_) {
      return;
    }
    const DomainConfig* domain = decision.rules->findDomain(domain_name);
    if (domain == nullptr) {
      return;
    }
    // Matching again is the price of value labels, paid only when a rule asks for them.
    RequestMatch match = matchRequest(*domain, descriptors);
    const std::size_t n = std::min(match.descriptors.size(), decision.descriptors.size());
    for (std::size_t d = 0; d < n && d < descriptors.size(); ++d) {
      const DescriptorNode* node = match.descriptors[d].node;
      if (node == nullptr || !nodeWantsValues(*node)) {
        continue;
      }
      const std::string value = describeDescriptor(descriptors[d]);
      for (const LimitStatus& limit : decision.descriptors[d].limits) {
        observers_.metrics
            ->counter(kDescriptorMetric, {{"domain", domain_name},
                                          {"rule", limit.name},
                                          {"descriptor", value},
                                          {"outcome", std::string(limitOutcome(limit))}})
            .inc();
      }
    }
  }

  void publishDenial(const DecisionRequest& request, const Decision& decision) {
    const LimitStatus* binding = decision.binding();
    DenialEvent event;
    event.time_us = observers_.clock->nowMicros();
    event.domain = request.domain;
    event.client = request.client_id;
    if (binding != nullptr) {
      event.rule = binding->name;
      for (std::size_t d = 0; d < decision.descriptors.size(); ++d) {
        for (const LimitStatus& limit : decision.descriptors[d].limits) {
          if (&limit == binding && d < request.descriptors.size()) {
            event.descriptor = describeDescriptor(request.descriptors[d]);
          }
        }
      }
    }
    observers_.events->publish(std::move(event));
  }

  std::unique_ptr<DecisionService> inner_;
  DecisionObservers observers_;
  std::unordered_map<std::string, Counter*> near_limit_;
  RuleSetPtr flag_cache_rules_;  // the last snapshot seen, and whether it wants value labels
  bool flag_cache_value_ = false;
};

}  // namespace

std::string_view decisionWord(const Decision& decision) {
  if (!decision.domain_known) {
    return "unknown_domain";
  }
  if (!decision.allowed) {
    return "denied";
  }
  bool matched = false;
  bool shadow_denied = false;
  for (const DescriptorStatus& descriptor : decision.descriptors) {
    matched = matched || descriptor.matched;
    for (const LimitStatus& limit : descriptor.limits) {
      shadow_denied = shadow_denied || (!limit.unlimited && !limit.outcome.allowed);
    }
  }
  if (shadow_denied) {
    return "shadow_denied";
  }
  return matched ? "allowed" : "no_rule";
}

std::string describeDescriptor(const Descriptor& descriptor) {
  std::string out;
  for (const Entry& entry : descriptor) {
    if (!out.empty()) {
      out += ',';
    }
    out += entry.key;
    out += '=';
    out += entry.value;
  }
  return out;
}

void describeDecisionObserverMetrics(Metrics& metrics) {
  metrics.describe(kNearLimitMetric, Metrics::Type::kCounter,
                   "Allowed decisions that left a limit with at most 20% of it remaining, by "
                   "domain and rule.");
  metrics.describe(kDescriptorMetric, Metrics::Type::kCounter,
                   "Decisions by descriptor value, only for rules that set detailed_metric or "
                   "value_to_metric (outcome as in decisions_total).");
}

std::unique_ptr<DecisionService> makeObservedDecisionService(std::unique_ptr<DecisionService> inner,
                                                             DecisionObservers observers) {
  return std::make_unique<ObservedDecisionService>(std::move(inner), observers);
}

}  // namespace sluice::app
