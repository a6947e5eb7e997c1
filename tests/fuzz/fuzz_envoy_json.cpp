// POST /json bodies (envoyproxy/ratelimit's RateLimitRequest in proto3 JSON):
// http::parseEnvoyRequest (src/http/decision_codec.cpp), and differentially its fast path
// against the complete parser: wherever the fast path answers, the complete parser must
// accept the same body and produce the same request.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.hpp"
#include "http/decision_codec.hpp"
#include "http/fast_decision_parser.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  if (auto fast = sluice::http::parseEnvoyRequestFast(body)) {
    auto complete = sluice::http::parseEnvoyRequestComplete(body);
    SLUICE_FUZZ_CHECK(complete.ok());
    SLUICE_FUZZ_CHECK(fast->domain == complete->domain);
    SLUICE_FUZZ_CHECK(fast->client_id == complete->client_id);
    SLUICE_FUZZ_CHECK(fast->hits == complete->hits);
    SLUICE_FUZZ_CHECK(fast->descriptor_hits == complete->descriptor_hits);
    SLUICE_FUZZ_CHECK(fast->descriptor_limits.empty() && complete->descriptor_limits.empty());
    SLUICE_FUZZ_CHECK(fast->descriptors.size() == complete->descriptors.size());
    for (std::size_t d = 0; d < fast->descriptors.size(); ++d) {
      SLUICE_FUZZ_CHECK(fast->descriptors[d].size() == complete->descriptors[d].size());
      for (std::size_t e = 0; e < fast->descriptors[d].size(); ++e) {
        SLUICE_FUZZ_CHECK(fast->descriptors[d][e].key == complete->descriptors[d][e].key);
        SLUICE_FUZZ_CHECK(fast->descriptors[d][e].value == complete->descriptors[d][e].value);
      }
    }
  }
  auto parsed = sluice::http::parseEnvoyRequest(body);
  if (!parsed) {
    SLUICE_FUZZ_CHECK(parsed.error().kind == sluice::ErrorKind::kInvalidArgument);
    SLUICE_FUZZ_CHECK(!parsed.error().message.empty());
    return 0;
  }
  const sluice::DecisionRequest& request = *parsed;
  SLUICE_FUZZ_CHECK(!request.domain.empty());
  SLUICE_FUZZ_CHECK(!request.descriptors.empty());
  SLUICE_FUZZ_CHECK(request.descriptors.size() <= sluice::kMaxDescriptors);
  SLUICE_FUZZ_CHECK(request.hits >= 1 && request.hits <= sluice::kMaxHits);
  SLUICE_FUZZ_CHECK(request.descriptor_hits.empty() ||
                    request.descriptor_hits.size() == request.descriptors.size());
  for (const auto& descriptor : request.descriptors) {
    // An empty descriptor ({}, "entries": [] or []) is valid: it matches no rule
    // (DecisionCodecTest.SluiceRequestsAcceptMissingValuesAndEmptyDescriptorsButNoLimits).
    SLUICE_FUZZ_CHECK(descriptor.size() <= sluice::kMaxEntries);
    for (const auto& entry : descriptor) {
      SLUICE_FUZZ_CHECK(!entry.key.empty());
    }
  }
  return 0;
}
