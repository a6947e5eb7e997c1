#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/redis_server.hpp"

namespace sluice::test {

/// A real Redis Cluster on loopback: `masters` redis-servers with `--cluster-enabled yes`
/// (each with its own temp dir and nodes.conf, node timeout 1 s) plus `replicas_per_master`
/// replicas each, joined with `redis-cli --cluster create`. The constructor waits until
/// every node says cluster_state:ok (throws std::runtime_error otherwise); the destructor
/// kills every server and removes their directories, whatever the test did.
class RedisCluster {
 public:
  /// With a `password`, every node requires it (requirepass, and masterauth for replicas).
  RedisCluster(int masters, int replicas_per_master, const std::string& password = "");
  ~RedisCluster() = default;
  RedisCluster(const RedisCluster&) = delete;
  RedisCluster& operator=(const RedisCluster&) = delete;

  std::vector<std::unique_ptr<RedisServer>>& nodes() { return nodes_; }
  /// redis://127.0.0.1:<port of node i>
  std::string url(std::size_t i) const;
  RedisServer& byPort(int port);
  /// CLUSTER MYID of a running node.
  std::string nodeId(RedisServer& node);

  /// The port of the master that serves `slot`, as a running node reports it.
  int ownerOf(int slot);
  /// The ports of the masters (as a running node reports them), sorted.
  std::vector<int> masterPorts();
  /// A running replica of the master on `master_port` whose link is up; -1 when none.
  int replicaOf(int master_port);
  /// Waits until every write the master on `master_port` has accepted so far (any client's)
  /// has reached its replica on `replica_port`: the replica's processed replication offset
  /// catches up with the master's. False at `timeout`. (WAIT is no substitute: it waits for
  /// the writes of the connection that sends it, and returns at once on a fresh one.)
  bool waitReplicated(int master_port, int replica_port, std::chrono::milliseconds timeout);
  /// Waits until every running node reports cluster_state:ok and names the same owner for
  /// `slot` (pass -1 to skip that check), which must be the node on `owner` when given.
  void waitOk(std::chrono::milliseconds timeout, int slot = -1, int owner = -1);

  /// Moves `slot` the way redis-cli --cluster reshard does, in two halves so that a test can
  /// act in between: begin() marks it IMPORTING on `to` and MIGRATING on `from` and moves
  /// its keys (requests to `from` now get ASK); finish() assigns it to `to` on every master
  /// (requests to `from` now get MOVED).
  void beginSlotMigration(int slot, RedisServer& from, RedisServer& to);
  void finishSlotMigration(int slot, RedisServer& to);

 private:
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace sluice::test
