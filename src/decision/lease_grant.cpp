#include "decision/lease_grant.hpp"

#include <random>

#include "sluice/decision/lease_id.hpp"

namespace sluice::decision_detail {

LeaseNumber drawLeaseNumber() {
  thread_local std::mt19937_64 generator{[] {
    std::random_device device;
    return (static_cast<std::uint64_t>(device()) << 32) ^ device();
  }()};
  LeaseNumber lease = 0;
  while (lease == 0) {
    lease = static_cast<LeaseNumber>(generator() & static_cast<std::uint64_t>(kMaxLeaseNumber));
  }
  return lease;
}

bool takesLease(const StoreRequest& request, const StoreLimit& limit) {
  return limit.params.algorithm == Algorithm::kConcurrency && !limit.refund &&
         request.charge != Charge::kReport && limit.costOr(request.cost) > 0;
}

std::string takeLeaseEntries(DecisionRequest& request) {
  for (std::size_t d = 0; d < request.descriptors.size(); ++d) {
    if (!request.refunds(d)) {
      continue;
    }
    Descriptor& descriptor = request.descriptors[d];
    for (std::size_t e = 0; e < descriptor.size();) {
      if (descriptor[e].key != kLeaseIdKey) {
        ++e;
        continue;
      }
      auto token = decodeLeaseId(descriptor[e].value);
      if (!token) {
        return "descriptors[" + std::to_string(d) + "].entries[" + std::to_string(e) +
               "]: " + token.error().message;
      }
      request.lease = token->lease;
      descriptor.erase(descriptor.begin() + static_cast<std::ptrdiff_t>(e));
    }
  }
  return {};
}

}  // namespace sluice::decision_detail
