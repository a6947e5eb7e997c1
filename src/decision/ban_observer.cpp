#include <spdlog/spdlog.h>

#include <ctime>
#include <string>
#include <unordered_map>
#include <utility>

#include "sluice/decision/decision_service.hpp"

namespace sluice {
namespace {

constexpr std::string_view kBannedMetric = "banned_total";
constexpr std::string_view kBansMetric = "bans_total";

/// "2026-11-26T09:41:07.250Z" for microseconds since the Unix epoch.
std::string utcText(Micros at_us) {
  const std::time_t seconds = static_cast<std::time_t>(at_us / kMicrosPerSecond);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[40];
  const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  const long millis = static_cast<long>((at_us % kMicrosPerSecond) / kMicrosPerMilli);
  return std::string(text, n) + "." + std::to_string(1000 + millis).substr(1) + "Z";
}

class BanObserver final : public DecisionObserver {
 public:
  BanObserver(Metrics& metrics, const Clock& clock) : metrics_(metrics), clock_(clock) {
    metrics_.describe(kBannedMetric, Metrics::Type::kCounter,
                      "Answers refused by a penalty box (docs/bans.md), by domain and rule; "
                      "they count as denied in decisions_total too.");
    metrics_.describe(kBansMetric, Metrics::Type::kCounter,
                      "Bans started by a penalty box (docs/bans.md), by domain and rule.");
  }

  void observe(const DecisionRequest& request, const Result<Decision>& result,
               Micros /*started_us*/) override {
    if (!result || result->domain == nullptr) {
      return;
    }
    const Decision& decision = *result;
    if (decision.rules != counted_rules_) {
      counted_rules_ = decision.rules;  // keeps the addresses below from being reused
      counters_.clear();
    }
    for (std::size_t d = 0; d < decision.descriptors.size(); ++d) {
      for (const LimitStatus& limit : decision.descriptors[d].limits) {
        if (!limit.outcome.banned || limit.rule == nullptr || limit.from_request) {
          continue;
        }
        Counters& c = countersOf(decision.domain->domain, limit);
        if (!limit.shadow) {
          c.banned->inc();
        }
        if (limit.outcome.ban_step > 0) {
          c.bans->inc();
          logStart(request, decision, d, limit);
        }
      }
    }
  }

 private:
  struct Counters {
    Counter* banned = nullptr;
    Counter* bans = nullptr;
  };

  Counters& countersOf(const std::string& domain, const LimitStatus& limit) {
    auto [it, inserted] = counters_.try_emplace(limit.rule);
    if (inserted) {
      const Labels labels{{"domain", domain}, {"rule", limit.name}};
      it->second = {&metrics_.counter(kBannedMetric, labels),
                    &metrics_.counter(kBansMetric, labels)};
    }
    return it->second;
  }

  void logStart(const DecisionRequest& request, const Decision& decision, std::size_t d,
                const LimitStatus& limit) {
    assignBucketIdentity(client_, decision, d);
    const Micros now = decision.decided_at_us > 0 ? decision.decided_at_us : clock_.nowMicros();
    const Micros length = limit.outcome.retry_after_us;
    spdlog::warn(
        "ban started: domain={} rule={} client={} descriptor={} step={} for={}s until={}{}",
        request.domain, limit.name, client_.empty() ? "-" : client_,
        d < request.descriptors.size() ? describeDescriptor(request.descriptors[d]) : "",
        limit.outcome.ban_step, static_cast<double>(length) / kMicrosPerSecond,
        utcText(now + length), limit.shadow ? " (shadow: not enforced)" : "");
  }

  Metrics& metrics_;
  const Clock& clock_;
  RuleSetPtr counted_rules_;
  std::unordered_map<const RateLimit*, Counters> counters_;
  std::string client_;
};

}  // namespace

std::unique_ptr<DecisionObserver> makeBanObserver(Metrics& metrics, const Clock& clock) {
  return std::make_unique<BanObserver>(metrics, clock);
}

}  // namespace sluice
