#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/common/result.hpp"
#include "store/redis/redis_connection.hpp"

/// Redis Cluster's key space: hash slots, the CLUSTER SLOTS reply, MOVED/ASK redirects.
/// Pure functions (no I/O), private to the Redis stores and their tests.
namespace sluice::redis {

inline constexpr int kClusterSlots = 16384;

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes
/// keys with: crc16("123456789") == 0x31C3.
std::uint16_t crc16(std::string_view data);

/// Redis' keyHashSlot: crc16 of the key modulo 16384, or of its hash tag when the key has
/// one: the bytes between the first '{' and the first '}' after it, if that is not empty.
int keyHashSlot(std::string_view key);

/// A node as CLUSTER SLOTS names it.
struct ClusterNode {
  std::string host;
  int port = 0;
  std::string id;  ///< node id ("" when the reply had none)

  /// "host:port"
  std::string address() const;
  friend bool operator==(const ClusterNode&, const ClusterNode&) = default;
};

/// One range of slots and the nodes that serve it.
struct SlotRange {
  int first = 0;  ///< inclusive
  int last = 0;   ///< inclusive
  ClusterNode master;
  std::vector<ClusterNode> replicas;
};

/// The cluster's slot map as one node reported it.
struct ClusterTopology {
  std::vector<SlotRange> ranges;  ///< sorted by first slot

  /// True when every one of the 16384 slots has a master.
  bool coversAllSlots() const;
  /// One line per range: "0-5460 127.0.0.1:7000", for logs and change detection.
  std::string describe() const;
};

/// Parses a CLUSTER SLOTS reply. `queried_host` replaces an empty host (Redis' "same host
/// as the node you asked"). Nodes whose endpoint is unknown ("?") are left out of the
/// replicas; a range whose master is unknown is an error. kScript (unexpected reply) when
/// the shape is wrong.
Result<ClusterTopology> parseClusterSlots(const Reply& reply, std::string_view queried_host);

/// A MOVED or ASK error reply: "MOVED 3999 127.0.0.1:6381".
struct Redirect {
  enum class Kind { kMoved, kAsk };
  Kind kind = Kind::kMoved;
  int slot = 0;
  std::string host;  ///< empty when Redis does not know the endpoint's host
  int port = 0;
};

/// The redirect named by an error reply's text, or nullopt when it is not one.
std::optional<Redirect> parseRedirect(std::string_view reply_error);

}  // namespace sluice::redis
