// Helpers shared by the eventual-consistency tests on Redis Cluster
// (eventual_cluster_test.cpp, eventual_regions_cluster_test.cpp).
#pragma once

#include <stdexcept>
#include <string>

#include "store/redis/cluster_slots.hpp"
#include "support/redis_cluster.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {

/// A client id whose counter key (hash tag "id|ev") lives on the master on `port`.
inline std::string clientOn(RedisCluster& cluster, int port, const std::string& prefix) {
  for (int i = 0; i < 10'000; ++i) {
    std::string id = prefix + std::to_string(i);
    if (cluster.ownerOf(redis::keyHashSlot(id + "|ev")) == port) {
      return id;
    }
  }
  throw std::runtime_error("no client id on port " + std::to_string(port));
}

}  // namespace sluice::test
