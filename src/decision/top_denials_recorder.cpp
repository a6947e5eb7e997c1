#include "sluice/decision/decision_service.hpp"

namespace sluice {
namespace {

class TopDenialsRecorder final : public DecisionObserver {
 public:
  explicit TopDenialsRecorder(TopDenials& top) : top_(top) {}

  void observe(const DecisionRequest& request, const Result<Decision>& decision,
               Micros started_us) override {
    if (!decision) {
      return;
    }
    // What the candidates would have denied, whatever the live limits decided.
    for (const CandidateStatus& c : decision->candidates) {
      if (!c.outcome.allowed && !request.refund && request.charge != Charge::kReport) {
        assignBucketIdentity(who_, *decision, c.descriptor);
        top_.record(request.domain, c.rule->name, who_, started_us, true);
      }
    }
    if (decision->allowed) {
      return;
    }
    for (std::size_t d = 0; d < decision->descriptors.size(); ++d) {
      for (const LimitStatus& limit : decision->descriptors[d].limits) {
        if (!limit.unlimited && !limit.shadow && !limit.outcome.allowed) {
          // "Who": the client id, else the entries the bucket is charged to (user=mallory).
          assignBucketIdentity(who_, *decision, d);
          top_.record(request.domain, limit.name, who_, started_us);
        }
      }
    }
  }

 private:
  TopDenials& top_;
  std::string who_;  // this thread's scratch: no allocation once warm
};

}  // namespace

std::unique_ptr<DecisionObserver> makeTopDenialsRecorder(TopDenials& top) {
  return std::make_unique<TopDenialsRecorder>(top);
}

}  // namespace sluice
