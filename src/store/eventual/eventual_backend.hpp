#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sluice/common/metrics.hpp"
#include "sluice/store/redis_store.hpp"
#include "store/redis/redis_store_internal.hpp"

namespace boost::asio {
class io_context;
}

namespace sluice::eventual {

/// Where the eventual engine and the eventual stores send their script calls: the region's
/// one Redis (`--store redis`: one pipelined connection, outside the store's health group,
/// whose failures the engine counts itself) or its Redis Cluster (`--store redis_cluster`:
/// the cluster router, one connection per master). Started; lives on `io`'s thread.
/// `cluster_seeds` empty: `local` is the one Redis.
std::shared_ptr<redis::RedisBackend> makeBackend(boost::asio::io_context& io,
                                                 const RedisOptions& local,
                                                 const std::vector<RedisOptions>& cluster_seeds,
                                                 Metrics& metrics, const std::string& script);

}  // namespace sluice::eventual
