#include <string>
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
/// branches.
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
    const std::string& domain = decision.domain->domain;
    const ReservationOutcome& step = decision.reservation;
    for (const DescriptorStatus& descriptor : decision.descriptors) {
      for (const LimitStatus& limit : descriptor.limits) {
        if (limit.unlimited) {
          continue;
        }
        const std::string rule = limit.from_request ? std::string("_request") : limit.name;
        if (limit.holds_expired > 0) {
          metrics_.counter(kSettlements, {{"domain", domain}, {"rule", rule}, {"how", "expired"}})
              .inc(limit.holds_expired);
          metrics_.gauge(kHolds, {{"domain", domain}, {"rule", rule}})
              .add(-static_cast<double>(limit.holds_expired));
        }
        countStep(request, step, domain, rule);
      }
    }
  }

 private:
  void countStep(const DecisionRequest& request, const ReservationOutcome& step,
                 const std::string& domain, const std::string& rule) {
    switch (step.status) {
      case HoldStatus::kReserved:
        metrics_
            .counter(kReservations, {{"domain", domain}, {"rule", rule}, {"outcome", "reserved"}})
            .inc();
        metrics_.counter(kReservedAmount, {{"domain", domain}, {"rule", rule}})
            .inc(static_cast<std::uint64_t>(request.hits));
        metrics_.gauge(kHolds, {{"domain", domain}, {"rule", rule}}).add(1);
        return;
      case HoldStatus::kDenied:
      case HoldStatus::kFull:
        metrics_
            .counter(kReservations,
                     {{"domain", domain},
                      {"rule", rule},
                      {"outcome", step.status == HoldStatus::kFull ? "full" : "denied"}})
            .inc();
        return;
      case HoldStatus::kCommitted:
      case HoldStatus::kReleased:
        metrics_
            .counter(kSettlements, {{"domain", domain},
                                    {"rule", rule},
                                    {"how", std::string(holdStatusName(step.status))}})
            .inc();
        metrics_.gauge(kHolds, {{"domain", domain}, {"rule", rule}}).add(-1);
        if (step.status == HoldStatus::kCommitted) {
          metrics_.histogram(kDifference, {{"domain", domain}, {"rule", rule}})
              .observe(static_cast<double>(request.hits - step.reserved));
        }
        return;
      case HoldStatus::kLate:
        metrics_.counter(kSettlements, {{"domain", domain}, {"rule", rule}, {"how", "late"}}).inc();
        return;
      case HoldStatus::kNone:
      case HoldStatus::kSettled:
      case HoldStatus::kExpired:
      case HoldStatus::kUnknown:
        return;
    }
  }

  Metrics& metrics_;
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
