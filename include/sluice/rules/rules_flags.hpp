#pragma once

#include <string>

#include "sluice/common/flag_registry.hpp"

namespace sluice {

/// Where the rules come from and how requests meet them (the "Rules" flags of --help).
struct RulesSettings {
  std::string rules = "config/rules";  ///< --rules: a rules file or a directory of *.yaml
  bool rules_given = false;            ///< --rules was set by some source (not the default)
  /// --merge-domain-config: rules files that share a domain are merged (envoyproxy/ratelimit's
  /// MERGE_DOMAIN_CONFIG); off, a domain in two files is an error.
  bool merge_domain_config = false;
  std::string default_domain = "default";  ///< --default-domain: of requests that name none
};

/// Adds --rules, --merge-domain-config and --default-domain, bound to `settings`.
void addRulesFlags(FlagRegistry& registry, RulesSettings& settings);

}  // namespace sluice
