#pragma once

#include <cstddef>
#include <vector>

#include "sluice/common/result.hpp"
#include "sluice/store/store.hpp"
#include "store/redis/redis_connection.hpp"

/// The request script's reply (99_evaluate.lua): one request's values read into a
/// StoreResponse, and a batch's reply handed out to its requests. Private to the Redis store.
namespace sluice::redis {

/// Values per limit in a request's reply: allowed, remaining, reset, retry, delay, and the
/// never slot (readNeverSlot).
inline constexpr int kRepliesPerLimit = 6;

/// One request's reply for its `n` limits, `sketches` of them sketches: the verdict, each
/// limit's outcome, then two integers per sketch (its window's charged total and saturated
/// counters, read by the caller), the reservation tail when the request has holds, and
/// last the applied runtime overrides when there are any. A reply of another shape is a
/// protocol error. The response comes from takeSpareStoreResponse() (the caller recycles it).
Result<StoreResponse> parseScriptReply(const Reply& reply, std::size_t n, std::size_t sketches);

/// Hands each request of a batch its own reply (or its own error, what its own EVALSHA
/// would have answered); a failed call fails every request once.
void splitBatchReply(std::vector<ReplyHandler>& handlers, Result<Reply>& reply);

}  // namespace sluice::redis
