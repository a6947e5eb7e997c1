#include "sluice/rules/rules_flags.hpp"

namespace sluice {

// Declarative table: the flags, one entry each (tests/tools/check_sizes.py).
void addRulesFlags(FlagRegistry& registry, RulesSettings& settings) {
  namespace set = flag_setters;
  registry.section("Rules");
  registry.add({.name = "rules",
                .metavar = "PATH",
                .help = "a rules file or a directory of *.yaml (default config/rules)",
                .set =
                    [&settings, text = set::text(settings.rules)](std::string_view value) {
                      settings.rules_given = true;
                      return text(value);
                    },
                .envoy_variables = "RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY"});
  registry.add({.name = "merge-domain-config",
                .metavar = "",
                .help = "merge rules files that share a domain (envoyproxy/ratelimit's "
                        "MERGE_DOMAIN_CONFIG; default off: a domain in two files is an error); "
                        "SLUICE_MERGE_DOMAIN_CONFIG=true|false",
                .set = set::toggle(settings.merge_domain_config),
                .envoy_variables = "MERGE_DOMAIN_CONFIG"});
  registry.add({.name = "default-domain",
                .metavar = "NAME",
                .help = "domain of requests that name none (default \"default\")",
                .set = set::text(settings.default_domain)});
}

}  // namespace sluice
