#pragma once

#include <string_view>

#include "sluice/common/metrics.hpp"
#include "sluice/common/result.hpp"
#include "sluice/store/store.hpp"

/// What a request gets when the store that should decide it fails (`--failure-mode`), for
/// any store that can fail (Redis and Redis Cluster today), with the memory store as the
/// local fallback (docs/architecture.md, "Stores, as each I/O thread holds them").
namespace sluice {

enum class FailureMode { kOpen, kClosed, kLocal };

/// "open", "closed", "local".
std::string_view failureModeName(FailureMode mode);
/// Parses the flag spelling; kInvalidArgument when unknown.
Result<FailureMode> parseFailureMode(std::string_view text);

/// Wraps a primary store with the failure mode: `open` allows (degraded), `closed` fails,
/// `local` answers from `fallback` (the memory store) until the primary is healthy again.
/// Transitions are logged once and counted. `local` answers from the fallback while the
/// primary's health() is kFailing and for each request the primary failed; a healthy
/// primary is asked again at once (the Redis store reconnects within
/// max_reconnect_backoff, 0.5 s by default). While the primary is kConnecting (start-up)
/// every request goes to it and waits for its connection: no failure mode is involved.
/// healthy() is the readiness: `closed` while the primary is kHealthy, `open` and `local`
/// once it is no longer kConnecting; health() is the primary's. Metrics: store_errors_total{kind},
/// store_failure_mode_activations_total{mode}, store_degraded_decisions_total{mode}. Thread-safe as
/// far as the wrapped stores are.
StorePtr makeFailoverStore(StorePtr primary, StorePtr fallback, FailureMode mode, Metrics& metrics);

}  // namespace sluice
