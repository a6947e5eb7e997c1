#include "store/redis/redis_leases.hpp"

#include <utility>
#include <vector>

#include "sluice/rules/bucket_key.hpp"
#include "store/redis/redis_errors.hpp"

namespace sluice::redis {
namespace {

constexpr std::size_t kRepliesPerHold = 4;

Result<LeaseResponse> parseLeaseReply(const Reply& reply, std::size_t holds) {
  if (reply.type != Reply::Type::kArray || reply.elements.size() != holds * kRepliesPerHold) {
    return redisError(FailureSource::kProtocol, 0,
                      "the lease script returned " + std::to_string(reply.elements.size()) +
                          " values, expected " + std::to_string(holds * kRepliesPerHold));
  }
  LeaseResponse response;
  response.holds.reserve(holds);
  for (std::size_t i = 0; i < holds; ++i) {
    const Reply* v = &reply.elements[i * kRepliesPerHold];
    for (std::size_t k = 0; k < kRepliesPerHold; ++k) {
      if (v[k].type != Reply::Type::kInteger) {
        return redisError(FailureSource::kProtocol, 0, "the lease script returned a non-integer");
      }
    }
    LeaseHoldResult hold;
    hold.found = v[0].integer == 1   ? LeaseFound::kHeld
                 : v[0].integer == 2 ? LeaseFound::kExpired
                                     : LeaseFound::kNotHeld;
    hold.expires_at = v[1].integer;
    hold.outcome.remaining = v[2].integer;
    hold.outcome.reset_after_us = v[3].integer;
    response.holds.push_back(hold);
  }
  return response;
}

}  // namespace

void changeLeaseOnRedis(RedisBackend& backend, const std::string& prefix, Micros test_time,
                        const LeaseRequest& request, std::chrono::milliseconds timeout,
                        Store::LeaseCallback done) {
  const std::size_t n = request.holds.size();
  if (n == 0) {
    done(LeaseResponse{});
    return;
  }
  std::vector<std::string> keys;
  std::vector<std::string> args;
  keys.reserve(n);
  args.reserve(4 + 2 * n);
  args.push_back(test_time > 0 ? std::to_string(test_time) : std::string());
  args.emplace_back("lease");
  args.emplace_back(request.op == LeaseOp::kRelease ? "release" : "renew");
  args.push_back(std::to_string(request.lease));
  for (const LeaseHold& hold : request.holds) {
    keys.push_back(BucketKey::redisKey(prefix, hold.key));
    args.push_back(std::to_string(hold.params.limit));
    args.push_back(std::to_string(hold.params.window_us));
  }
  backend.evalScript(std::move(keys), std::move(args), timeout,
                     [n, done = std::move(done)](Result<Reply> reply) {
                       if (!reply) {
                         done(reply.error());
                         return;
                       }
                       done(parseLeaseReply(*reply, n));
                     });
}

}  // namespace sluice::redis
