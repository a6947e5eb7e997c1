// A request body all the way to the answer, as POST /shouldAllowRequest and POST /json
// serve it: parse, match against the example rules, decide on the memory store, encode
// the JSON and the rate-limit headers. Bodies that parse are decided twice per endpoint, so
// the second answer sees the state the first one left.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/decision_codec.hpp"
#include "sluice/common/clock.hpp"
#include "sluice/common/metrics.hpp"
#include "sluice/decision/decision_service.hpp"
#include "sluice/rules/rules.hpp"
#include "sluice/store/memory_store.hpp"

namespace {

// The shapes of config/rules/: every algorithm, nesting, wildcards, shadow, unlimited.
constexpr const char* kRules = R"(domain: fuzz
rate_limit: {name: per_client, unit: second, requests_per_unit: 5}
descriptors:
  - key: user
    descriptors:
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 60}
      - key: path
        value: /v1/search
        rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window_counter}
      - key: path
        value: /healthz
        rate_limit: {unlimited: true}
  - key: path
    value: /v1/export/*
    share_threshold: true
    metadata: {team: data}
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: token_bucket, burst: 20}
  - key: upload
    value: large
    rate_limit: {unit: second, unit_multiplier: 30, requests_per_unit: 10,
                 algorithm: leaky_bucket, burst: 5, shape: true}
  - key: plan
    value: free
    rate_limit: {unit: day, requests_per_unit: 1, algorithm: token_bucket}
  - key: auth_type
    value: reset
    shadow_mode: true
    rate_limits:
      - {name: reset_log, unit: hour, requests_per_unit: 3, algorithm: sliding_window_log,
         min_interval: 10s}
      - {name: reset_count, unit: day, requests_per_unit: 0, count_rejected: true}
)";

struct Pipeline {
  Pipeline() {
    sluice::LoadResult loaded = sluice::loadRulesFromStrings({{"fuzz.yaml", kRules}});
    SLUICE_FUZZ_CHECK(loaded.rules != nullptr);
    rules = loaded.rules;
    sluice::MemoryStoreOptions options;
    options.max_keys = 4096;
    sluice::DecisionServiceParts parts;
    parts.rules = [this] { return rules; };
    parts.store = sluice::makeMemoryStore(options, clock, metrics);
    service = sluice::makeDecisionService(std::move(parts));
  }

  /// The decision, or nullopt for a request the service refuses (descriptors with different
  /// hits: a 400). The memory store itself never fails and always answers inline.
  std::optional<sluice::Decision> decide(const sluice::DecisionRequest& request) {
    std::optional<sluice::Decision> result;
    bool answered = false;
    service->decide(
        sluice::DecisionRequest(request), [&](sluice::Result<sluice::Decision> decision) {
          answered = true;
          if (!decision) {
            SLUICE_FUZZ_CHECK(decision.error().kind == sluice::ErrorKind::kInvalidArgument);
            return;
          }
          result = std::move(*decision);
        });
    SLUICE_FUZZ_CHECK(answered);
    return result;
  }

  sluice::ManualClock clock;
  sluice::Metrics metrics;
  sluice::RuleSetPtr rules;
  std::unique_ptr<sluice::DecisionService> service;
};

void checkResponse(const sluice::http::Response& response) {
  SLUICE_FUZZ_CHECK(response.status == 200 || response.status == 429);
  SLUICE_FUZZ_CHECK(!response.body.empty());
  SLUICE_FUZZ_CHECK(response.hold.count() >= 0);
  for (const auto& header : response.headers) {
    SLUICE_FUZZ_CHECK(!header.name.empty());
    // A header value with CR or LF would let a client split the response.
    SLUICE_FUZZ_CHECK(header.value.find_first_of("\r\n") == std::string::npos);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static Pipeline* pipeline = new Pipeline();
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  if (auto request = sluice::http::parseDecisionRequest(body, "fuzz")) {
    for (int round = 0; round < 2; ++round) {
      if (const auto decision = pipeline->decide(*request)) {
        checkResponse(sluice::http::decisionResponse(*request, *decision));
        SLUICE_FUZZ_CHECK(sluice::http::shapingDelay(*decision) >= 0);
      }
    }
  }
  if (auto request = sluice::http::parseEnvoyRequest(body)) {
    for (int round = 0; round < 2; ++round) {
      if (const auto decision = pipeline->decide(*request)) {
        checkResponse(sluice::http::envoyResponse(*decision));
      }
    }
  }
  pipeline->clock.advance(std::chrono::milliseconds(size % 1000));
  return 0;
}
