// Rules files (ops write them, reload reads them while serving): loadRulesFromStrings
// (src/rules/loader.cpp, limit_parser.cpp), then what runs on every loaded RuleSet: rulesToJson
// (GET /rules), matchRequest on descriptors built from the rules themselves, and the limiter on
// every matched limit. A NUL byte in the input starts another file, so cross-file checks (duplicate
// domains) are reached too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_check.hpp"
#include "sluice/limiter/limiter.hpp"
#include "sluice/rules/rules.hpp"

namespace {

constexpr std::size_t kMaxFiles = 4;
constexpr std::size_t kMaxProbes = 256;
constexpr sluice::Micros kNow = 1'700'000'000'000'000;

// One request descriptor per node path, with a concrete value for each wildcard.
void collectProbes(const std::vector<sluice::DescriptorNode>& nodes, sluice::Descriptor& path,
                   std::vector<sluice::Descriptor>& probes) {
  for (const auto& node : nodes) {
    if (probes.size() >= kMaxProbes) {
      return;
    }
    std::string value = node.value.value_or("any");
    for (char& ch : value) {
      if (ch == '*') {
        ch = 'x';
      }
    }
    path.push_back(sluice::Entry{node.key, value});
    probes.push_back(path);
    collectProbes(node.children, path, probes);
    path.pop_back();
  }
}

void checkLimit(const sluice::RateLimit& limit) {
  SLUICE_FUZZ_CHECK(!limit.name.empty());
  SLUICE_FUZZ_CHECK(!limit.limit_id.empty());
  if (limit.unlimited) {
    return;
  }
  SLUICE_FUZZ_CHECK(limit.params.window_us > 0);
  SLUICE_FUZZ_CHECK(limit.params.limit >= 0);
  for (std::int64_t cost : {std::int64_t{0}, std::int64_t{1}, std::int64_t{1'000'000'000}}) {
    const sluice::Evaluation first = sluice::evaluate(limit.params, {}, kNow, cost);
    SLUICE_FUZZ_CHECK(first.outcome.remaining >= 0);
    const sluice::Evaluation second = sluice::evaluate(limit.params, first.next, kNow, cost);
    SLUICE_FUZZ_CHECK(second.outcome.remaining >= 0);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> files;
  std::size_t start = 0;
  while (files.size() < kMaxFiles) {
    const std::size_t end = input.find('\0', start);
    files.emplace_back("rules" + std::to_string(files.size()) + ".yaml",
                       std::string(input.substr(start, end - start)));
    if (end == std::string_view::npos) {
      break;
    }
    start = end + 1;
  }

  const sluice::LoadResult result = sluice::loadRulesFromStrings(files);
  SLUICE_FUZZ_CHECK((result.rules == nullptr) != result.errors.empty());
  for (const auto& error : result.errors) {
    SLUICE_FUZZ_CHECK(!error.message.empty());
    SLUICE_FUZZ_CHECK(!error.toString().empty());
  }
  if (!result.rules) {
    return 0;
  }
  const sluice::RuleSet& rules = *result.rules;
  SLUICE_FUZZ_CHECK(!sluice::rulesToJson(rules).empty());
  for (const auto& [name, domain] : rules.domains) {
    SLUICE_FUZZ_CHECK(rules.findDomain(name) == &domain);
    for (const auto& limit : domain.domain_limits) {
      checkLimit(limit);
    }
    std::vector<sluice::Descriptor> probes;
    sluice::Descriptor path;
    collectProbes(domain.descriptors, path, probes);
    for (const auto& probe : probes) {
      const sluice::RequestMatch match = sluice::matchRequest(domain, {probe});
      SLUICE_FUZZ_CHECK(match.descriptors.size() == 1);
      for (const auto& matched : match.descriptors.front().limits) {
        SLUICE_FUZZ_CHECK(matched.limit != nullptr);
        SLUICE_FUZZ_CHECK(!matched.bucket_key.empty());
        checkLimit(*matched.limit);
      }
    }
    const sluice::RequestMatch domain_match = sluice::matchRequest(domain, {});
    for (const auto& descriptor : domain_match.descriptors) {
      for (const auto& matched : descriptor.limits) {
        checkLimit(*matched.limit);
      }
    }
  }
  return 0;
}
