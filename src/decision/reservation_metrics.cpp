#include <string>
#include <unordered_map>
#include <vector>

#include "sluice/decision/decision_service.hpp"

namespace sluice {
namespace {

constexpr std::string_view kReservations = "reservations_total";
constexpr std::string_view kReservedAmount = "reservation_amount_total";
constexpr std::string_view kSettlements = "reservation_settlements_total";
constexpr std::string_view kHolds = "reservation_holds";
constexpr std::string_view kDifference = "reservation_actual_minus_reserved";

/// Reservation metrics by domain and rule (docs/operations.md): one observer per I/O
/// thread. A decision that is no reservation step and found no expired hold costs two
/// branches; a step finds its rule's series by the rule's address, without building label
/// strings (each series is looked up by its labels once per rules snapshot, when first used).
class ReservationMetrics final : public DecisionObserver {
 public:
  explicit ReservationMetrics(Metrics& metrics) : metrics_(metrics) {
    describeReservationMetrics(metrics_);
  }

  void observe(const DecisionRequest& request, const Result<Decision>& result,
               Micros /*started_us*/) override {
    if (!result || (request.reservation.op == HoldOp::kNone && result->holds_expired == 0)) {
      return;
    }
    const Decision& decision = *result;
    if (decision.domain == nullptr) {
      return;
    }
    if (decision.rules != series_rules_) {
      series_rules_ = decision.rules;  // also keeps the addresses below from being reused
      rule_series_.clear();
      request_series_.clear();
      last_rule_ = nullptr;
      last_series_ = nullptr;
    }
    const ReservationOutcome& step = decision.reservation;
    for (const DescriptorStatus& descriptor : decision.descriptors) {
      for (const LimitStatus& limit : descriptor.limits) {
        if (limit.unlimited) {
          continue;
        }
        // Request-side limits are new objects every time: one series per domain.
        RuleSeries& series =
            limit.from_request ? request_series_[decision.domain] : ruleSeries(limit.rule);
        if (series.domain.empty()) {
          series.domain = decision.domain->domain;
          series.rule = limit.from_request ? std::string("_request") : limit.name;
        }
        if (limit.holds_expired > 0) {
          counter(series.expired, kSettlements, series, "how", "expired").inc(limit.holds_expired);
          holds(series).add(-static_cast<double>(limit.holds_expired));
        }
        countStep(request, step, series);
      }
    }
  }

 private:
  /// One rule's series, each found when first used.
  struct RuleSeries {
    std::string domain;
    std::string rule;
    Counter* reserved = nullptr;
    Counter* denied = nullptr;
    Counter* full = nullptr;
    Counter* amount = nullptr;
    Counter* committed = nullptr;
    Counter* released = nullptr;
    Counter* late = nullptr;
    Counter* expired = nullptr;
    Gauge* holds = nullptr;
    Histogram* difference = nullptr;
  };

  /// The series of `rule`; the last one found is kept (a client's steps repeat one rule),
  /// and the map's elements do not move.
  RuleSeries& ruleSeries(const RateLimit* rule) {
    if (rule != last_rule_ || last_series_ == nullptr) {
      last_series_ = &rule_series_[rule];
      last_rule_ = rule;
    }
    return *last_series_;
  }

  /// The counter in `slot`, found (and kept there) when first used.
  Counter& counter(Counter*& slot, std::string_view name, const RuleSeries& series,
                   const char* label, std::string_view value) {
    return slot != nullptr ? *slot : findCounter(slot, name, series, label, value);
  }

  [[gnu::noinline]] Counter& findCounter(Counter*& slot, std::string_view name,
                                         const RuleSeries& series, const char* label,
                                         std::string_view value) {
    Labels labels{{"domain", series.domain}, {"rule", series.rule}};
    if (label != nullptr) {
      labels.emplace_back(label, std::string(value));
    }
    slot = &metrics_.counter(name, labels);
    return *slot;
  }

  Gauge& holds(RuleSeries& series) {
    if (series.holds == nullptr) {
      series.holds = &metrics_.gauge(kHolds, {{"domain", series.domain}, {"rule", series.rule}});
    }
    return *series.holds;
  }

  void countStep(const DecisionRequest& request, const ReservationOutcome& step,
                 RuleSeries& series) {
    switch (step.status) {
      case HoldStatus::kReserved:
        counter(series.reserved, kReservations, series, "outcome", "reserved").inc();
        counter(series.amount, kReservedAmount, series, nullptr, "")
            .inc(static_cast<std::uint64_t>(request.hits));
        holds(series).add(1);
        return;
      case HoldStatus::kDenied:
        counter(series.denied, kReservations, series, "outcome", "denied").inc();
        return;
      case HoldStatus::kFull:
        counter(series.full, kReservations, series, "outcome", "full").inc();
        return;
      case HoldStatus::kCommitted:
        counter(series.committed, kSettlements, series, "how", "committed").inc();
        holds(series).add(-1);
        if (series.difference == nullptr) {
          series.difference =
              &metrics_.histogram(kDifference, {{"domain", series.domain}, {"rule", series.rule}});
        }
        series.difference->observe(static_cast<double>(request.hits - step.reserved));
        return;
      case HoldStatus::kReleased:
        counter(series.released, kSettlements, series, "how", "released").inc();
        holds(series).add(-1);
        return;
      case HoldStatus::kLate:
        counter(series.late, kSettlements, series, "how", "late").inc();
        return;
      case HoldStatus::kNone:
      case HoldStatus::kSettled:
      case HoldStatus::kExpired:
      case HoldStatus::kUnknown:
        return;
    }
  }

  Metrics& metrics_;
  RuleSetPtr series_rules_;
  std::unordered_map<const RateLimit*, RuleSeries> rule_series_;
  std::unordered_map<const DomainConfig*, RuleSeries> request_series_;
  const RateLimit* last_rule_ = nullptr;
  RuleSeries* last_series_ = nullptr;
};

}  // namespace

void describeReservationMetrics(Metrics& metrics) {
  metrics.describe(kReservations, Metrics::Type::kCounter,
                   "Reservations asked, by domain, rule and outcome (reserved, denied, full: the "
                   "bucket holds --max-reservation-holds).");
  metrics.describe(kReservedAmount, Metrics::Type::kCounter,
                   "Amounts held by reservations, by domain and rule.");
  metrics.describe(kSettlements, Metrics::Type::kCounter,
                   "Reservations settled, by domain, rule and how: committed, released, late "
                   "(committed after expiry, charged as a report), expired (unsettled at "
                   "expiry; counted when a request next reads the bucket).");
  metrics.describe(kHolds, Metrics::Type::kGauge,
                   "Reservation holds outstanding as this process saw them (reserved minus "
                   "settled and expired; sum over the sidecars of one store).");
  std::vector<double> bounds;
  for (const double b : {100000.0, 10000.0, 1000.0, 100.0, 10.0, 1.0}) {
    bounds.push_back(-b);
  }
  bounds.push_back(0);
  for (const double b : {1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0}) {
    bounds.push_back(b);
  }
  metrics.describe(kDifference, Metrics::Type::kHistogram,
                   "Actual amount committed minus the amount reserved, by domain and rule "
                   "(negative: the estimate was too high).",
                   bounds);
}

std::unique_ptr<DecisionObserver> makeReservationMetrics(Metrics& metrics) {
  return std::make_unique<ReservationMetrics>(metrics);
}

}  // namespace sluice
