#include "sluice/decision/decision_service.hpp"

namespace sluice {
namespace {

class TopDenialsRecorder final : public DecisionObserver {
 public:
  explicit TopDenialsRecorder(TopDenials& top) : top_(top) {}

  void observe(const DecisionRequest& request, const Result<Decision>& decision,
               Micros started_us) override {
    if (!decision || decision->allowed) {
      return;
    }
    for (const DescriptorStatus& descriptor : decision->descriptors) {
      for (const LimitStatus& limit : descriptor.limits) {
        if (!limit.unlimited && !limit.shadow && !limit.outcome.allowed) {
          top_.record(request.domain, limit.name, request.client_id, started_us);
        }
      }
    }
  }

 private:
  TopDenials& top_;
};

}  // namespace

std::unique_ptr<DecisionObserver> makeTopDenialsRecorder(TopDenials& top) {
  return std::make_unique<TopDenialsRecorder>(top);
}

}  // namespace sluice
