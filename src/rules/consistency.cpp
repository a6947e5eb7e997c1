#include "rules/consistency.hpp"

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

namespace sluice::rules_detail {
namespace {

void refuseIn(const std::vector<RateLimit>& limits, const std::string& reason,
              std::vector<RuleError>& errors) {
  for (const RateLimit& limit : limits) {
    if (!limit.unlimited && limit.params.consistency == Consistency::kEventual) {
      errors.push_back(RuleError{limit.location, reason});
    }
  }
}

void refuseIn(const std::vector<DescriptorNode>& nodes, const std::string& reason,
              std::vector<RuleError>& errors) {
  for (const DescriptorNode& node : nodes) {
    refuseIn(node.limits, reason, errors);
    refuseIn(node.children, reason, errors);
  }
}

}  // namespace

std::vector<RuleError> refuseEventualLimits(const RuleSet& rules, const std::string& reason) {
  std::vector<RuleError> errors;
  for (const auto& [name, domain] : rules.domains) {
    refuseIn(domain.domain_limits, reason, errors);
    refuseIn(domain.descriptors, reason, errors);
  }
  return errors;
}

}  // namespace sluice::rules_detail
