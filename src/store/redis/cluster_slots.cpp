#include "store/redis/cluster_slots.hpp"

#include <algorithm>
#include <charconv>

#include "store/redis/redis_errors.hpp"

namespace sluice::redis {
namespace {

Error badReply(const std::string& what) {
  return redisError(FailureSource::kProtocol, 0, "CLUSTER SLOTS: " + what);
}

std::optional<int> parseInt(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

/// [host, port, id, ...] -> a node; nullopt when the endpoint is unknown ("?").
Result<std::optional<ClusterNode>> parseNode(const Reply& reply, std::string_view queried_host) {
  if (reply.type != Reply::Type::kArray || reply.elements.size() < 2 ||
      reply.elements[0].type != Reply::Type::kString ||
      reply.elements[1].type != Reply::Type::kInteger) {
    return badReply("a node is not [host, port, ...]");
  }
  const Reply::Type id_type =
      reply.elements.size() > 2 ? reply.elements[2].type : Reply::Type::kNil;
  ClusterNode node;
  node.host = reply.elements[0].str;
  if (node.host == "?") {
    return std::optional<ClusterNode>();
  }
  if (node.host.empty()) {
    node.host = std::string(queried_host);
  }
  if (reply.elements[1].integer <= 0 || reply.elements[1].integer > 65535) {
    return badReply("port " + std::to_string(reply.elements[1].integer) + " out of range");
  }
  node.port = static_cast<int>(reply.elements[1].integer);
  if (id_type == Reply::Type::kString) {
    node.id = reply.elements[2].str;
  }
  return std::optional<ClusterNode>(std::move(node));
}

}  // namespace

std::uint16_t crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc ^= static_cast<std::uint16_t>(byte) << 8;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

int keyHashSlot(std::string_view key) {
  const std::size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return crc16(key) & (kClusterSlots - 1);
}

std::string ClusterNode::address() const { return host + ":" + std::to_string(port); }

bool ClusterTopology::coversAllSlots() const {
  int next = 0;
  for (const SlotRange& range : ranges) {
    if (range.first > next) {
      return false;
    }
    next = std::max(next, range.last + 1);
  }
  return next >= kClusterSlots;
}

std::string ClusterTopology::describe() const {
  std::string out;
  for (const SlotRange& range : ranges) {
    if (!out.empty()) {
      out += ", ";
    }
    out += std::to_string(range.first) + "-" + std::to_string(range.last) + " " +
           range.master.address();
  }
  return out;
}

Result<ClusterTopology> parseClusterSlots(const Reply& reply, std::string_view queried_host) {
  if (reply.type != Reply::Type::kArray) {
    return badReply("not an array");
  }
  ClusterTopology topology;
  for (const Reply& entry : reply.elements) {
    if (entry.type != Reply::Type::kArray || entry.elements.size() < 3 ||
        entry.elements[0].type != Reply::Type::kInteger ||
        entry.elements[1].type != Reply::Type::kInteger) {
      return badReply("a range is not [first, last, master, ...]");
    }
    SlotRange range;
    const long long first = entry.elements[0].integer;
    const long long last = entry.elements[1].integer;
    if (first < 0 || last < first || last >= kClusterSlots) {
      return badReply("slot range " + std::to_string(first) + "-" + std::to_string(last));
    }
    range.first = static_cast<int>(first);
    range.last = static_cast<int>(last);
    auto master = parseNode(entry.elements[2], queried_host);
    if (!master) {
      return master.error();
    }
    if (!*master) {
      return badReply("the master of slots " + std::to_string(first) + "-" + std::to_string(last) +
                      " has no known endpoint");
    }
    range.master = std::move(**master);
    for (std::size_t i = 3; i < entry.elements.size(); ++i) {
      auto replica = parseNode(entry.elements[i], queried_host);
      if (!replica) {
        return replica.error();
      }
      if (*replica) {
        range.replicas.push_back(std::move(**replica));
      }
    }
    topology.ranges.push_back(std::move(range));
  }
  std::sort(topology.ranges.begin(), topology.ranges.end(),
            [](const SlotRange& a, const SlotRange& b) { return a.first < b.first; });
  return topology;
}

std::optional<Redirect> parseRedirect(std::string_view reply_error) {
  Redirect redirect;
  if (reply_error.starts_with("MOVED ")) {
    redirect.kind = Redirect::Kind::kMoved;
    reply_error.remove_prefix(6);
  } else if (reply_error.starts_with("ASK ")) {
    redirect.kind = Redirect::Kind::kAsk;
    reply_error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const std::size_t space = reply_error.find(' ');
  if (space == std::string_view::npos) {
    return std::nullopt;
  }
  auto slot = parseInt(reply_error.substr(0, space));
  std::string_view endpoint = reply_error.substr(space + 1);
  // The port follows the last ':' (an IPv6 host has colons of its own).
  const std::size_t colon = endpoint.rfind(':');
  if (!slot || *slot < 0 || *slot >= kClusterSlots || colon == std::string_view::npos) {
    return std::nullopt;
  }
  auto port = parseInt(endpoint.substr(colon + 1));
  if (!port || *port <= 0 || *port > 65535) {
    return std::nullopt;
  }
  redirect.slot = *slot;
  redirect.host = std::string(endpoint.substr(0, colon));
  redirect.port = *port;
  return redirect;
}

}  // namespace sluice::redis
