#include "support/redis_cluster.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "support/child_process.hpp"
#include "support/sluice_process.hpp"

namespace sluice::test {
namespace {

std::string text(const ReplyPtr& reply) {
  if (!reply || (reply->type != REDIS_REPLY_STRING && reply->type != REDIS_REPLY_STATUS)) {
    return {};
  }
  return std::string(reply->str, reply->len);
}

std::string findRedisCli() {
  for (const char* path : {"/usr/bin/redis-cli", "/usr/local/bin/redis-cli"}) {
    if (std::filesystem::exists(path)) {
      return path;
    }
  }
  throw std::runtime_error("redis-cli not found");
}

void expectOk(const ReplyPtr& reply, const std::string& what) {
  if (!reply || reply->type == REDIS_REPLY_ERROR) {
    throw std::runtime_error(what + ": " +
                             (reply ? std::string(reply->str, reply->len) : "no reply"));
  }
}

}  // namespace

RedisCluster::RedisCluster(int masters, int replicas_per_master, const std::string& password) {
  const int total = masters * (1 + replicas_per_master);
  for (int i = 0; i < total; ++i) {
    RedisServerOptions options;
    options.cluster_bus = true;
    // With replicas, a short node timeout: a killed master is replaced within a few seconds.
    // Without, Redis' default: no replica could take over, and a node that misses its pings
    // for node-timeout (a process starved for a second on a loaded 2-core machine) is
    // declared failed, which takes the whole cluster down (CLUSTERDOWN) until it is back.
    const std::string node_timeout = replicas_per_master > 0 ? "2000" : "15000";
    options.extra_args = {"--cluster-enabled",      "yes",
                          "--cluster-config-file",  "nodes.conf",
                          "--cluster-node-timeout", node_timeout};
    if (!password.empty()) {
      options.password = password;
      options.extra_args.insert(options.extra_args.end(), {"--masterauth", password});
    }
    nodes_.push_back(std::make_unique<RedisServer>(options));
  }
  std::vector<std::string> argv = {findRedisCli(), "--cluster", "create"};
  for (const auto& node : nodes_) {
    argv.push_back("127.0.0.1:" + std::to_string(node->port()));
  }
  argv.insert(argv.end(),
              {"--cluster-replicas", std::to_string(replicas_per_master), "--cluster-yes"});
  if (!password.empty()) {
    argv.insert(argv.end(), {"-a", password, "--no-auth-warning"});
  }
  const std::string dir = makeTempDir("sluice-cluster");
  ChildOptions child;
  child.argv = argv;
  child.output_file = dir + "/create.log";
  std::optional<int> code;
  std::string output;
  {
    ChildProcess create(child);
    code = create.wait(std::chrono::seconds(30));
    output = create.output();
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  if (code != 0) {
    throw std::runtime_error("redis-cli --cluster create failed:\n" + output);
  }
  waitOk(std::chrono::seconds(20));
  if (replicas_per_master > 0) {
    for (int port : masterPorts()) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (replicaOf(port) < 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          throw std::runtime_error("no replica of " + std::to_string(port) + " came up");
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
}

std::string RedisCluster::url(std::size_t i) const {
  return "redis://127.0.0.1:" + std::to_string(nodes_.at(i)->port());
}

RedisServer& RedisCluster::byPort(int port) {
  for (auto& node : nodes_) {
    if (node->port() == port) {
      return *node;
    }
  }
  throw std::runtime_error("no cluster node on port " + std::to_string(port));
}

std::string RedisCluster::nodeId(RedisServer& node) {
  return text(node.command({"CLUSTER", "MYID"}));
}

int RedisCluster::ownerOf(int slot) {
  for (auto& node : nodes_) {
    if (!node->running()) {
      continue;
    }
    ReplyPtr reply = node->command({"CLUSTER", "SLOTS"});
    if (!reply || reply->type != REDIS_REPLY_ARRAY) {
      continue;
    }
    for (std::size_t i = 0; i < reply->elements; ++i) {
      const redisReply* range = reply->element[i];
      if (range->element[0]->integer <= slot && slot <= range->element[1]->integer) {
        return static_cast<int>(range->element[2]->element[1]->integer);
      }
    }
  }
  return -1;
}

std::vector<int> RedisCluster::masterPorts() {
  std::vector<int> out;
  for (auto& node : nodes_) {
    if (!node->running()) {
      continue;
    }
    ReplyPtr reply = node->command({"CLUSTER", "SLOTS"});
    for (std::size_t i = 0; reply && i < reply->elements; ++i) {
      out.push_back(static_cast<int>(reply->element[i]->element[2]->element[1]->integer));
    }
    break;
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int RedisCluster::replicaOf(int master_port) {
  const std::string master = ":" + std::to_string(master_port) + "\r\n";
  for (auto& node : nodes_) {
    if (!node->running() || node->port() == master_port) {
      continue;
    }
    const std::string info = text(node->command({"INFO", "replication"}));
    if (info.find("role:slave") != std::string::npos &&
        info.find("master_port" + master) != std::string::npos &&
        info.find("master_link_status:up") != std::string::npos) {
      return node->port();
    }
  }
  return -1;
}

namespace {

/// The value of `field` ("master_repl_offset") in an INFO text; -1 when absent.
long long infoNumber(const std::string& info, const std::string& field) {
  const std::size_t at = info.find("\n" + field + ":");
  if (at == std::string::npos) {
    return -1;
  }
  return std::stoll(info.substr(at + field.size() + 2));
}

}  // namespace

bool RedisCluster::waitReplicated(int master_port, int replica_port,
                                  std::chrono::milliseconds timeout) {
  const long long written = infoNumber(
      "\n" + text(byPort(master_port).command({"INFO", "replication"})), "master_repl_offset");
  if (written < 0) {
    return false;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string info = "\n" + text(byPort(replica_port).command({"INFO", "replication"}));
    if (info.find("master_port:" + std::to_string(master_port) + "\r") != std::string::npos &&
        infoNumber(info, "slave_repl_offset") >= written) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void RedisCluster::waitOk(std::chrono::milliseconds timeout, int slot, int owner) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    bool ok = true;
    std::map<int, int> owners;
    for (auto& node : nodes_) {
      if (!node->running()) {
        continue;
      }
      last = text(node->command({"CLUSTER", "INFO"}));
      if (last.find("cluster_state:ok") == std::string::npos) {
        ok = false;
        break;
      }
    }
    if (ok && slot >= 0) {
      std::vector<int> seen;
      for (auto& node : nodes_) {
        if (!node->running()) {
          continue;
        }
        ReplyPtr reply = node->command({"CLUSTER", "SLOTS"});
        int owner = -1;
        for (std::size_t i = 0; reply && i < reply->elements; ++i) {
          const redisReply* range = reply->element[i];
          if (range->element[0]->integer <= slot && slot <= range->element[1]->integer) {
            owner = static_cast<int>(range->element[2]->element[1]->integer);
          }
        }
        seen.push_back(owner);
      }
      ok = !seen.empty() && seen.front() >= 0 &&
           std::all_of(seen.begin(), seen.end(), [&](int p) { return p == seen.front(); }) &&
           (owner < 0 || seen.front() == owner);
    }
    if (ok) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("the cluster did not reach cluster_state:ok:\n" + last);
}

void RedisCluster::beginSlotMigration(int slot, RedisServer& from, RedisServer& to) {
  const std::string s = std::to_string(slot);
  expectOk(to.command({"CLUSTER", "SETSLOT", s, "IMPORTING", nodeId(from)}), "IMPORTING");
  expectOk(from.command({"CLUSTER", "SETSLOT", s, "MIGRATING", nodeId(to)}), "MIGRATING");
  while (true) {
    ReplyPtr keys = from.command({"CLUSTER", "GETKEYSINSLOT", s, "100"});
    if (!keys || keys->type != REDIS_REPLY_ARRAY || keys->elements == 0) {
      break;
    }
    std::vector<std::string> migrate = {"MIGRATE", "127.0.0.1", std::to_string(to.port()), "", "0",
                                        "5000",    "KEYS"};
    for (std::size_t i = 0; i < keys->elements; ++i) {
      migrate.emplace_back(keys->element[i]->str, keys->element[i]->len);
    }
    expectOk(from.command(migrate), "MIGRATE");
  }
}

void RedisCluster::finishSlotMigration(int slot, RedisServer& to) {
  const std::string s = std::to_string(slot);
  const std::string id = nodeId(to);
  expectOk(to.command({"CLUSTER", "SETSLOT", s, "NODE", id}), "SETSLOT NODE");
  for (int port : masterPorts()) {
    if (port != to.port()) {
      expectOk(byPort(port).command({"CLUSTER", "SETSLOT", s, "NODE", id}), "SETSLOT NODE");
    }
  }
}

}  // namespace sluice::test
