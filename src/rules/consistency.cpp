#include "sluice/rules/consistency.hpp"

#include "sluice/limiter/eventual.hpp"

namespace sluice::rules_detail {

std::string_view consistencyName(Consistency consistency) {
  return consistency == Consistency::kEventual ? "eventual" : "strict";
}

std::string applyConsistency(std::string_view text, LimitParams& params) {
  if (text == "strict") {
    params.consistency = Consistency::kStrict;
    return {};
  }
  if (text == "eventual") {
    params.consistency = Consistency::kEventual;
    return {};
  }
  return "unknown consistency '" + std::string(text) + "' (expected strict or eventual)";
}

std::string checkConsistency(const LimitParams& params) {
  if (params.consistency != Consistency::kEventual) {
    return {};
  }
  return eventual::eventualRefusal(params);
}

}  // namespace sluice::rules_detail
