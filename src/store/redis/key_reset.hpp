#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sluice/store/store.hpp"
#include "store/redis/redis_store_internal.hpp"

namespace sluice::redis {

/// The admin reset on Redis: removes every key that starts with one of `redis_prefixes`
/// (whole Redis keys, BucketKey::redisKey) from every node that holds keys, with SCAN and
/// UNLINK (one UNLINK per hash slot in a cluster), each command with `timeout`. `done` gets
/// the number of keys removed, or the first error; it runs on the backend's thread. An
/// empty prefix list removes nothing.
void unlinkKeysWithPrefixes(std::shared_ptr<RedisBackend> backend,
                            const std::vector<std::string>& redis_prefixes,
                            std::chrono::milliseconds timeout, Store::ResetCallback done);

}  // namespace sluice::redis
