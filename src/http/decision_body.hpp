#pragma once

#include <cstdint>
#include <string>

#include "sluice/decision/decision.hpp"

/// The JSON body of a decision answer (decisionResponse(), decision_codec.hpp), written
/// without the general writer for the usual decision, and the parts of a limit's JSON that
/// both writers share.
namespace sluice::http {

/// The parts of a limit's JSON that depend only on the limit (its name; its limit, unit,
/// window and algorithm), written once and reused while the thread answers for the same
/// limits, as the prepared header lines (rate_limit_headers.cpp). A few entries per thread
/// (a request's descriptors take turns), compared by value, so a rules reload never reuses
/// a stale one; a miss rewrites the oldest entry in place, without allocating once warm.
struct PreparedLimitJson {
  std::string name;
  std::int64_t limit = -1;
  TimeUnit unit = TimeUnit::kSecond;
  std::int64_t unit_multiplier = -1;
  Micros window_us = -1;
  Algorithm algorithm = Algorithm::kFixedWindow;
  std::string name_json;  // "name", quoted and escaped
  std::string middle;     // ,"limit":L,"unit":"u","unit_multiplier":M,"window_s":W,"algorithm":"a"
};

/// This thread's prepared parts for `limit` (not an unlimited one).
const PreparedLimitJson& preparedLimitJson(const LimitStatus& limit);

/// Appends to `body` the JSON answer decisionResponse() writes without leading fields, when
/// the decision is a usual one: not degraded, its domain known, no lease, no descriptor
/// metadata, every limit an ordinary one (not unlimited, no runtime override, neither leaky
/// bucket nor sketch, not `never`, not banned), and the domain and client id printable ASCII
/// without '"' or '\\' (nothing to escape). Returns false, appending nothing, for any other
/// decision, which the general writer answers. The bytes are the general writer's
/// (tests/unit/http/decision_body_test.cpp); the usual answer skips its per-field steps.
bool writeUsualDecisionBody(std::string& body, const DecisionRequest& request,
                            const Decision& decision);

}  // namespace sluice::http
