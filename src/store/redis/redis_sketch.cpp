#include "store/redis/redis_sketch.hpp"

#include <algorithm>
#include <array>
#include <random>

#include "store/redis/cluster_slots.hpp"
#include "store/redis/redis_errors.hpp"

namespace sluice::redis {

std::string sketchSeedKey(std::string_view prefix) {
  std::string key(prefix);
  key += ":sketch-seed";
  return key;
}

Result<std::shared_ptr<const SketchHasher>> sketchHasherFromReply(const Reply& reply,
                                                                  std::string_view key) {
  std::uint64_t k0 = 0;
  std::uint64_t k1 = 0;
  if (reply.type != Reply::Type::kString || !SketchHasher::parseSeed(reply.str, k0, k1)) {
    return redisError(FailureSource::kProtocol, 0,
                      "the sketch seed in Redis (" + std::string(key) + ") is not 32 hex digits");
  }
  return std::make_shared<const SketchHasher>(k0, k1);
}

std::string randomSketchSeed() {
  std::random_device random;
  const std::uint64_t k0 = (static_cast<std::uint64_t>(random()) << 32) ^ random();
  const std::uint64_t k1 = (static_cast<std::uint64_t>(random()) << 32) ^ random();
  return SketchHasher::formatSeed(k0, k1);
}

std::uint32_t clusterShardWidth(std::uint32_t width) {
  const std::uint32_t per_slot = (width + kClusterSlots - 1) / kClusterSlots;
  return std::max<std::uint32_t>(per_slot, 16);
}

const std::string& slotTag(int slot) {
  // The first tag found for each slot, trying "0", "1", "2", ... (about 160k CRCs, once).
  static const std::array<std::string, kClusterSlots> kTags = [] {
    std::array<std::string, kClusterSlots> tags;
    int missing = kClusterSlots;
    for (std::uint64_t i = 0; missing > 0; ++i) {
      std::string tag = std::to_string(i);
      const int s = crc16(tag) % kClusterSlots;
      if (tags[static_cast<std::size_t>(s)].empty()) {
        tags[static_cast<std::size_t>(s)] = std::move(tag);
        --missing;
      }
    }
    return tags;
  }();
  return kTags[static_cast<std::size_t>(slot) % kClusterSlots];
}

SketchPlacement placeSketch(std::string_view prefix, const StoreLimit& limit,
                            std::string_view fingerprint, bool clustered, int slot) {
  SketchPlacement out;
  out.geometry = limit.params.sketch;
  std::string base(prefix);
  base += ":{";
  if (clustered) {
    base += slotTag(slot);
  }
  base += "}:sk:";
  base.append(fingerprint);
  base += ':';
  base += limit.params.sketch.identity ? limit.params.sketch.identity->key : std::string();
  if (clustered) {
    out.geometry.width = clusterShardWidth(limit.params.sketch.width);
    if (out.geometry.bloom_bits > 0) {
      out.geometry.bloom_bits = clusterShardWidth(out.geometry.bloom_bits) * 4;
    }
    base += ":s" + std::to_string(out.geometry.width);
  }
  out.even_key = base + ":0";
  out.odd_key = base + ":1";
  return out;
}

void appendSketchCells(std::vector<std::string>& args, const SketchParams& geometry,
                       const SketchCells& cells) {
  args.push_back(std::to_string(geometry.counter_bits));
  args.push_back(std::to_string(geometry.depth));
  args.push_back(std::to_string(geometry.width));
  args.push_back(std::to_string(geometry.bloom_bits));
  args.push_back(std::to_string(geometry.bloom_bits > 0 ? geometry.bloom_hashes : 0));
  for (std::uint32_t r = 0; r < geometry.depth; ++r) {
    args.push_back(std::to_string(cells.columns[r]));
  }
  if (geometry.bloom_bits > 0) {
    for (std::uint32_t j = 0; j < geometry.bloom_hashes; ++j) {
      args.push_back(std::to_string(cells.bloom[j]));
    }
  }
}

}  // namespace sluice::redis
