#pragma once

#include <cstddef>
#include <cstdint>

#include "sluice/common/result.hpp"
#include "sluice/decision/decision.hpp"

/// What every transport's request must be before it reaches the DecisionService: the bounds
/// on one request (so that a single call cannot cost unbounded work) and the one check of a
/// DecisionRequest against them. The transports translate (JSON, the JSON fast path, gRPC's
/// protobuf) and leave the shape to checkDecisionRequest(), so all of them accept the same
/// requests and name a violation with the same words (docs/architecture.md, "Requests").
namespace sluice {

/// Bounds on one request.
struct RequestBounds {
  std::size_t max_descriptors = 64;
  std::size_t max_entries = 32;           ///< per descriptor
  std::size_t max_string_bytes = 1024;    ///< domain, clientId, each key and value
  std::int64_t max_hits = 1'000'000'000;  ///< the request's and each descriptor's
};

inline constexpr RequestBounds kRequestBounds{};
inline constexpr std::size_t kMaxDescriptors = kRequestBounds.max_descriptors;
inline constexpr std::size_t kMaxEntries = kRequestBounds.max_entries;
inline constexpr std::size_t kMaxStringBytes = kRequestBounds.max_string_bytes;
inline constexpr std::int64_t kMaxHits = kRequestBounds.max_hits;

/// Which API a request came through: envoy's (POST /json, gRPC) requires a domain and at
/// least one descriptor and calls the request's cost `hits_addend`; Sluice's own
/// (/shouldAllowRequest, /check) takes the default domain and calls it `hits`.
enum class RequestApi { kSluice, kEnvoy };

/// Checks a translated request: domain (required for kEnvoy), clientId, the number of
/// descriptors (at least one for kEnvoy), of entries, each key (non-empty) and value, the
/// request's and each descriptor's hits. kInvalidArgument whose message starts with the
/// field's path, e.g. `descriptors[0].entries[1].key: must be a non-empty string`. The first
/// violation in that order is reported.
Status checkDecisionRequest(const DecisionRequest& request, RequestApi api,
                            const RequestBounds& bounds = kRequestBounds);

}  // namespace sluice
