#include "store/redis/script_reply.hpp"

#include <string>

#include "store/redis/redis_bans.hpp"
#include "store/redis/redis_errors.hpp"
#include "store/redis/redis_overrides.hpp"

namespace sluice::redis {

namespace {

/// The reply's reservation tail (99_evaluate.lua): status, expiry, amount, then one count of
/// expired holds per limit.
constexpr std::size_t kHoldTail = 3;

}  // namespace

Result<StoreResponse> parseScriptReply(const Reply& reply, std::size_t n, std::size_t sketches) {
  const std::size_t expected = 1 + n * kRepliesPerLimit + 2 * sketches;
  // One more element, an array, last, when runtime overrides applied (15_overrides.lua).
  const bool overridden = reply.type == Reply::Type::kArray && reply.elements.size() > expected &&
                          reply.elements.back().type == Reply::Type::kArray;
  const std::size_t size =
      reply.type == Reply::Type::kArray ? reply.elements.size() - (overridden ? 1 : 0) : 0;
  // A request whose buckets have reservation holds (or a reservation step) adds their tail.
  const bool holds = size == expected + kHoldTail + n;
  if (reply.type != Reply::Type::kArray || (size != expected && !holds)) {
    return redisError(FailureSource::kProtocol, 0,
                      "the script returned " + std::to_string(reply.elements.size()) +
                          " values, expected " + std::to_string(expected));
  }
  for (std::size_t i = 0; i < expected; ++i) {
    if (reply.elements[i].type != Reply::Type::kInteger) {
      return redisError(FailureSource::kProtocol, 0, "the script returned a non-integer");
    }
  }
  StoreResponse response = takeSpareStoreResponse();  // the caller recycles it
  response.allowed = reply.elements[0].integer != 0;
  response.outcomes.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto* v = &reply.elements[1 + i * kRepliesPerLimit];
    Outcome o;
    o.allowed = v[0].integer != 0;
    o.remaining = v[1].integer;
    o.reset_after_us = v[2].integer;
    o.retry_after_us = v[3].integer;
    o.delay_us = v[4].integer;
    readNeverSlot(v[5].integer, o);
    response.outcomes.push_back(o);
  }
  if (overridden && !readAppliedOverrides(reply.elements.back(), n, response.overrides)) {
    return redisError(FailureSource::kProtocol, 0, "the script returned malformed overrides");
  }
  if (holds) {
    const auto* tail = &reply.elements[expected];
    const std::int64_t status = tail[0].integer;
    if (status < 0 || status > static_cast<std::int64_t>(HoldStatus::kUnknown)) {
      return redisError(FailureSource::kProtocol, 0,
                        "the script returned an unknown reservation status");
    }
    response.hold_status = static_cast<HoldStatus>(status);
    response.hold_expires_at_us = tail[1].integer;
    response.hold_amount = tail[2].integer;
    for (std::size_t i = 0; i < n; ++i) {
      if (tail[kHoldTail + i].integer > 0) {
        response.holds_expired.resize(n);
        response.holds_expired[i] = static_cast<std::uint32_t>(tail[kHoldTail + i].integer);
      }
    }
  }
  return response;
}

/// Hands each request of a batch its own reply (or its own error, what its own EVALSHA
/// would have answered); a failed call fails every request once.
void splitBatchReply(std::vector<ReplyHandler>& handlers, Result<Reply>& reply) {
  if (reply && (reply->type != Reply::Type::kArray || reply->elements.size() != handlers.size())) {
    reply = redisError(FailureSource::kProtocol, 0,
                       "the batch script returned " + std::to_string(reply->elements.size()) +
                           " replies for " + std::to_string(handlers.size()) + " requests");
  }
  for (std::size_t j = 0; j < handlers.size(); ++j) {
    ReplyHandler& done = handlers[j];
    if (!reply) {
      done(reply.error());
      continue;
    }
    Reply& one = reply->elements[j];
    if (one.type == Reply::Type::kString) {
      done(redisError(FailureSource::kReply, 0, one.str));
    } else {
      done(std::move(one));
    }
  }
}

}  // namespace sluice::redis
